"""Built-in one-input operators: map, flat_map, filter, process, their keyed variants, and keyed reduce.

An operator runs its function over a whole batch of records at once (``function`` is the user's object,
``call`` the plain callable behind it, see :func:`operators.functions.as_callable`):

>>> FilterOperator("even", None, lambda x: x % 2 == 0).process_batch([1, 2, 3, 4])
[2, 4]
>>> FlatMapOperator("split", None, str.split).process_batch(["to be", "or"])
['to', 'be', 'or']

Records keep their event timestamps: a batch with timestamps (:class:`~runtime.protocol.records.TimestampedBatch`)
gives one, each output record stamped with its input record's timestamp (Flink's semantics):

>>> FlatMapOperator("split", None, str.split).process_batch(TimestampedBatch.of(["to be", "or"], [5, 7]))
TimestampedBatch(['to', 'be', 'or'], timestamps=[5, 5, 7])
"""

from __future__ import annotations

from itertools import compress
from typing import Any, Callable, Iterable

from operators.context import KeyedContext
from operators.functions import Function, TimeDomain
from operators.operator import OneInputOperator
from operators.timers import EVENT_TIMERS, PROCESSING_TIMERS, KeyedTimerService, NonKeyedTimerService, TimerQueue
from runtime.errors import FunctionContractError
from runtime.keys.canonical import PLAIN_KEY_TYPES, canonical_key
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag, SideOutputRecord

__all__ = [
    "MapOperator",
    "FlatMapOperator",
    "FilterOperator",
    "KeyedMapOperator",
    "KeyedFlatMapOperator",
    "KeyedFilterOperator",
    "may_use_keyed_state",
    "ProcessOperator",
    "KeyedProcessOperator",
    "KeyedReduceOperator",
]


def _tag_side_outputs(records: list, side_tags) -> list:
    """``(OutputTag, value)`` pairs a process function yielded become side-output records."""
    return [SideOutputRecord(r[0].tag_id, r[1]) if type(r) is tuple and len(r) == 2 and type(r[0]) is OutputTag
            else r for r in records]


_GENERATOR = type(x for x in ())


def _check_iterable(result: Any, operator_name: str) -> Iterable:
    if isinstance(result, (tuple, str, bytes, dict)):
        raise FunctionContractError(
            f"Operator '{operator_name}' returned a {type(result).__name__} where an iterable of records "
            "was expected: yield each record, or return a list of records."
        )
    return result


class MapOperator(OneInputOperator):
    def __init__(self, name: str, function: Any, call: Callable):
        super().__init__(name, function)
        self.call = call

    def process_batch(self, records: list) -> list:
        call = self.call
        out = [call(r) for r in records]
        if type(records) is TimestampedBatch:
            return TimestampedBatch.of(out, records.timestamps)
        return out


class FilterOperator(MapOperator):
    def process_batch(self, records: list) -> list:
        call = self.call
        if type(records) is TimestampedBatch:
            keep = [call(r) for r in records]
            return TimestampedBatch.of(compress(records, keep), list(compress(records.timestamps, keep)))
        return [r for r in records if call(r)]


class FlatMapOperator(MapOperator):
    def process_batch(self, records: list) -> list:
        call = self.call
        out: list = []
        extend = out.extend
        if type(records) is TimestampedBatch:
            timestamps: list = []
            for r, t in zip(records, records.timestamps):
                result = call(r)
                if result is not None:
                    before = len(out)
                    extend(_check_iterable(result, self.name))
                    timestamps.extend([t] * (len(out) - before))
            return TimestampedBatch.of(out, timestamps)
        for r in records:
            result = call(r)
            if result is not None:
                extend(_check_iterable(result, self.name))
        return out


def may_use_keyed_state(function: Any) -> bool:
    """Whether ``function`` can hold keyed state handles: they come from ``runtime_context.get_state(...)``, and
    a function sees the runtime context only in ``open``, so only one whose class defines ``open`` (beyond
    :class:`~operators.functions.Function`'s empty one) can use keyed state.

    >>> from operators.functions import MapFunction
    >>> class Counting(MapFunction):
    ...     def open(self, runtime_context): ...
    ...     def map(self, value): ...
    >>> may_use_keyed_state(Counting()), may_use_keyed_state(MapFunction()), may_use_keyed_state(len)
    (True, False, False)
    """
    opener = getattr(type(function), "open", None)
    return callable(opener) and opener is not Function.open


def _scoped_to_key(call: Callable, key_of: Callable, set_key: Callable) -> Callable:
    def scoped(record):
        set_key(key_of(record))
        return call(record)
    return scoped


class _KeyScoped:
    """Makes a map, flat_map or filter operator keyed: the backend's current key is the record's before each call,
    so state the function declared in ``open`` is the record's key's.

    Wrapping ``call`` rather than writing keyed copies of the batch loops keeps the records and timestamps the
    unkeyed operator's by construction; the extra Python call per record is small beside the key's lookup.
    """

    keyed = True

    def __init__(self, name: str, function: Any, call: Callable, key_selector: Callable):
        super().__init__(name, function, call)
        self.key_selector = key_selector
        self.unscoped_call = call  # open() rebinds ``call``: a second open() must not wrap the wrapper

    def open(self) -> None:
        self.call = _scoped_to_key(self.unscoped_call, self.key_selector,
                                   self.runtime_context.keyed_backend.set_current_key)
        super().open()


class KeyedMapOperator(_KeyScoped, MapOperator):
    """``KeyedStream.map`` with a function that may use keyed state: scoped to each record's key.

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import MapFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> class Count(MapFunction):   # (word, how many times seen so far)
    ...     def open(self, runtime_context):
    ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
    ...     def map(self, word):
    ...         self.seen.update((self.seen.value() or 0) + 1)
    ...         return word, self.seen.value()
    >>> count = Count()
    >>> op = KeyedMapOperator("count", count, count.map, key_selector=lambda word: word)
    >>> op.setup(SubtaskInfo("count", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch(TimestampedBatch.of(["a", "b", "a"], [5, 6, 7]))
    TimestampedBatch([('a', 1), ('b', 1), ('a', 2)], timestamps=[5, 6, 7])
    """


class KeyedFlatMapOperator(_KeyScoped, FlatMapOperator):
    """``KeyedStream.flat_map`` with a function that may use keyed state: scoped to each record's key (a
    generator's too: the operator drains it before the next record's key is set).

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import FlatMapFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> class FirstTwo(FlatMapFunction):   # the first two records of each key, dropping the rest
    ...     def open(self, runtime_context):
    ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
    ...     def flat_map(self, record):
    ...         seen = (self.seen.value() or 0) + 1
    ...         self.seen.update(seen)
    ...         if seen <= 2:
    ...             yield record
    >>> first = FirstTwo()
    >>> op = KeyedFlatMapOperator("first", first, first.flat_map, key_selector=lambda r: r[0])
    >>> op.setup(SubtaskInfo("first", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch(["a1", "a2", "b1", "a3", "b2"])
    ['a1', 'a2', 'b1', 'b2']
    """


class KeyedFilterOperator(_KeyScoped, FilterOperator):
    """``KeyedStream.filter`` with a function that may use keyed state: scoped to each record's key.

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import FilterFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> class Changed(FilterFunction):   # keep a reading only when it differs from its sensor's last one
    ...     def open(self, runtime_context):
    ...         self.last = runtime_context.get_state(ValueStateDescriptor("last"))
    ...     def filter(self, reading):
    ...         changed = self.last.value() != reading[1]
    ...         self.last.update(reading[1])
    ...         return changed
    >>> changed = Changed()
    >>> op = KeyedFilterOperator("changed", changed, changed.filter, key_selector=lambda r: r[0])
    >>> op.setup(SubtaskInfo("changed", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch(TimestampedBatch.of([("s1", 20), ("s2", 20), ("s1", 20), ("s1", 21)],
    ...                                                 [1, 2, 3, 4]))
    TimestampedBatch([('s1', 20), ('s2', 20), ('s1', 21)], timestamps=[1, 2, 4])
    """


def _run_function(call, records: list, ctx, key_of, set_key, operator_name: str) -> list:
    """``call(record, ctx)`` for every record, the key set first when ``key_of`` is given; the results
    flattened, stamped with their input's timestamp when the input has timestamps."""
    out: list = []
    extend = out.extend
    timestamps = records.timestamps if type(records) is TimestampedBatch else None
    if timestamps is None:
        ctx.current_timestamp = None
        if key_of is None:
            for r in records:
                result = call(r, ctx)
                # a generator (a function that yields) or a list: no call to check it, ~15% of this loop's time
                if type(result) is _GENERATOR or type(result) is list:
                    extend(result)
                elif result is not None:
                    extend(_check_iterable(result, operator_name))
            return out
        for r in records:  # the same loop, keyed: a loop each costs less than a test per record
            key = key_of(r)
            set_key(key)
            ctx.current_key = key
            result = call(r, ctx)
            if type(result) is _GENERATOR or type(result) is list:
                extend(result)
            elif result is not None:
                extend(_check_iterable(result, operator_name))
        return out
    out_timestamps: list = []
    for r, t in zip(records, timestamps):
        if key_of is not None:
            key = key_of(r)
            set_key(key)
            ctx.current_key = key
        ctx.current_timestamp = t
        result = call(r, ctx)
        if result is not None:
            before = len(out)
            extend(result if type(result) is _GENERATOR or type(result) is list
                   else _check_iterable(result, operator_name))
            out_timestamps.extend([t] * (len(out) - before))
    return TimestampedBatch.of(out, out_timestamps) if out else out


def _tagged(records: list, side_tags) -> list:
    if not side_tags:
        return records
    tagged = _tag_side_outputs(records, side_tags)
    return TimestampedBatch.of(tagged, records.timestamps) if type(records) is TimestampedBatch else tagged


class ProcessOperator(OneInputOperator):
    def open(self) -> None:
        self.prepare()
        super().open()

    def prepare(self) -> None:
        """What ``open`` sets up besides calling the user's ``open`` (a two-input operator uses it alone)."""
        self.ctx = KeyedContext(NonKeyedTimerService(lambda: self.watermark, clock=self.info.clock))

    def process_batch(self, records: list) -> list:
        out = _run_function(self.function.process_element, records, self.ctx, None, None, self.name)
        return _tagged(out, self.side_tags)


class KeyedProcessOperator(OneInputOperator):
    """A KeyedProcessFunction, with its timers: the key is recomputed here (as Flink does) to scope state.

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import KeyedProcessFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> class Alarm(KeyedProcessFunction):   # a timer 10 ms after each record
    ...     def process_element(self, value, ctx):
    ...         ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
    ...     def on_timer(self, timestamp, ctx):
    ...         yield ctx.get_current_key(), timestamp, ctx.time_domain().name
    >>> op = KeyedProcessOperator("alarm", Alarm(), key_selector=lambda x: x)
    >>> op.setup(SubtaskInfo("alarm", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch(TimestampedBatch.of(["a", "b"], [100, 105]))
    []
    >>> op.process_watermark(112)
    TimestampedBatch([('a', 110, 'EVENT_TIME')], timestamps=[110])
    """

    keyed = True
    has_processing_timers = True

    def __init__(self, name: str, function: Any, key_selector: Callable):
        super().__init__(name, function)
        self.key_selector = key_selector

    def open(self) -> None:
        self.prepare()
        super().open()

    def prepare(self, timers_of: "KeyedProcessOperator | None" = None) -> None:
        """What ``open`` sets up besides calling the user's ``open``; ``timers_of``: share another operator's
        timers (the two inputs of a keyed two-input operator have one timer service)."""
        self.backend = self.runtime_context.keyed_backend
        if timers_of is None:
            self.event_timers = TimerQueue(self.backend, EVENT_TIMERS)
            self.processing_timers = TimerQueue(self.backend, PROCESSING_TIMERS)
        else:
            self.event_timers, self.processing_timers = timers_of.event_timers, timers_of.processing_timers
        self.ctx = KeyedContext(KeyedTimerService(self))
        self.on_timer = self.function.on_timer

    def process_batch(self, records: list) -> list:
        ctx = self.ctx
        ctx.domain = None
        out = _run_function(self.function.process_element, records, ctx, self.key_selector,
                            self.backend.set_current_key, self.name)
        return _tagged(out, self.side_tags)

    def _fire(self, due, domain: TimeDomain) -> list:
        ctx = self.ctx
        ctx.domain = domain
        on_timer = self.on_timer
        event_time = domain is TimeDomain.EVENT_TIME
        out: list = []
        timestamps: list = []
        for timestamp, key, _ in due:
            ctx.current_key = key
            ctx.current_timestamp = timestamp if event_time else None
            result = on_timer(timestamp, ctx)
            if result is not None:
                before = len(out)
                out.extend(_check_iterable(result, self.name))
                timestamps.extend([timestamp if event_time else None] * (len(out) - before))
        if not out:
            return out
        return _tagged(TimestampedBatch.of(out, timestamps) if event_time else out, self.side_tags)

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        if self.event_timers.next_time() is None:
            return []
        return self._fire(self.event_timers.pop_due(watermark), TimeDomain.EVENT_TIME)

    def next_processing_time(self) -> int | None:
        return self.processing_timers.next_time()

    def on_processing_time(self, now_ms: int) -> list:
        return self._fire(self.processing_timers.pop_due(now_ms), TimeDomain.PROCESSING_TIME)


class KeyedReduceOperator(OneInputOperator):
    """Rolling reduce per key: emits the new reduced value for every record (Flink's semantics).

    >>> from operators.context import SubtaskInfo
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> op = KeyedReduceOperator("sum", None, lambda a, b: a + b, key_selector=lambda x: x % 2)
    >>> op.setup(SubtaskInfo("sum", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch([1, 2, 3, 4])
    [1, 2, 4, 6]

    A ReduceFunction with ``open`` may keep keyed state of its own (not named ``"reduce"``, the operator's):
    it is the key's of the records being folded.

    >>> from operators.functions import ReduceFunction
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> class Max(ReduceFunction):   # the running max, counting the times it rose
    ...     def open(self, runtime_context):
    ...         self.rises = runtime_context.get_state(ValueStateDescriptor("rises"))
    ...     def reduce(self, a, b):
    ...         if b[1] <= a[1]:
    ...             return a
    ...         self.rises.update((self.rises.value() or 0) + 1)
    ...         return b[0], b[1], self.rises.value()
    >>> top = Max()
    >>> op = KeyedReduceOperator("max", top, top.reduce, key_selector=lambda r: r[0])
    >>> op.setup(SubtaskInfo("max", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch([("a", 1, 0), ("b", 5, 0), ("a", 3, 0), ("b", 7, 0), ("a", 4, 0)])
    [('a', 1, 0), ('b', 5, 0), ('a', 3, 1), ('b', 7, 1), ('a', 4, 2)]
    """

    keyed = True
    STATE_NAME = "reduce"

    def __init__(self, name: str, function: Any, call: Callable, key_selector: Callable):
        super().__init__(name, function)
        self.call = call
        self.key_selector = key_selector

    def open(self) -> None:
        from state_backends.descriptors import ValueStateDescriptor

        self.backend = self.runtime_context.keyed_backend
        self.backend.get_state(ValueStateDescriptor(self.STATE_NAME))
        # Only a function with open() can hold state handles; the rest (lambdas, mostly) keep the loop without a
        # set_current_key per fold, which adds a third to its cost.
        self.set_key = self.backend.set_current_key if may_use_keyed_state(self.function) else None
        super().open()

    def process_batch(self, records: list) -> list:
        # One state read and one write per distinct key of the batch, the folding in a local dict: a barrier
        # only ever comes between two batches, so the state is exact at every snapshot.
        reduce = self.call
        keys = [self.key_selector(r) for r in records]
        distinct = list(dict.fromkeys(keys))
        if not PLAIN_KEY_TYPES.issuperset(map(type, distinct)):  # floats or tuples: NaNs must be one key
            canonical = [canonical_key(k) for k in distinct]
            if any(c is not k for c, k in zip(canonical, distinct)):  # a NaN: records' keys follow
                to_canonical = dict(zip(distinct, canonical))
                keys = [to_canonical[k] for k in keys]
                distinct = list(dict.fromkeys(canonical))
        current = dict(zip(distinct, self.backend.get_many(self.STATE_NAME, distinct)))
        out = []
        append = out.append
        set_key = self.set_key
        if set_key is None:
            for r, key in zip(records, keys):
                before = current[key]
                value = r if before is None else reduce(before, r)
                current[key] = value
                append(value)
        else:
            for r, key in zip(records, keys):
                before = current[key]
                if before is None:
                    value = r
                else:
                    set_key(key)
                    value = reduce(before, r)
                current[key] = value
                append(value)
        self.backend.put_many(self.STATE_NAME, distinct, [current[key] for key in distinct])
        if type(records) is TimestampedBatch:
            return TimestampedBatch.of(out, records.timestamps)
        return out
