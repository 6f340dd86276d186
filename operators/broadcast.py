"""Broadcast state: ``stream.connect(other.broadcast(MapStateDescriptor(...))).process(...)``.

Every subtask of the operator receives every broadcast record and keeps its own copy of the broadcast state, a
dict per descriptor; the function must change every copy alike, so the copies stay equal. That is also why the
state is checkpointed once, by subtask 0, and restored whole to every subtask at any parallelism (the copies are
equal, so one is all of it; Flink writes one per subtask and hands them out round-robin, which costs the
same number of copies in every checkpoint for no gain).

>>> from operators.context import SubtaskInfo
>>> from operators.functions import BroadcastProcessFunction
>>> from state_backends.descriptors import MapStateDescriptor
>>> RATES = MapStateDescriptor("rates")
>>> class Convert(BroadcastProcessFunction):
...     def process_broadcast_element(self, rate, ctx):
...         ctx.get_broadcast_state(RATES).put(*rate)
...     def process_element(self, price, ctx):
...         yield price[1] * ctx.get_broadcast_state(RATES).get(price[0], 0)
>>> op = BroadcastProcessOperator("convert", Convert(), (RATES,))
>>> op.setup(SubtaskInfo("convert", 0, 2, 128, 0)); op.open()
>>> op.process_batch2([("EUR", 2)]); op.process_batch1([("EUR", 5), ("USD", 5)])
[]
[10, 0]
>>> op.snapshot_operator_state(1)  # subtask 0 writes the copy every subtask gets back on a restore
{'union:broadcast:rates': [('EUR', 2)]}
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Iterator, TypeVar

from operators.builtins import KeyedProcessOperator, _run_function, _tagged
from operators.co_operators import TwoInputOperator
from operators.context import KeyedContext
from operators.timers import NonKeyedTimerService
from runtime.errors import StateUsageError
from runtime.protocol.checkpoints import UNION_PREFIX
from state_backends.descriptors import MapStateDescriptor

__all__ = ["ReadOnlyBroadcastState", "BroadcastState", "BroadcastProcessOperator", "KeyedBroadcastProcessOperator"]

BROADCAST_PREFIX = UNION_PREFIX + "broadcast:"

# PyFlink's type parameters of its broadcast states: ``BroadcastState[K, V]``.
K = TypeVar("K")
V = TypeVar("V")


class ReadOnlyBroadcastState(Generic[K, V]):
    """A broadcast state as ``process_element`` sees it: readable, not writable (PyFlink's
    ``ReadOnlyBroadcastState``).

    >>> state = ReadOnlyBroadcastState("rules", {"max": 5})
    >>> state.get("max"), state.contains("min"), list(state.items()), state.is_empty()
    (5, False, [('max', 5)], False)
    >>> try:
    ...     state.put("max", 6)
    ... except Exception as e:
    ...     print(e)
    broadcast state 'rules' is read-only in process_element() and on_timer(): change it in process_broadcast_element(), which every subtask runs for every broadcast record, so that all copies stay equal.
    """

    __slots__ = ("name", "_entries")

    def __init__(self, name: str, entries: dict):
        self.name = name
        self._entries = entries

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries.get(key, default)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._entries.items()))

    def keys(self) -> Iterator[Any]:
        return iter(list(self._entries))

    def values(self) -> Iterator[Any]:
        return iter(list(self._entries.values()))

    def is_empty(self) -> bool:
        return not self._entries

    def __getitem__(self, key: Any) -> Any:
        return self._entries[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    def __len__(self) -> int:
        return len(self._entries)

    def _read_only(self, *_) -> None:
        raise StateUsageError(f"broadcast state {self.name!r} is read-only in process_element() and on_timer(): "
                              "change it in process_broadcast_element(), which every subtask runs for every "
                              "broadcast record, so that all copies stay equal.")

    put = put_all = remove = clear = __setitem__ = __delitem__ = _read_only


class BroadcastState(ReadOnlyBroadcastState[K, V]):
    """A broadcast state as ``process_broadcast_element`` sees it: a dict of this subtask's copy.

    >>> state = BroadcastState("rules", {})
    >>> state.put("max", 5); state.put_all({"min": 1}); state.remove("max"); dict(state.items())
    {'min': 1}
    """

    __slots__ = ()

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def put_all(self, entries: dict) -> None:
        self._entries.update(entries)

    def remove(self, key: Any) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    __setitem__ = put

    def __delitem__(self, key: Any) -> None:
        del self._entries[key]


class _Context(KeyedContext):
    """The ``ctx`` of the broadcast functions: the broadcast states (read-only or writable), the time, and for
    keyed functions the key, timers and ``apply_to_keyed_state``."""

    __slots__ = ("states", "operator")

    def __init__(self, service, states: dict[str, ReadOnlyBroadcastState], operator: "BroadcastProcessOperator"):
        super().__init__(service)
        self.states = states
        self.operator = operator

    def get_broadcast_state(self, state_descriptor):
        state = self.states.get(getattr(state_descriptor, "name", None))
        if state is None or not isinstance(state_descriptor, MapStateDescriptor):
            raise StateUsageError(
                f"get_broadcast_state({state_descriptor!r}): this operator's broadcast states are "
                f"{sorted(self.states)}; declare each with stream.broadcast(MapStateDescriptor(name, ...)).")
        return state

    def current_processing_time(self) -> int:
        return self.operator.info.clock()

    def current_watermark(self) -> int:
        return self.operator.watermark

    def apply_to_keyed_state(self, state_descriptor, function: Callable[[Any, Any], None]) -> None:
        backend = self.operator.keyed_backend
        if backend is None:
            raise StateUsageError("apply_to_keyed_state() needs keyed state: connect a KeyedStream "
                                  "(key_by(...).connect(broadcast_stream)) and use a KeyedBroadcastProcessFunction.")
        keys = list(backend.keys(state_descriptor.name))  # a copy: the function may clear states
        before = backend.get_current_key()
        state = backend.get_state(state_descriptor)
        try:
            for key in keys:
                backend.set_current_key(key)
                function(key, state)
        finally:
            if before is not None:
                backend.set_current_key(before)


_NO_KEY = ("Timers belong to a key: register them in process_element() of a KeyedBroadcastProcessFunction, not in "
           "process_broadcast_element(), which has no key.")


class BroadcastProcessOperator(TwoInputOperator):
    """``stream.connect(broadcast_stream).process(BroadcastProcessFunction)``; input 2 is the broadcast one."""

    keyed_backend = None

    def __init__(self, name: str, function: Any, descriptors: tuple[MapStateDescriptor, ...]):
        super().__init__(name, function)
        self.descriptors = descriptors
        self._restored: dict[str, dict] = {}

    def restore_operator_state(self, state: dict[str, list]) -> None:
        super().restore_operator_state(state)
        self._restored = {name[len(BROADCAST_PREFIX):]: dict(items) for name, items in state.items()
                          if name.startswith(BROADCAST_PREFIX)}

    def open(self) -> None:
        self.entries = {d.name: self._restored.pop(d.name, {}) for d in self.descriptors}
        writable = {name: BroadcastState(name, e) for name, e in self.entries.items()}
        read_only = {name: ReadOnlyBroadcastState(name, e) for name, e in self.entries.items()}
        watermark = self._current_watermark
        clock = self.info.clock
        self.broadcast_ctx = _Context(NonKeyedTimerService(watermark, _NO_KEY, clock), writable, self)
        self.ctx = _Context(NonKeyedTimerService(watermark, clock=clock), read_only, self)
        super().open()  # the user function's open(runtime_context)

    def _current_watermark(self) -> int:
        return self.watermark

    def process_batch1(self, records: list) -> list:
        out = _run_function(self.function.process_element, records, self.ctx, None, None, self.name)
        return _tagged(out, self.side_tags)

    def process_batch2(self, records: list) -> list:
        out = _run_function(self.function.process_broadcast_element, records, self.broadcast_ctx, None, None,
                            self.name)
        return _tagged(out, self.side_tags)

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        state = super().snapshot_operator_state(checkpoint_id)
        if self.info.subtask_index == 0:  # every copy is equal: one is the whole state
            for name, entries in self.entries.items():
                state[BROADCAST_PREFIX + name] = list(entries.items())
        return state


class _KeyedSide:
    """The keyed function seen by a KeyedProcessOperator: its ``process_element`` and ``on_timer``."""

    def __init__(self, function):
        self.process_element = function.process_element
        self.on_timer = function.on_timer


class KeyedBroadcastProcessOperator(BroadcastProcessOperator):
    """``keyed.connect(broadcast_stream).process(KeyedBroadcastProcessFunction)``: input 1 keyed, with state and
    timers; input 2 broadcast.

    >>> from operators.context import SubtaskInfo
    >>> from operators.functions import KeyedBroadcastProcessFunction
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import MapStateDescriptor, ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> SEEN = ValueStateDescriptor("seen")
    >>> class Reset(KeyedBroadcastProcessFunction):   # a broadcast "reset" clears every key's count
    ...     def open(self, runtime_context):
    ...         self.seen = runtime_context.get_state(SEEN)
    ...     def process_element(self, word, ctx):
    ...         self.seen.update((self.seen.value() or 0) + 1)
    ...         yield word, self.seen.value()
    ...     def process_broadcast_element(self, command, ctx):
    ...         ctx.apply_to_keyed_state(SEEN, lambda key, state: state.clear())
    >>> op = KeyedBroadcastProcessOperator("count", Reset(), (MapStateDescriptor("commands"),), lambda w: w)
    >>> op.setup(SubtaskInfo("count", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch1(["a", "b", "a"])
    [('a', 1), ('b', 1), ('a', 2)]
    >>> op.process_batch2(["reset"]); op.process_batch1(["a"])
    []
    [('a', 1)]
    """

    keyed = True
    has_processing_timers = True

    def __init__(self, name: str, function: Any, descriptors: tuple[MapStateDescriptor, ...],
                 key_selector: Callable):
        super().__init__(name, function, descriptors)
        self.key_selector = key_selector

    def open(self) -> None:
        super().open()
        self.keyed_backend = self.runtime_context.keyed_backend
        keyed = self.keyed_input = KeyedProcessOperator(self.name, _KeyedSide(self.function), self.key_selector)
        keyed.setup(self.info, self.keyed_backend)
        keyed.side_tags = self.side_tags
        keyed.prepare()
        keyed.ctx = self.ctx = _Context(keyed.ctx.service, self.ctx.states, self)

    def process_batch1(self, records: list) -> list:
        return self.keyed_input.process_batch(records)

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        return self.keyed_input.process_watermark(watermark)

    def next_processing_time(self) -> int | None:
        return self.keyed_input.next_processing_time()

    def on_processing_time(self, now_ms: int) -> list:
        return self.keyed_input.on_processing_time(now_ms)
