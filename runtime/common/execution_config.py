"""PyFlink's ``pyflink.common.execution_config``.

>>> from runtime.datastream import StreamExecutionEnvironment
>>> config = StreamExecutionEnvironment.get_execution_environment().get_config()
>>> isinstance(config, ExecutionConfig), config.get_auto_watermark_interval()
(True, 200)
"""

from runtime.datastream.execution_config import ExecutionConfig

__all__ = ["ExecutionConfig"]
