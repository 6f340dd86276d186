"""Chandy's runtime: the DataStream API, the job graph, and the machinery that runs it on Spark.

The names below are PyFlink's; they are loaded on first use, so that importing a low-level part of the
runtime (``runtime.keys``, ``runtime.protocol``) never pulls in the API, the driver or Spark.

>>> from runtime import StreamExecutionEnvironment, Types
>>> StreamExecutionEnvironment.get_execution_environment().set_parallelism(2).get_parallelism()
2
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "StreamExecutionEnvironment": "runtime.datastream.stream_execution_environment",
    "DataStream": "runtime.datastream.data_stream",
    "KeyedStream": "runtime.datastream.data_stream",
    "DataStreamSink": "runtime.datastream.data_stream",
    "CheckpointConfig": "runtime.checkpoint_config",
    "CheckpointingMode": "runtime.checkpoint_config",
    "RestartStrategies": "runtime.checkpoint_config",
    "JobClient": "runtime.driver.result",
    "JobResult": "runtime.driver.result",
    "JobStatus": "runtime.driver.result",
    "Types": "runtime.types",
    "Row": "runtime.types",
    "RowKind": "runtime.types",
    "Duration": "runtime.settings.durations",
    "Configuration": "runtime.configuration",
    "RuntimeExecutionMode": "runtime.datastream.execution_mode",
    "Time": "runtime.settings.durations",
    "WatermarkStrategy": "operators.watermark_strategy",
    "TimestampAssigner": "operators.watermark_strategy",
    "OutputTag": "runtime.side_outputs",
    "ChandyError": "runtime.errors",
    "JobGraphError": "runtime.errors",
    "UnpicklableFunctionError": "runtime.errors",
    "InsufficientSlotsError": "runtime.errors",
    "JobFailedError": "runtime.errors",
    "JobCancelledError": "runtime.errors",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
