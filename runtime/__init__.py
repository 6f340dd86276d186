"""Chandy's runtime: the DataStream API, the job graph, and the machinery that runs it on Spark.

>>> from runtime import StreamExecutionEnvironment, Types
"""

from runtime.checkpoint_config import CheckpointConfig, CheckpointingMode, RestartStrategies
from runtime.datastream import DataStream, DataStreamSink, KeyedStream
from runtime.environment import StreamExecutionEnvironment
from runtime.errors import (
    ChandyError,
    InsufficientSlotsError,
    JobCancelledError,
    JobFailedError,
    JobGraphError,
    UnpicklableFunctionError,
)
from runtime.result import JobClient, JobResult, JobStatus
from runtime.side_outputs import OutputTag
from runtime.types import Row, Types

__version__ = "0.1.0"

__all__ = [
    "StreamExecutionEnvironment",
    "CheckpointConfig",
    "CheckpointingMode",
    "RestartStrategies",
    "DataStream",
    "KeyedStream",
    "DataStreamSink",
    "JobClient",
    "JobResult",
    "JobStatus",
    "Types",
    "OutputTag",
    "Row",
    "ChandyError",
    "JobGraphError",
    "UnpicklableFunctionError",
    "InsufficientSlotsError",
    "JobFailedError",
    "JobCancelledError",
    "__version__",
]
