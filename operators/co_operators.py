"""Two-input operators, behind ``DataStream.connect(other)``: the subtask hands each batch to
``process_batch1`` or ``process_batch2`` by the input its channel feeds. Barriers align over the channels of
both inputs and the input watermark is the minimum over both, as for any gate.

Outputs keep their input record's event timestamp, as the one-input operators do.

>>> op = CoMapOperator("tag", None, lambda x: ("left", x), lambda x: ("right", x))
>>> op.process_batch1([1, 2]), op.process_batch2([3])
([('left', 1), ('left', 2)], [('right', 3)])
"""

from __future__ import annotations

from typing import Any, Callable

from operators.builtins import FlatMapOperator, KeyedProcessOperator, MapOperator, ProcessOperator
from operators.operator import OneInputOperator

__all__ = ["TwoInputOperator", "CoMapOperator", "CoFlatMapOperator", "CoProcessOperator",
           "KeyedCoProcessOperator"]


class TwoInputOperator(OneInputOperator):
    """An operator with two inputs; ``process_batch`` is its first input's."""

    def process_batch1(self, records: list) -> list:
        raise NotImplementedError

    def process_batch2(self, records: list) -> list:
        raise NotImplementedError

    def process_batch(self, records: list) -> list:
        return self.process_batch1(records)


class CoMapOperator(TwoInputOperator):
    """``ConnectedStreams.map``: ``map1`` over the first input, ``map2`` over the second."""

    def __init__(self, name: str, function: Any, map1: Callable, map2: Callable):
        super().__init__(name, function)
        self.first = MapOperator(name, None, map1)
        self.second = MapOperator(name, None, map2)

    def process_batch1(self, records: list) -> list:
        return self.first.process_batch(records)

    def process_batch2(self, records: list) -> list:
        return self.second.process_batch(records)


class CoFlatMapOperator(CoMapOperator):
    """``ConnectedStreams.flat_map``: ``flat_map1`` / ``flat_map2``, each returning or yielding records.

    >>> CoFlatMapOperator("split", None, str.split, lambda s: [s.upper()]).process_batch2(["or"])
    ['OR']
    """

    def __init__(self, name: str, function: Any, flat_map1: Callable, flat_map2: Callable):
        TwoInputOperator.__init__(self, name, function)
        self.first = FlatMapOperator(name, None, flat_map1)
        self.second = FlatMapOperator(name, None, flat_map2)


class _Input:
    """A user function seen through one input: its ``process_element`` is ``process_element1`` or ``2``."""

    def __init__(self, function, number: int):
        self.process_element = getattr(function, f"process_element{number}")
        self.on_timer = getattr(function, "on_timer", None)


class CoProcessOperator(TwoInputOperator):
    """``ConnectedStreams.process(CoProcessFunction)``: context with timestamps and the time, no timers.

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import CoProcessFunction
    >>> class Sides(CoProcessFunction):
    ...     def process_element1(self, value, ctx): yield "L", value
    ...     def process_element2(self, value, ctx): yield "R", value
    >>> op = CoProcessOperator("sides", Sides()); op.setup(SubtaskInfo("sides", 0, 1, 128, 0)); op.open()
    >>> op.process_batch2([1])
    [('R', 1)]
    """

    def open(self) -> None:
        super().open()  # the user function's open(runtime_context)
        self.first = ProcessOperator(self.name, _Input(self.function, 1))
        self.second = ProcessOperator(self.name, _Input(self.function, 2))
        for side in (self.first, self.second):
            side.side_tags = self.side_tags
            side.info = self.info  # its place and clock are the operator's
            side.prepare()

    def process_batch1(self, records: list) -> list:
        return self.first.process_batch(records)

    def process_batch2(self, records: list) -> list:
        return self.second.process_batch(records)

    def process_watermark(self, watermark: int) -> list:
        self.watermark = self.first.watermark = self.second.watermark = watermark
        return []


class KeyedCoProcessOperator(TwoInputOperator):
    """``connect(...).key_by(key1, key2).process(KeyedCoProcessFunction)``: both inputs share the keyed state
    and the timers of a key (one timer service; ``on_timer`` as in a KeyedProcessFunction).

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import KeyedCoProcessFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> class Join(KeyedCoProcessFunction):   # an order waits for its payment
    ...     def open(self, runtime_context):
    ...         self.order = runtime_context.get_state(ValueStateDescriptor("order"))
    ...     def process_element1(self, value, ctx): self.order.update(value)
    ...     def process_element2(self, value, ctx): yield self.order.value(), value
    >>> op = KeyedCoProcessOperator("join", Join(), lambda o: o[0], lambda p: p[0])
    >>> op.setup(SubtaskInfo("join", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch1([("o1", "book")]); op.process_batch2([("o1", 12.5)])
    []
    [(('o1', 'book'), ('o1', 12.5))]
    """

    keyed = True
    has_processing_timers = True

    def __init__(self, name: str, function: Any, key1: Callable, key2: Callable):
        super().__init__(name, function)
        self.key1, self.key2 = key1, key2

    def open(self) -> None:
        super().open()  # the user function's open(runtime_context): state handles
        self.first = KeyedProcessOperator(self.name, _Input(self.function, 1), self.key1)
        self.second = KeyedProcessOperator(self.name, _Input(self.function, 2), self.key2)
        for side in (self.first, self.second):
            side.setup(self.info, self.runtime_context.keyed_backend)
            side.side_tags = self.side_tags
        self.first.prepare()
        self.second.prepare(timers_of=self.first)  # one timer service per key, whichever input registered

    def process_batch1(self, records: list) -> list:
        return self.first.process_batch(records)

    def process_batch2(self, records: list) -> list:
        return self.second.process_batch(records)

    def process_watermark(self, watermark: int) -> list:
        self.watermark = self.second.watermark = watermark
        return self.first.process_watermark(watermark)

    def next_processing_time(self) -> int | None:
        return self.first.next_processing_time()

    def on_processing_time(self, now_ms: int) -> list:
        return self.first.on_processing_time(now_ms)
