"""The operator behind ``assign_timestamps_and_watermarks`` and ``from_source(source, watermark_strategy)``.

It stamps each record with the timestamp its strategy's assigner extracts, feeds the timestamps to the
watermark generator, and, every auto-watermark interval, the subtask asks it for the watermark to send on
(:meth:`TimestampsAndWatermarksOperator.on_periodic_emit`). Watermarks from upstream stop here, except the
last one (the end of the input), as in Flink. With ``with_idleness``, a subtask that saw no record for the
idle timeout says it is idle, so downstream watermarks stop waiting for it, and active again once it has
records.

>>> from operators.context import SubtaskInfo
>>> from operators.watermark_strategy import WatermarkStrategy
>>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(100).with_timestamp_assigner(lambda r, _: r * 10)
>>> op = TimestampsAndWatermarksOperator("stamp", strategy)
>>> op.setup(SubtaskInfo("stamp", 0, 1, 128, 0)); op.open()
>>> op.process_batch([50, 40, 60])
TimestampedBatch([50, 40, 60], timestamps=[500, 400, 600])
>>> op.on_periodic_emit(now=0.0)   # 600 - 100 - 1
[Watermark(timestamp=499)]
>>> op.on_periodic_emit(now=0.2)   # nothing new: nothing to send
[]
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from operators.operator import OneInputOperator
from operators.watermark_strategy import (
    BoundedOutOfOrdernessWatermarks,
    WatermarkStrategy,
    _CallableAssigner,
    _NoWatermarks,
    _RecordTimestamps,
    checked_timestamps,
)
from runtime.errors import ApiUsageError, FunctionContractError
from runtime.protocol.events import MAX_WATERMARK, Event, Watermark, WatermarkStatus
from runtime.protocol.records import SplitBatch, TimestampedBatch

__all__ = ["TimestampsAndWatermarksOperator", "ColumnarTimestampsAndWatermarksOperator", "column_millis"]


class _SplitClock:
    """One split's watermark generator and when it last had a record."""

    __slots__ = ("generator", "last_record_at")

    def __init__(self, generator, now: float):
        self.generator = generator
        self.last_record_at = now

    def idle(self, now: float, timeout: float | None) -> bool:
        if getattr(self.generator.__dict__.get("_chandy_output"), "idle", False):
            return True
        return timeout is not None and now - self.last_record_at >= timeout


class TimestampsAndWatermarksOperator(OneInputOperator):
    generates_watermarks = True

    def __init__(self, name: str, strategy: WatermarkStrategy):
        super().__init__(name, strategy)
        self.strategy = strategy
        # The source chained just before, when its reader keeps splits (a Kafka source's partitions): then one
        # generator per split, as Flink's source operator keeps, and the subtask's watermark is the lowest of the
        # splits that are not idle, so an empty partition holds event time back only until it is idle. Set by the
        # subtask that chains them (runtime.executor.subtask).
        self.split_source = None
        self._splits: dict = {}

    def open(self) -> None:
        assigner = self.strategy.create_timestamp_assigner()
        # Without an assigner of the user's, records keep the timestamps they have, and one without keeps none
        # (Flink's: a sequence's numbers under for_monotonous_timestamps() are no error).
        self.record_timestamps = isinstance(assigner, _RecordTimestamps)
        # A plain function skips a method call per record.
        self.extract = assigner.function if isinstance(assigner, _CallableAssigner) else assigner.extract_timestamp
        opener = getattr(assigner, "open", None)
        if callable(opener) and not isinstance(assigner, _CallableAssigner):
            opener(self.runtime_context)
        self.generator = self.strategy.create_watermark_generator()
        idle_ms = self.strategy.idle_timeout_ms
        self.idle_timeout = None if idle_ms is None else idle_ms / 1000.0
        self.emitted = self.watermark
        self.idle = False
        self.last_record_at = time.monotonic()

    def process_batch(self, records: list) -> list:
        extract = self.extract
        kind = type(records)
        if self.record_timestamps:
            timestamps = list(records.timestamps) if kind is TimestampedBatch or kind is SplitBatch \
                else [None] * len(records)
            if not timestamps or None in timestamps:
                return self._without_timestamps(records, timestamps)
        elif kind is TimestampedBatch or kind is SplitBatch:
            timestamps = checked_timestamps([extract(r, t) for r, t in zip(records, records.timestamps)], records,
                                            self.name)
        else:
            timestamps = checked_timestamps([extract(r, None) for r in records], records, self.name)
        if timestamps:
            if kind is SplitBatch and self.split_source is not None:
                self._per_split(records, timestamps)
            else:
                self.generator.on_batch(timestamps, records)
            if self.idle_timeout is not None:
                self.last_record_at = time.monotonic()
        return TimestampedBatch.of(records, timestamps)

    def _without_timestamps(self, records: list, timestamps: list) -> list:
        """A batch in which some records have no timestamp (and no assigner gives them one): the generator sees
        the others; all go on as they are."""
        stamped = [(t, r) for t, r in zip(timestamps, records) if t is not None]
        if stamped:
            if type(records) is SplitBatch and self.split_source is not None:
                splits = [s for t, s in zip(timestamps, records.splits) if t is not None]
                self._per_split(SplitBatch.of_splits([r for _, r in stamped], [t for t, _ in stamped], splits),
                                [t for t, _ in stamped])
            else:
                self.generator.on_batch([t for t, _ in stamped], [r for _, r in stamped])
        if records and self.idle_timeout is not None:
            self.last_record_at = time.monotonic()
        return TimestampedBatch.of(records, timestamps) if stamped else list(records)

    def _per_split(self, records: SplitBatch, timestamps: list) -> None:
        grouped: dict = {}
        for record, timestamp, split in zip(records, timestamps, records.splits):
            group = grouped.get(split)
            if group is None:
                group = grouped[split] = ([], [])
            group[0].append(timestamp)
            group[1].append(record)
        now = time.monotonic()
        for split, (split_timestamps, split_records) in grouped.items():
            clock = self._splits.get(split)
            if clock is None:
                clock = self._splits[split] = _SplitClock(self.strategy.create_watermark_generator(), now)
            clock.generator.on_batch(split_timestamps, split_records)
            clock.last_record_at = now

    def _split_watermark(self, now: float) -> tuple[int, bool]:
        """(the lowest watermark of the splits that are not idle, whether every split is idle): the splits are those
        the reader holds now (a split it gave up is forgotten; one it has not read from yet holds back)."""
        held = set(self.split_source.assigned_splits())
        for split in [s for s in self._splits if s not in held]:
            del self._splits[split]
        for split in held:
            if split not in self._splits:
                self._splits[split] = _SplitClock(self.strategy.create_watermark_generator(), now)
        # A split with records still to read is not idle, however long its last record is ago (a partition whose
        # backlog the consumer has not fetched yet): only one at its end can be, and hold nothing back.
        busy = set(self.split_source.backlogged_splits() or ())
        active = [clock.generator.current_watermark() for split, clock in self._splits.items()
                  if split in busy or not clock.idle(now, self.idle_timeout)]
        return (min(active), False) if active else (self.emitted, True)

    def on_periodic_emit(self, now: float | None = None) -> list[Event]:
        """The events to send on now: a watermark if it advanced, and a change of idleness."""
        events: list[Event] = []
        now = time.monotonic() if now is None else now
        if self.split_source is not None and self.split_source.assigned_splits() is not None:
            watermark, idle = self._split_watermark(now)
        else:
            generator = self.generator
            watermark = generator.current_watermark()
            idle = getattr(generator.__dict__.get("_chandy_output"), "idle", False)
            if self.idle_timeout is not None and not idle:
                idle = now - self.last_record_at >= self.idle_timeout
        if idle != self.idle:
            self.idle = idle
            events.append(WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE)
        if not idle and watermark > self.emitted:
            self.emitted = watermark
            events.append(Watermark(watermark))
        return events

    def process_watermark(self, watermark: int) -> list:
        # Only the end of input gets here (the subtask stops other upstream watermarks before this operator).
        self.watermark = watermark
        if watermark == MAX_WATERMARK:
            self.emitted = MAX_WATERMARK
        return []


def column_millis(column: pa.Array, operator_name: str, name: str) -> pa.Array:
    """An integer (epoch ms) or timestamp column as int64 milliseconds; nulls fail naming the column.

    >>> import pyarrow as pa, datetime
    >>> column_millis(pa.array([datetime.datetime(1970, 1, 1, 0, 0, 1)]), "stamp", "ts").to_pylist()
    [1000]
    """
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", column.type.tz), safe=False).cast(pa.int64())
    elif pa.types.is_integer(column.type):
        column = column.cast(pa.int64())
    else:
        raise FunctionContractError(f"'{operator_name}': timestamp column '{name}' holds {column.type}; event time "
                                    "needs integer epoch milliseconds or an Arrow timestamp column.")
    if column.null_count:
        raise FunctionContractError(f"'{operator_name}': timestamp column '{name}' has {column.null_count} null(s): "
                                    "every row needs its event time (fill or filter them in map_batches first).")
    return column


class ColumnarTimestampsAndWatermarksOperator(TimestampsAndWatermarksOperator):
    """Watermarks for a columnar stream from one of its columns: batches pass unchanged, the generator sees
    each batch's highest timestamp (only the built-in generators, which need no more than that).

    >>> import pyarrow as pa
    >>> from operators.context import SubtaskInfo
    >>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(100)
    >>> op = ColumnarTimestampsAndWatermarksOperator("stamp", strategy, "ts")
    >>> op.setup(SubtaskInfo("stamp", 0, 1, 128, 0)); op.open()
    >>> _ = op.process_batch([pa.record_batch({"ts": [500, 900, 700]})])
    >>> op.on_periodic_emit(now=0.0)
    [Watermark(timestamp=799)]
    """

    def __init__(self, name: str, strategy: WatermarkStrategy, column: str):
        super().__init__(name, strategy)
        self.column = column

    def open(self) -> None:
        super().open()
        if type(self.generator) not in (BoundedOutOfOrdernessWatermarks, _NoWatermarks):
            raise ApiUsageError(
                f"'{self.name}': a columnar stream's watermarks come from for_monotonous_timestamps, "
                "for_bounded_out_of_orderness or no_watermarks; for your own WatermarkGenerator, use to_rows() first.")

    def process_batch(self, batches: list) -> list:
        highest = None
        for batch in batches:
            if batch.num_rows:
                top = pc.max(column_millis(batch.column(self.column), self.name, self.column)).as_py()
                highest = top if highest is None or top > highest else highest
        if highest is not None:
            self.generator.on_batch([highest])
            if self.idle_timeout is not None:
                self.last_record_at = time.monotonic()
        return batches
