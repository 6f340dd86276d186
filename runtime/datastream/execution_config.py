"""PyFlink's ``ExecutionConfig`` (``env.get_config()``): settings of the running job that are not checkpoints.

>>> from runtime import StreamExecutionEnvironment
>>> config = StreamExecutionEnvironment.get_execution_environment().get_config()
>>> config.get_auto_watermark_interval()
200
>>> config.set_auto_watermark_interval(50).get_auto_watermark_interval()
50
"""

from __future__ import annotations

from runtime.settings.configuration import Configuration
from runtime.settings.parsers import parse_duration_ms

__all__ = ["ExecutionConfig"]


class ExecutionConfig:
    """The environment's execution settings; parallelism reads and writes the environment's own.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.get_config().set_parallelism(3) and env.get_parallelism()
    3
    """

    def __init__(self, environment):
        self._environment = environment
        self._auto_watermark_interval_ms = 200  # Flink's default
        self._global_job_parameters = Configuration()
        self._object_reuse = False

    def set_auto_watermark_interval(self, interval) -> "ExecutionConfig":
        """How often sources emit watermarks (ms, or a ``Duration``); 0 turns periodic watermarks off."""
        self._auto_watermark_interval_ms = parse_duration_ms(interval, "set_auto_watermark_interval")
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._auto_watermark_interval_ms

    def set_parallelism(self, parallelism: int) -> "ExecutionConfig":
        self._environment.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._environment.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "ExecutionConfig":
        self._environment.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int | None:
        return self._environment.get_max_parallelism()

    def set_global_job_parameters(self, parameters: Configuration) -> "ExecutionConfig":
        """Parameters every function can read (``runtime_context.get_job_parameter(key, default)``)."""
        self._global_job_parameters = Configuration(parameters)
        return self

    def get_global_job_parameters(self) -> Configuration:
        return Configuration(self._global_job_parameters)

    def enable_object_reuse(self) -> "ExecutionConfig":
        """Accepted: Chandy hands records between chained operators as they are, never copied, in any case."""
        self._object_reuse = True
        return self

    def disable_object_reuse(self) -> "ExecutionConfig":
        self._object_reuse = False
        return self

    def is_object_reuse_enabled(self) -> bool:
        return self._object_reuse
