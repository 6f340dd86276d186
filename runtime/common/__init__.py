"""PyFlink's ``pyflink.common``: type information, rows, spans of time, restart strategies, job client and
status.

>>> from runtime.common import Types
>>> Types.LONG()
LONG
"""

from runtime.common import configuration as _configuration
from runtime.common import job_client as _job_client
from runtime.common import job_execution_result as _job_execution_result
from runtime.common import job_status as _job_status
from runtime.common import time as _time
from runtime.common import typeinfo as _typeinfo
from runtime.common import types as _types
from runtime.common import watermark_strategy as _watermark_strategy
from runtime.common.configuration import *  # noqa: F403
from runtime.common.job_client import *  # noqa: F403
from runtime.common.job_execution_result import *  # noqa: F403
from runtime.common.job_status import *  # noqa: F403
from runtime.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from runtime.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from runtime.common.time import *  # noqa: F403
from runtime.common.typeinfo import *  # noqa: F403
from runtime.common.types import *  # noqa: F403
from runtime.common.watermark_strategy import *  # noqa: F403

# Each module's names, a few of the restart strategies' and schemas' (those PyFlink's module names too), and
# ExecutionConfig (see __getattr__).
__all__ = [
    *_typeinfo.__all__,
    *_types.__all__,
    *_time.__all__,
    *_configuration.__all__,
    *_job_client.__all__,
    *_job_status.__all__,
    *_job_execution_result.__all__,
    *_watermark_strategy.__all__,
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Encoder",
    "SimpleStringSchema",
    "ByteArraySchema",
    "SerializationSchema",
    "DeserializationSchema",
    "ExecutionConfig",
]


def __getattr__(name: str):
    """PyFlink attaches the row formats here too (for programs of its older versions); ``ExecutionConfig`` is
    looked up when asked for, since its module imports the DataStream API, which imports this one."""
    from runtime.common import serialization

    if name == "ExecutionConfig":
        from runtime.common.execution_config import ExecutionConfig

        return ExecutionConfig
    if name in serialization._ROW_FORMATS:
        return getattr(serialization, name)
    raise AttributeError(f"module 'runtime.common' has no attribute {name!r}")
