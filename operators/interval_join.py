"""``KeyedStream.interval_join(other).between(lower, upper).process(ProcessJoinFunction)``: Flink's
``IntervalJoinOperator``.

A left record at time ``t`` joins every right record of its key at a time in ``[t + lower, t + upper]`` (either
bound exclusive if asked). Each side keeps its records per key and time in keyed map state until the watermark
makes them useless: a left record is kept until ``t + upper`` (``t`` when ``upper`` is negative), a right record
until ``t - lower`` (``t`` when ``lower`` is positive), each dropped by an event-time timer. Records behind the
watermark are late and dropped, as in Flink. A joined pair carries the later of its two timestamps.

>>> from operators.context import SubtaskInfo
>>> from operators.functions import ProcessJoinFunction
>>> from runtime.keys.key_groups import key_group_range
>>> from runtime.protocol.records import TimestampedBatch
>>> from state_backends.heap import HeapKeyedStateBackend
>>> class Pair(ProcessJoinFunction):
...     def process_element(self, left, right, ctx):
...         yield left, right, ctx.get_timestamp()
>>> op = IntervalJoinOperator("join", Pair(), lambda r: r[0], lambda r: r[0], lower=-5, upper=10)
>>> op.setup(SubtaskInfo("join", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
>>> op.open(); op.process_batch1(TimestampedBatch.of([("k", "L")], [100]))
[]
>>> op.process_batch2(TimestampedBatch.of([("k", "r1"), ("k", "r2"), ("k", "r3")], [94, 96, 110]))
TimestampedBatch([(('k', 'L'), ('k', 'r2'), 100), (('k', 'L'), ('k', 'r3'), 110)], timestamps=[100, 110])
"""

from __future__ import annotations

from typing import Any, Callable

from operators.builtins import _check_iterable
from operators.co_operators import TwoInputOperator
from operators.timers import EVENT_TIMERS, TimerQueue
from runtime.errors import FunctionContractError
from runtime.protocol.records import TimestampedBatch
from state_backends.descriptors import MapStateDescriptor

__all__ = ["IntervalJoinOperator"]

LEFT, RIGHT = "interval-join/left", "interval-join/right"


class _JoinContext:
    """``ctx`` of ``ProcessJoinFunction.process_element``."""

    __slots__ = ("left", "right", "operator")

    def __init__(self, operator):
        self.operator = operator
        self.left = self.right = None

    def get_left_timestamp(self) -> int:
        return self.left

    def get_right_timestamp(self) -> int:
        return self.right

    def get_timestamp(self) -> int:
        return max(self.left, self.right)

    def get_current_key(self):
        return self.operator.backend.get_current_key()


class IntervalJoinOperator(TwoInputOperator):
    keyed = True

    def __init__(self, name: str, function: Any, key1: Callable, key2: Callable, lower: int, upper: int,
                 lower_inclusive: bool = True, upper_inclusive: bool = True):
        super().__init__(name, function)
        self.key1, self.key2 = key1, key2
        # Exclusive bounds become inclusive ones a millisecond inside (Flink does the same).
        self.lower = lower if lower_inclusive else lower + 1
        self.upper = upper if upper_inclusive else upper - 1

    def open(self) -> None:
        super().open()
        backend = self.backend = self.runtime_context.keyed_backend
        self.buffers = {LEFT: backend.get_state(MapStateDescriptor(LEFT)),
                        RIGHT: backend.get_state(MapStateDescriptor(RIGHT))}
        self.timers = TimerQueue(backend, EVENT_TIMERS)
        self.ctx = _JoinContext(self)
        self.late_records_dropped = 0

    def process_batch1(self, records: list) -> list:
        return self._side(records, self.key1, LEFT)

    def process_batch2(self, records: list) -> list:
        return self._side(records, self.key2, RIGHT)

    def _side(self, records: list, key_of: Callable, side: str) -> list:
        if type(records) is not TimestampedBatch or None in records.timestamps:
            raise FunctionContractError(
                f"Interval join '{self.name}' got records without timestamps: give both inputs event time "
                "(assign_timestamps_and_watermarks or from_source(source, watermark_strategy, name)) upstream.")
        left = side == LEFT
        own, other = self.buffers[side], self.buffers[RIGHT if left else LEFT]
        lower, upper = self.lower, self.upper
        set_key, process, ctx, watermark = self.backend.set_current_key, self.function.process_element, self.ctx, \
            self.watermark
        out: list = []
        stamps: list = []
        for record, timestamp in zip(records, records.timestamps):
            if timestamp < watermark:
                self.late_records_dropped += 1
                continue
            key = key_of(record)
            set_key(key)
            kept = own.get(timestamp)
            own.put(timestamp, [record] if kept is None else kept + [record])
            low, high = (timestamp + lower, timestamp + upper) if left else (timestamp - upper, timestamp - lower)
            for other_time, others in other.items():
                if low <= other_time <= high:
                    for other_record in others:
                        ctx.left, ctx.right = (timestamp, other_time) if left else (other_time, timestamp)
                        pair = (record, other_record) if left else (other_record, record)
                        result = process(pair[0], pair[1], ctx)
                        if result is not None:
                            before = len(out)
                            out.extend(_check_iterable(result, self.name))
                            stamps.extend([max(timestamp, other_time)] * (len(out) - before))
            # kept while a record of the other side may still join it
            cleanup = (timestamp + upper if upper > 0 else timestamp) if left else \
                (timestamp - lower if lower < 0 else timestamp)
            self.timers.register(key, cleanup, (side, timestamp))
        return TimestampedBatch.of(out, stamps) if out else []

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        for _, _, (side, timestamp) in self.timers.pop_due(watermark):
            self.buffers[side].remove(timestamp)
        return []
