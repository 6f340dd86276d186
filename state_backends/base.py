"""The interfaces every keyed state backend implements, and the state handles user functions see.

A backend holds the keyed state of one operator subtask: the key groups it owns, each a table per state
name. The task sets the current key before calling a user function; state handles read and write the
current key's entry. Backends live beside this module (``heap/`` today) and mirror its shape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable, Iterator

from state_backends.descriptors import StateDescriptor

__all__ = [
    "KeyedStateBackend",
    "State",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
]


class State(ABC):
    """A handle on one named state, scoped to the backend's current key."""

    @abstractmethod
    def clear(self) -> None:
        """Remove the current key's entry."""


class ValueState(State):
    @abstractmethod
    def value(self) -> Any:
        """The current key's value, or None."""

    @abstractmethod
    def update(self, value: Any) -> None:
        """Set the current key's value (None clears it)."""


class ListState(State):
    @abstractmethod
    def get(self) -> Iterable[Any]: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...

    @abstractmethod
    def add_all(self, values: Iterable[Any]) -> None: ...

    @abstractmethod
    def update(self, values: Iterable[Any]) -> None: ...


class MapState(State):
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


class ReducingState(State):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class AggregatingState(State):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class KeyedStateBackend(ABC):
    """Keyed state of one operator subtask, partitioned by key group."""

    @abstractmethod
    def set_current_key(self, key: Any) -> None:
        """Scope every state handle to ``key`` until the next call."""

    @abstractmethod
    def get_current_key(self) -> Any: ...

    @abstractmethod
    def get_state(self, descriptor: StateDescriptor) -> State:
        """The handle for ``descriptor``, created on first use; its class follows the descriptor's."""

    @abstractmethod
    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key that has an entry in ``state_name`` on this subtask."""
