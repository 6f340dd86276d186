"""PyFlink's ``pyflink.common``: type information, rows, spans of time, restart strategies, job client and
status.

>>> from runtime.common import Types
>>> Types.LONG()
LONG
"""

from operators.watermark_strategy import TimestampAssigner, WatermarkGenerator, WatermarkOutput, WatermarkStrategy
from runtime.checkpoint_config import RestartStrategies
from runtime.common.restart_strategy import RestartStrategyConfiguration
from runtime.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from runtime.settings.configuration import Configuration
from runtime.driver.result import JobClient, JobResult, JobStatus
from runtime.settings.durations import Duration, Time
from runtime.types import Row, RowKind, TypeInformation, Types

JobExecutionResult = JobResult  # PyFlink's name for what a finished job returns

__all__ = ["Types", "TypeInformation", "Row", "RowKind", "RestartStrategies", "RestartStrategyConfiguration",
           "ExecutionConfig", "JobClient", "JobExecutionResult",
           "JobStatus", "Duration", "Time", "Configuration", "WatermarkStrategy", "TimestampAssigner",
           "WatermarkGenerator", "WatermarkOutput", "Encoder", "SimpleStringSchema", "ByteArraySchema",
           "SerializationSchema", "DeserializationSchema"]


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
