"""Batches of records that carry event timestamps.

A batch of records is a plain ``list``. Once a stream has event time (after ``assign_timestamps_and_watermarks``
or a source that stamps its records), its batches are :class:`TimestampedBatch` values: the same list of
records, and beside it a list of their timestamps (epoch milliseconds, or None for a record without one).
Keeping the timestamps in a parallel list rather than wrapping each record costs a map nothing per record
(its output keeps the input's list of timestamps) and travels as one typed ``int64`` column on the wire.

Operators that do not know about timestamps see a list of records and return a plain list: their output has
no timestamps, as in Flink after an operator that erases them.

>>> batch = TimestampedBatch.of(["a", "b"], [1_000, 2_000])
>>> list(batch), batch.timestamps, isinstance(batch, list)
(['a', 'b'], [1000, 2000], True)
>>> import pickle
>>> pickle.loads(pickle.dumps(batch)).timestamps
[1000, 2000]
"""

from __future__ import annotations

from pyarrow import RecordBatch

__all__ = ["TimestampedBatch", "SplitBatch", "timestamps_of", "count_records", "slice_batch"]


class TimestampedBatch(list):
    """A list of records with ``timestamps``, a list of the same length (int milliseconds or None each).

    >>> TimestampedBatch.of([1, 2], [10, None]).timestamps
    [10, None]
    """

    __slots__ = ("timestamps",)

    @classmethod
    def of(cls, records, timestamps: list) -> "TimestampedBatch":
        batch = cls(records)
        batch.timestamps = timestamps
        return batch

    def with_records(self, records: list) -> "TimestampedBatch":
        """The same records, one for one, in another form (Rows for tuples): this batch's timestamps kept."""
        return TimestampedBatch.of(records, self.timestamps)

    def __reduce__(self):
        return (_rebuild, (list(self), self.timestamps))

    def __repr__(self) -> str:
        return f"TimestampedBatch({list.__repr__(self)}, timestamps={self.timestamps!r})"


class SplitBatch(TimestampedBatch):
    """A source subtask's batch that also says which split (a Kafka partition ...) each record came from:
    ``splits``, parallel to the records. The watermark operator chained after the source then keeps one watermark
    per split (Flink's per-split watermarks) and sends on the lowest of those not idle. Off the source's chain
    (pickled to another subtask) it travels as a plain :class:`TimestampedBatch`.

    >>> batch = SplitBatch.of_splits(["a", "b"], [10, 20], ["orders-0", "orders-1"])
    >>> batch.splits, type(pickle_roundtrip(batch)).__name__
    (['orders-0', 'orders-1'], 'TimestampedBatch')
    """

    __slots__ = ("splits",)

    @classmethod
    def of_splits(cls, records, timestamps: list, splits: list) -> "SplitBatch":
        batch = cls(records)
        batch.timestamps = timestamps
        batch.splits = splits
        return batch

    def with_records(self, records: list) -> "SplitBatch":
        return SplitBatch.of_splits(records, self.timestamps, self.splits)

    def __repr__(self) -> str:
        return f"SplitBatch({list.__repr__(self)}, timestamps={self.timestamps!r}, splits={self.splits!r})"


def pickle_roundtrip(value):
    import pickle

    return pickle.loads(pickle.dumps(value))


def _rebuild(records: list, timestamps: list) -> TimestampedBatch:
    return TimestampedBatch.of(records, timestamps)


def timestamps_of(batch: list) -> list | None:
    """The timestamps of ``batch``'s records, or None when it carries none.

    >>> timestamps_of([1, 2]) is None, timestamps_of(TimestampedBatch.of([1], [5]))
    (True, [5])
    """
    return batch.timestamps if type(batch) is TimestampedBatch or type(batch) is SplitBatch else None


def slice_batch(batch: list, start: int, end: int) -> list:
    """``batch[start:end]``, keeping the timestamps of a timestamped batch.

    >>> slice_batch(TimestampedBatch.of(["a", "b", "c"], [1, 2, 3]), 1, 3).timestamps, slice_batch([1, 2, 3], 0, 1)
    ([2, 3], [1])
    """
    if type(batch) is TimestampedBatch:
        return TimestampedBatch.of(batch[start:end], batch.timestamps[start:end])
    return batch[start:end]


def count_records(batch) -> int:
    """How many records ``batch`` holds: its Python records, or the rows of its Arrow record batches (a list of
    them on the columnar path, or one batch). One check per batch, never per record.

    >>> import pyarrow as pa
    >>> count_records([1, 2, 3]), count_records([pa.record_batch({"x": [1, 2]})] * 2), count_records([])
    (3, 4, 0)
    """
    n = len(batch)
    if n and batch.__class__ is list and batch[0].__class__ is RecordBatch:
        return sum(b.num_rows for b in batch)
    return n
