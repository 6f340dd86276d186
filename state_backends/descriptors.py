"""State descriptors in PyFlink's shape: a name (unique within an operator) and optional type information.

>>> ValueStateDescriptor("count").name
'count'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "AggregateFunction",
]


@dataclass(frozen=True)
class StateDescriptor:
    name: str
    type_info: Any = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"A state descriptor needs a non-empty string name, got {self.name!r}")


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """A single value per key."""


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """A list of values per key."""


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    """A dict per key. ``type_info`` may be given as ``(key_type, value_type)``."""

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", (key_type_info, value_type_info))
        self.__post_init__()


@dataclass(frozen=True)
class ReducingStateDescriptor(StateDescriptor):
    """A value per key that ``add`` folds in with ``reduce_function(old, new)``."""

    def __init__(self, name: str, reduce_function: Callable[[Any, Any], Any], type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", type_info)
        object.__setattr__(self, "reduce_function", reduce_function)
        self.__post_init__()


class AggregateFunction:
    """PyFlink's AggregateFunction: an accumulator per key, folded in by ``add``."""

    def create_accumulator(self):
        raise NotImplementedError

    def add(self, value, accumulator):
        raise NotImplementedError

    def get_result(self, accumulator):
        raise NotImplementedError

    def merge(self, acc_a, acc_b):
        raise NotImplementedError


@dataclass(frozen=True)
class AggregatingStateDescriptor(StateDescriptor):
    """A per-key accumulator of an :class:`AggregateFunction`; ``get()`` returns its result."""

    def __init__(self, name: str, agg_function: AggregateFunction, type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", type_info)
        object.__setattr__(self, "agg_function", agg_function)
        self.__post_init__()
