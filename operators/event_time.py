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

from operators.operator import OneInputOperator
from operators.watermark_strategy import WatermarkStrategy, _CallableAssigner, checked_timestamps
from runtime.protocol.events import MAX_WATERMARK, Event, Watermark, WatermarkStatus
from runtime.protocol.records import TimestampedBatch

__all__ = ["TimestampsAndWatermarksOperator"]


class TimestampsAndWatermarksOperator(OneInputOperator):
    generates_watermarks = True

    def __init__(self, name: str, strategy: WatermarkStrategy):
        super().__init__(name, strategy)
        self.strategy = strategy

    def open(self) -> None:
        assigner = self.strategy.create_timestamp_assigner()
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
        if type(records) is TimestampedBatch:
            timestamps = [extract(r, t) for r, t in zip(records, records.timestamps)]
        else:
            timestamps = [extract(r, None) for r in records]
        timestamps = checked_timestamps(timestamps, records, self.name)
        if timestamps:
            self.generator.on_batch(timestamps, records)
            if self.idle_timeout is not None:
                self.last_record_at = time.monotonic()
        return TimestampedBatch.of(records, timestamps)

    def on_periodic_emit(self, now: float | None = None) -> list[Event]:
        """The events to send on now: a watermark if it advanced, and a change of idleness."""
        events: list[Event] = []
        generator = self.generator
        watermark = generator.current_watermark()
        generator_idle = getattr(generator.__dict__.get("_chandy_output"), "idle", False)
        idle = generator_idle
        if self.idle_timeout is not None and not idle:
            idle = (time.monotonic() if now is None else now) - self.last_record_at >= self.idle_timeout
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
