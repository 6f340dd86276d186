"""Sources: what a user implements (``Source`` / ``SourceReader``) and the built-in ones.

A source says how to split itself across subtasks; the runtime calls ``poll`` on each subtask's reader in
a loop and takes care of batching, routing and end-of-input.

>>> reader = SequenceSource(0, 9).create_reader(subtask_index=1, parallelism=2)
>>> reader.poll(100), reader.poll(100)
([5, 6, 7, 8, 9], None)
"""

from __future__ import annotations

import time
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from operators.operator import SourceOperator
from runtime.errors import ConfigurationError
from runtime.protocol.records import SplitBatch, TimestampedBatch

__all__ = ["Source", "SourceReader", "SequenceSource", "CollectionSource", "SourceReaderOperator"]


class SourceReader:
    """Reads one subtask's share of a source.

    ``union_state = True``: after a restore every reader receives the split states of all readers and keeps
    those it owns (for sources that assign splits by a rule, like FileSource); otherwise the split states
    are dealt round-robin.

    >>> class Countdown(SourceReader):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def poll(self, max_records):
    ...         self.n -= 1
    ...         return [self.n] if self.n >= 0 else None
    >>> reader = Countdown(2)
    >>> reader.poll(10), reader.poll(10), reader.poll(10)
    ([1], [0], None)
    """

    union_state = False

    def open(self, runtime_context) -> None:
        """Called once before the first poll."""

    def poll(self, max_records: int) -> list | None:
        """Return up to ``max_records`` records, ``[]`` if none are ready yet, or ``None`` when done.

        An unbounded reader never returns None; it should wait briefly (a few ms) rather than return
        ``[]`` in a tight loop.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Called once after the last poll, or when the job is cancelled."""

    def snapshot_state(self) -> list:
        """The reader's position at a checkpoint: a list of picklable split states.

        Called between polls, so it describes exactly the records returned so far. On restore (perhaps at
        another parallelism) the splits of all subtasks are dealt round-robin to the new readers.
        """
        raise NotImplementedError(
            f"{type(self).__name__} cannot be checkpointed: implement snapshot_state() and restore_state() so "
            "that a restore resumes where the checkpoint was (or disable checkpointing)."
        )

    def restore_state(self, splits: list) -> None:
        """Resume from ``splits`` (this subtask's share of a checkpoint's split states); called before open."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore from a checkpoint")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` (and every earlier one) is committed; called between polls."""

    def snapshot_taken(self, checkpoint_id: int, splits: list) -> None:
        """Called right after :meth:`snapshot_state` with the checkpoint's id and what it returned, for readers
        that act when that checkpoint completes (a Kafka reader commits those offsets to its consumer group)."""

    def assigned_splits(self) -> list | None:
        """The ids of the splits this reader holds now, for readers whose polls return a
        :class:`~runtime.protocol.records.SplitBatch` (each record's split): the watermark operator chained after
        the source keeps one watermark per split. None (the default): the reader keeps no splits apart."""
        return None

    def backlogged_splits(self) -> list | None:
        """Of :meth:`assigned_splits`, those known to have records this reader has not read yet (a Kafka partition
        it has not reached the end of): never idle, however long since their last record came. None: unknown."""
        return None


class Source:
    """A source of records. ``parallel = False`` runs it as one subtask whatever the job's parallelism.

    A columnar source sets ``schema`` to a ``pyarrow.Schema``: its ``poll(n)`` then returns a list of Arrow
    record batches of that schema with at most ``n`` rows in all, and the stream it starts is columnar.

    >>> class Squares(Source):  # subtask i of p reads i, i + p, i + 2p, ... below 6, squared
    ...     def create_reader(self, subtask_index, parallelism):
    ...         return CollectionSource([i * i for i in range(subtask_index, 6, parallelism)]).create_reader(0, 1)
    >>> Squares().create_reader(subtask_index=1, parallelism=2).poll(10)
    [1, 9, 25]
    """

    parallel = True
    bounded = True
    schema: pa.Schema | None = None

    @property
    def produced_type(self):
        """The type of the records (a ``TypeInformation``), as Flink's sources declare theirs; None: any Python
        value. A stream read from the source has this type unless ``from_source`` is given another."""
        return None

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        raise NotImplementedError


PACE_STEP_S = 0.001


class _RangeReader(SourceReader):
    """Reads splits ``[next, stop)`` with a step (``stop`` None: unbounded), one after another."""

    def __init__(self, splits: list[list], records_per_second: float | None, schema: pa.Schema | None = None):
        self.splits = splits  # [next, stop, step] each
        self.rate = records_per_second
        self.started = None
        self.emitted = 0
        self.schema = schema
        self._offsets = pa.array([], pa.int64())  # 0, 1, 2, ...: a columnar batch is start + offsets * step

    def _column(self, start: int, count: int, step: int) -> pa.RecordBatch:
        if len(self._offsets) < count:
            self._offsets = pa.array(range(count), pa.int64())
        values = pc.add(pc.multiply(self._offsets.slice(0, count), step), start)
        return pa.RecordBatch.from_arrays([values], schema=self.schema)

    def poll(self, max_records: int) -> list | None:
        while self.splits and self.splits[0][1] is not None and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        if self.rate:
            now = time.monotonic()
            if self.started is None:
                self.started = now
            allowed = int((now - self.started) * self.rate) - self.emitted
            # Records are released PACE_STEP_S worth at a time (at least one): released as each falls due, a
            # fast rate made a poll of a few records every few microseconds, and the loop around each poll cost
            # more than its records.
            release = min(max_records, max(1, int(self.rate * PACE_STEP_S)))
            if allowed < release:
                time.sleep(min(0.005, (release - allowed) / self.rate))
                return []
            max_records = min(max_records, allowed)
        split = self.splits[0]
        start, stop, step = split
        end = start + max_records * step
        if stop is not None:
            end = min(end, stop)
        count = len(range(start, end, step))
        split[0] = start + count * step
        self.emitted += count
        if self.schema is not None:
            return [self._column(start, count, step)]
        return list(range(start, end, step))

    def snapshot_state(self) -> list:
        return [tuple(split) for split in self.splits]

    def restore_state(self, splits: list) -> None:
        self.splits = [list(split) for split in splits]


class SequenceSource(Source):
    """The integers ``start..end`` inclusive (unbounded when ``end`` is None), split across subtasks.

    Bounded: each subtask reads one contiguous range. Unbounded: subtask i reads ``start + i + k*p``.
    ``records_per_second`` throttles the whole source (each of p subtasks reads at 1/p of it, as Flink's
    ``RateLimiterStrategy.perSecond`` divides its rate), for latency measurements. ``columnar=True``
    emits Arrow record batches with one ``int64`` column, ``value`` (the columnar path).

    >>> SequenceSource(1, 10).create_reader(subtask_index=1, parallelism=2).poll(100)
    [6, 7, 8, 9, 10]
    >>> SequenceSource(0).create_reader(subtask_index=1, parallelism=3).poll(4)  # unbounded
    [1, 4, 7, 10]
    >>> SequenceSource(0, 2, columnar=True).create_reader(0, 1).poll(10)[0].to_pydict()
    {'value': [0, 1, 2]}
    >>> SequenceSource(0, 9).produced_type, SequenceSource(0, 2**63).produced_type
    (LONG, None)
    """

    COLUMNAR_SCHEMA = pa.schema([pa.field("value", pa.int64())])

    def __init__(self, start: int, end: int | None = None, records_per_second: float | None = None,
                 columnar: bool = False):
        if end is not None and end < start:
            raise ConfigurationError(f"from_sequence(start={start}, end={end}): end must be >= start")
        self.start = start
        self.end = end
        self.bounded = end is not None
        self.records_per_second = records_per_second
        self.schema = self.COLUMNAR_SCHEMA if columnar else None

    @property
    def produced_type(self):
        """LONG, as Flink's NumberSequenceSource declares (records cross to other subtasks as an Arrow int64
        column, not pickled), unless the numbers may leave the 64-bit range; columnar: None (it has a schema)."""
        from runtime.types import Types

        last = self.end if self.end is not None else self.start + 2**32  # unbounded: room to count
        if self.schema is None and -2**63 <= self.start and last < 2**63:
            return Types.LONG()
        return None

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        rate = self.records_per_second / parallelism if self.records_per_second else None
        if self.end is None:
            return _RangeReader([[self.start + subtask_index, None, parallelism]], rate, self.schema)
        total = self.end - self.start + 1
        lo = self.start + total * subtask_index // parallelism
        hi = self.start + total * (subtask_index + 1) // parallelism
        return _RangeReader([[lo, hi, 1]], rate, self.schema)


class _ListReader(SourceReader):
    def __init__(self, elements: Sequence):
        self.elements = elements
        self.position = 0

    def poll(self, max_records: int) -> list | None:
        if self.position >= len(self.elements):
            return None
        batch = list(self.elements[self.position:self.position + max_records])
        self.position += len(batch)
        return batch

    def snapshot_state(self) -> list:
        return [self.position]

    def restore_state(self, splits: list) -> None:
        self.position = sum(splits)  # one split: a non-parallel source always restores at parallelism 1


class CollectionSource(Source):
    """The given elements in order, from a single subtask (as Flink's ``from_collection``).

    >>> reader = CollectionSource(["a", "b", "c"]).create_reader(subtask_index=0, parallelism=1)
    >>> reader.poll(2), reader.poll(2), reader.poll(2)
    (['a', 'b'], ['c'], None)
    """

    parallel = False

    def __init__(self, elements: Sequence):
        self.elements = list(elements)

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _ListReader(self.elements)


class SourceReaderOperator(SourceOperator):
    """Runs one subtask's reader of a :class:`Source`."""

    def __init__(self, name: str, source: Source):
        super().__init__(name, source)
        self.source = source
        self.reader: SourceReader | None = None
        self.emits_side_outputs = getattr(source, "emits_side_outputs", False)

    SPLITS = "splits"
    UNION_SPLITS = "union:splits"

    def _state_name(self) -> str:
        return self.UNION_SPLITS if getattr(self._reader(), "union_state", False) else self.SPLITS

    def _reader(self) -> SourceReader:
        if self.reader is None:
            self.reader = self.source.create_reader(self.info.subtask_index, self.info.parallelism)
        return self.reader

    def restore_operator_state(self, state: dict[str, list]) -> None:
        super().restore_operator_state(state)
        self._reader().restore_state(list(state.get(self._state_name(), [])))

    def open(self) -> None:
        self._reader().open(self.runtime_context)

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        state = super().snapshot_operator_state(checkpoint_id)
        splits = state[self._state_name()] = list(self.reader.snapshot_state())
        self.reader.snapshot_taken(checkpoint_id, splits)
        self._position = repr(splits)
        return state

    def describe_position(self) -> str | None:
        return getattr(self, "_position", None)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Forwarded to the reader (and the source object), as Flink's ``SourceReader.notifyCheckpointComplete``."""
        super().notify_checkpoint_complete(checkpoint_id)
        notify = getattr(self.reader, "notify_checkpoint_complete", None)
        if notify is not None and callable(notify):
            notify(checkpoint_id)

    # Whether a watermark operator that keeps one watermark per split is chained right after (set by the subtask):
    # else a SplitBatch's splits mean nothing further on, and it goes on as the TimestampedBatch it also is.
    passes_splits = False

    def poll(self, max_records: int) -> list | None:
        batch = self.reader.poll(max_records)
        if type(batch) is SplitBatch and not self.passes_splits:
            return TimestampedBatch.of(batch, batch.timestamps)
        return batch

    def assigned_splits(self) -> list | None:
        return self.reader.assigned_splits() if self.reader is not None else None

    def backlogged_splits(self) -> list | None:
        return self.reader.backlogged_splits() if self.reader is not None else None

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
