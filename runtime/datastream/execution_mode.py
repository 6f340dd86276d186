"""PyFlink's ``pyflink.datastream.execution_mode``: ``RuntimeExecutionMode``.

>>> from runtime.datastream.execution_mode import RuntimeExecutionMode
>>> RuntimeExecutionMode.STREAMING
<RuntimeExecutionMode.STREAMING: 'STREAMING'>
"""

from enum import Enum

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(Enum):
    """How a job runs: ``STREAMING`` (records flow as they come, checkpoints, exactly-once after failures),
    ``BATCH`` (Flink's batch semantics for bounded input: not in Chandy yet), ``AUTOMATIC`` (batch when every
    source is bounded, else streaming: Chandy runs it as streaming, which gives bounded jobs the same
    final result).

    >>> RuntimeExecutionMode["AUTOMATIC"].value
    'AUTOMATIC'
    """

    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"
