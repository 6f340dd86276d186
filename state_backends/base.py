"""The interfaces every keyed state backend implements, and the state handles user functions see.

A backend holds the keyed state of one operator subtask: the key groups it owns, each a table per state
name. The operator sets the current key before calling a user function; state handles read and write the
current key's entry. Backends live beside this module (``heap/`` today) and mirror its shape.

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ValueStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> count = backend.get_state(ValueStateDescriptor("count"))
>>> backend.set_current_key("a"); count.update(1)
>>> backend.set_current_key("b"); count.value(), list(backend.keys("count"))
(None, ['a'])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, Iterable, Iterator, TypeVar

from runtime.ids import KeyGroup
from runtime.keys.key_groups import KeyGroupRange
from state_backends.descriptors import StateDescriptor

__all__ = [
    "StateBackend",
    "KeyedStateBackend",
    "KeyedSnapshot",
    "State",
    "ValueState",
    "ListState",
    "MapState",
    "MapViewsOfEntries",
    "ReducingState",
    "AggregatingState",
]

# PyFlink's type parameters of its state handles: ``ValueState[T]``, ``MapState[K, V]``, ``AggregatingState[IN, OUT]``.
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


class State(ABC):
    """A handle on one named state, scoped to the backend's current key.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> state = backend.get_state(ValueStateDescriptor("seen")); state.update(True); state.clear(); state.value() is None
    True
    """

    @abstractmethod
    def clear(self) -> None:
        """Remove the current key's entry."""


class ValueState(State, Generic[T]):
    """One value per key (PyFlink's ``ValueState``).

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> count = backend.get_state(ValueStateDescriptor("count")); count.update(3); count.value()
    3
    """

    @abstractmethod
    def value(self) -> Any:
        """The current key's value, or None."""

    @abstractmethod
    def update(self, value: Any) -> None:
        """Set the current key's value (None clears it)."""


class ListState(State, Generic[T]):
    """A list per key (PyFlink's ``ListState``).

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import ListStateDescriptor
    >>> pages = backend.get_state(ListStateDescriptor("pages")); pages.add("/"); pages.add_all(["/a"]); list(pages.get())
    ['/', '/a']
    """

    @abstractmethod
    def get(self) -> Iterable[Any]: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...

    @abstractmethod
    def add_all(self, values: Iterable[Any]) -> None: ...

    @abstractmethod
    def update(self, values: Iterable[Any]) -> None: ...


class MapState(State, Generic[K, V]):
    """A dict per key (PyFlink's ``MapState``).

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import MapStateDescriptor
    >>> carts = backend.get_state(MapStateDescriptor("cart")); carts.put("book", 2); dict(carts.items())
    {'book': 2}
    """

    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def put_all(self, entries: dict) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterator[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterator[Any]: ...

    @abstractmethod
    def values(self) -> Iterator[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...


class MapViewsOfEntries:
    """``items``/``keys``/``values``/``is_empty`` of a map state whose ``_visible(reading)`` lists the current key's
    ``(key, value)`` entries as a read sees them (``reading``: the read counts as an access, for a time-to-live)."""

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._visible(reading=True))

    def keys(self) -> Iterator[Any]:
        return iter([key for key, _ in self._visible(reading=False)])

    def values(self) -> Iterator[Any]:
        return iter([value for _, value in self._visible(reading=True)])

    def is_empty(self) -> bool:
        return not self._visible(reading=False)


class ReducingState(State, Generic[T]):
    """A value per key that ``add`` folds new values into (PyFlink's ``ReducingState``).

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import ReducingStateDescriptor
    >>> total = backend.get_state(ReducingStateDescriptor("total", lambda a, b: a + b)); total.add(2); total.add(3)
    >>> total.get()
    5
    """

    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class AggregatingState(State, Generic[IN, OUT]):
    """A value per key that ``add`` aggregates into with an AggregateFunction (PyFlink's ``AggregatingState``).

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("ann")
    >>> from state_backends.descriptors import AggregateFunction, AggregatingStateDescriptor
    >>> class Count(AggregateFunction):
    ...     def create_accumulator(self): return 0
    ...     def add(self, value, accumulator): return accumulator + 1
    ...     def get_result(self, accumulator): return accumulator
    >>> seen = backend.get_state(AggregatingStateDescriptor("seen", Count())); seen.add("x"); seen.get()
    1
    """

    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class KeyedSnapshot(ABC):
    """A keyed backend's snapshot between its synchronous part (taken at the barrier, on the subtask's thread)
    and the end of its asynchronous part (on the slot's snapshotter thread)."""

    @abstractmethod
    def serialized(self) -> Iterator[tuple[KeyGroup, bytes]]:
        """``(key group, payload)`` rows to store; ``restore_key_group`` reads a payload back. A key group may
        take several rows (one per state, say): a restore loads each. Exhausting or closing the iterator releases
        the snapshot."""

    @abstractmethod
    def discard(self) -> None:
        """The checkpoint failed: drop what is left of the snapshot and release it."""


class KeyedStateBackend(ABC):
    """Keyed state of one operator subtask, partitioned by key group: every method the runtime calls.

    The subtask owns the key groups ``key_groups`` out of ``max_parallelism``. Operators set the current key
    before calling a user function; state handles then read and write that key's entries.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.descriptors import ValueStateDescriptor
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    >>> _ = backend.get_state(ValueStateDescriptor("count"))  # declares value state "count"
    >>> backend.put_many("count", ["a", "b"], [1, 2]); backend.get_many("count", ["b", "c"])
    [2, None]
    """

    max_parallelism: int
    key_groups: KeyGroupRange

    # -- keyed access (the subtask's thread) -----------------------------------------------------------

    @abstractmethod
    def set_current_key(self, key: Any) -> None:
        """Scope every state handle to ``key`` until the next call."""

    @abstractmethod
    def get_current_key(self) -> Any: ...

    @abstractmethod
    def get_state(self, descriptor: StateDescriptor) -> State:
        """The handle for ``descriptor``, created on first use; its class follows the descriptor's. A name
        declared again as another kind of state raises :class:`~runtime.errors.StateUsageError`."""

    def declare_bulk_state(self, descriptor: StateDescriptor) -> None:
        """Declare a value state that is used only through the methods taking many keys at once and the iteration
        methods, never through a handle (the aligned window's panes): a backend may lay it out for that."""
        self.get_state(descriptor)

    @abstractmethod
    def get_many(self, state_name: str, keys: list) -> list:
        """The values of ``keys`` in value state ``state_name`` (None where absent), in one call (the
        columnar path's keyed aggregates, reduce, window panes). Callers may change the values in place before
        ``put_many``: a snapshot in progress must not see such changes."""

    @abstractmethod
    def put_many(self, state_name: str, keys: list, values: list) -> None:
        """Set value state ``state_name`` of every key in ``keys`` to the matching entry of ``values``."""

    def fold_many(self, state_name: str, keys: list, values: list, fold) -> None:
        """For each key and value in order: value state ``state_name`` of the key becomes ``fold(its value or
        None, value)`` (a window's panes over a batch). Backends may do it faster than get_many/put_many."""
        distinct = list(dict.fromkeys(keys))
        current = dict(zip(distinct, self.get_many(state_name, distinct)))
        for key, value in zip(keys, values):
            current[key] = fold(current[key], value)
        self.put_many(state_name, distinct, [current[key] for key in distinct])

    def aggregate_many(self, state_name: str, keys: list, values: list, add, create) -> None:
        """For each key and value in order: value state ``state_name`` of the key becomes ``add(value, its value)``,
        its value being ``create()`` where it has none (an ``AggregateFunction``'s ``add`` and
        ``create_accumulator``: a window's accumulators over a batch). Backends may do it faster than fold_many."""
        self.fold_many(state_name, keys, values,
                       lambda accumulator, value: add(value, create() if accumulator is None else accumulator))

    # -- iteration -----------------------------------------------------------------------------------

    @abstractmethod
    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key that has an entry in ``state_name`` on this subtask."""

    @abstractmethod
    def entries(self, state_name: str) -> Iterator[tuple[KeyGroup, Any, Any]]:
        """Every ``(key group, key, value)`` of ``state_name`` on this subtask."""

    @abstractmethod
    def state_names(self) -> list[str]:
        """The names of the states that hold entries on this subtask (declared here or restored)."""

    def declared_states(self) -> dict[str, Any]:
        """The descriptor of each state declared on this subtask, by name: what a savepoint types its tables by."""
        return {}

    @abstractmethod
    def drop_state(self, state_name: str) -> None:
        """Remove state ``state_name`` for every key at once (a window's panes when it is done); snapshots
        already taken keep it."""

    # -- snapshots and restores ------------------------------------------------------------------------

    @abstractmethod
    def snapshot(self, full: bool = False) -> KeyedSnapshot | None:
        """The synchronous part of a snapshot, at the barrier; None when there is no state. Must not take
        longer with more state: the records wait meanwhile. ``full``: a snapshot written whole (a savepoint's, a
        final state's), never an incremental one."""

    @abstractmethod
    def release(self, snapshot: KeyedSnapshot) -> None:
        """Stop keeping ``snapshot`` consistent (called by the snapshot when it is written or discarded)."""

    @abstractmethod
    def restore_key_group(self, group: KeyGroup, payload: bytes) -> None:
        """Load one key group, as a snapshot's ``serialized()`` wrote it; before any record is processed."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed (a backend with incremental snapshots reuses its files)."""

    def state_size(self) -> tuple[int, int | None]:
        """An estimate of the state held, for metrics: ``(entries, bytes or None when unknown)``. Called from
        another thread than the subtask's: it must not take locks the subtask holds, and may be approximate."""
        return 0, None

    def close(self) -> None:
        """Release what the backend holds (files, handles) when its subtask ends."""


class StateBackend(ABC):
    """How a job keeps keyed state (PyFlink's ``StateBackend``): a factory of one keyed backend per operator
    subtask, given to ``env.set_state_backend(...)``; shipped pickled to the executors.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HashMapStateBackend
    >>> backend = HashMapStateBackend().create_keyed_state_backend("count", 128, key_group_range(128, 2, 1))
    >>> backend.key_groups
    KeyGroupRange(start=64, end=127)
    """

    @abstractmethod
    def create_keyed_state_backend(self, operator_uid: str, max_parallelism: int,
                                   key_groups: KeyGroupRange) -> KeyedStateBackend:
        """The keyed state of one operator subtask that owns ``key_groups``."""
