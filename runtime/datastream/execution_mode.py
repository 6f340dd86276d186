"""PyFlink's ``pyflink.datastream.execution_mode``: ``RuntimeExecutionMode``.

>>> from runtime.datastream.execution_mode import RuntimeExecutionMode
>>> RuntimeExecutionMode.STREAMING
<RuntimeExecutionMode.STREAMING: 'STREAMING'>
"""

from enum import Enum

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(Enum):
    """How a job runs: ``STREAMING`` (records flow as they come, checkpoints, exactly-once after failures),
    ``BATCH`` (Flink's batch semantics for bounded input: each key's records together, timers and windows at
    the end, final values only, no checkpoints), ``AUTOMATIC`` (batch when every source is bounded, else
    streaming). See ``StreamExecutionEnvironment.set_runtime_mode``.

    >>> RuntimeExecutionMode["AUTOMATIC"].value
    'AUTOMATIC'
    """

    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"
