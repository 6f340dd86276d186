"""PyFlink's ``pyflink.datastream.connectors.number_seq``: ``NumberSequenceSource``.

>>> from runtime.common.watermark_strategy import WatermarkStrategy
>>> from runtime.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> numbers = env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "numbers")
>>> numbers.get_name()  # no_watermarks() without an assigner adds no operator
'numbers'
"""

from __future__ import annotations

from operators.sources import SequenceSource
from runtime.errors import ConfigurationError

__all__ = ["NumberSequenceSource"]


class NumberSequenceSource(SequenceSource):
    """The integers ``start..end``, both inclusive: a bounded source that splits the range into one contiguous
    sub-range per subtask, each read in order (so at parallelism 1 the whole sequence is in order).

    It is the source behind ``env.from_sequence(start, end)``, checkpointed by position like it.

    >>> NumberSequenceSource(1, 10).create_reader(subtask_index=1, parallelism=2).poll(100)
    [6, 7, 8, 9, 10]
    >>> NumberSequenceSource(5, 1)
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: NumberSequenceSource(5, 1): start must be <= end (both are inclusive).
    """

    def __init__(self, start: int, end: int):
        for value in (start, end):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigurationError(f"NumberSequenceSource({start!r}, {end!r}): start and end are integers.")
        if end < start:
            raise ConfigurationError(f"NumberSequenceSource({start}, {end}): start must be <= end (both are "
                                     "inclusive).")
        super().__init__(start, end)
