"""State descriptors in PyFlink's shape: a name (unique within an operator) and optional type information.

>>> ValueStateDescriptor("count").name
'count'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from runtime.errors import ApiUsageError, ConfigurationError, StateUsageError
from state_backends.ttl import StateTtlConfig

__all__ = [
    "check_same_declaration",
    "declared_or_class",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "AggregateFunction",
    "refuse_ttl",
]


@dataclass(frozen=True)
class StateDescriptor:
    """What every descriptor has: a ``name``, unique within an operator, and optional ``type_info``.

    >>> from runtime.types import Types
    >>> descriptor = ValueStateDescriptor("count", Types.LONG())
    >>> isinstance(descriptor, StateDescriptor), descriptor.name, descriptor.type_info
    (True, 'count', LONG)

    Its entries can expire (keyed state only): ``enable_time_to_live`` takes a :class:`StateTtlConfig`.

    >>> from runtime.common.time import Time
    >>> descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    >>> descriptor.has_ttl, descriptor.ttl_config.get_ttl()
    (True, Time.milliseconds(10000))
    """

    name: str
    type_info: Any = None
    # Set by enable_time_to_live (PyFlink's descriptors are mutable; ours are frozen but for this one setter).
    # Not compared: a descriptor's equality and hash must not change when its TTL is set after construction.
    ttl_config: StateTtlConfig | None = field(default=None, init=False, compare=False, repr=False)
    # Set by set_queryable: the name under which the running job answers lookups of this state (REST, client).
    queryable_name: str | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"A state descriptor needs a non-empty string name, got {self.name!r}")

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Let this state's entries expire as ``ttl_config`` says (PyFlink's method: changes the descriptor, returns
        None). Keyed state only: operator state refuses a descriptor with a TTL."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise ApiUsageError(f"enable_time_to_live() of state '{self.name}' expects a StateTtlConfig, such as "
                                f"StateTtlConfig.new_builder(Time.seconds(10)).build(), got {ttl_config!r}.")
        if self.queryable_name is not None and ttl_config.is_enabled():
            raise StateUsageError(_QUERYABLE_TTL.format(name=self.name))
        object.__setattr__(self, "ttl_config", ttl_config)

    def set_queryable(self, queryable_state_name: str) -> None:
        """Let the running job answer lookups of this keyed state by key, under ``queryable_state_name`` (Flink's
        ``setQueryable``): ``GET /jobs/<id>/state/<name>?key=...`` on the REST API, or
        :class:`~runtime.tools.queryable_state.QueryableStateClient`. The name must be unique in the job. A lookup
        is answered between two batches by the subtask that owns the key: consistent for that key, not a snapshot
        of the whole state.

        >>> descriptor = ValueStateDescriptor("count")
        >>> descriptor.set_queryable("counts"); descriptor.is_queryable(), descriptor.get_queryable_state_name()
        (True, 'counts')
        """
        if not isinstance(queryable_state_name, str) or not queryable_state_name.strip():
            raise ApiUsageError(f"set_queryable() of state '{self.name}' needs a non-empty name, got "
                                f"{queryable_state_name!r}.")
        if self.has_ttl:
            raise StateUsageError(_QUERYABLE_TTL.format(name=self.name))
        object.__setattr__(self, "queryable_name", queryable_state_name)

    def is_queryable(self) -> bool:
        return self.queryable_name is not None

    def get_queryable_state_name(self) -> str | None:
        return self.queryable_name

    @property
    def has_ttl(self) -> bool:
        """Whether entries of this state expire (a TTL config with update type ``Disabled`` is none)."""
        return self.ttl_config is not None and self.ttl_config.is_enabled()


_QUERYABLE_TTL = ("State '{name}' cannot be both queryable and expire (as in Flink: a lookup would have to read, "
                  "or refresh, entries the task considers gone). Remove set_queryable(...) or "
                  "enable_time_to_live(...) from its descriptor.")


def refuse_ttl(descriptor: StateDescriptor, kind: str) -> None:
    """Raise if ``descriptor`` has a TTL: ``kind`` of state (operator list state, broadcast state) cannot expire.

    >>> from runtime.common.time import Time
    >>> descriptor = ListStateDescriptor("offsets")
    >>> descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    >>> try:
    ...     refuse_ttl(descriptor, "operator list state")
    ... except StateUsageError as error:
    ...     print(error)
    State 'offsets' has a time-to-live, but operator list state cannot expire: TTL applies to keyed state only
    (as in Flink). Remove enable_time_to_live(...) from its descriptor, or keep the data in keyed state
    (get_state on a KeyedStream).
    """
    if isinstance(descriptor, StateDescriptor) and descriptor.has_ttl:
        raise StateUsageError(
            f"State '{descriptor.name}' has a time-to-live, but {kind} cannot expire: TTL applies to keyed state "
            "only (as in Flink). Remove enable_time_to_live(...) from its descriptor, or keep the data in keyed "
            "state (get_state on a KeyedStream).")


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """A single value per key.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("alice")
    >>> count = backend.get_state(ValueStateDescriptor("count"))
    >>> count.value(), count.update(3), count.value()
    (None, None, 3)
    """


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """A list of values per key.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("alice")
    >>> seen = backend.get_state(ListStateDescriptor("seen"))
    >>> seen.add("a"); seen.add_all(["b", "c"]); list(seen.get())
    ['a', 'b', 'c']
    """


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    """A dict per key. ``type_info`` may be given as ``(key_type, value_type)``.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("alice")
    >>> visits = backend.get_state(MapStateDescriptor("visits"))
    >>> visits.put("home", 3); visits.get("home"), visits.contains("cart")
    (3, False)
    """

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", (key_type_info, value_type_info))
        self.__post_init__()


@dataclass(frozen=True)
class ReducingStateDescriptor(StateDescriptor):
    """A value per key that ``add`` folds in with ``reduce_function(old, new)``.

    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("alice")
    >>> total = backend.get_state(ReducingStateDescriptor("total", lambda old, new: old + new))
    >>> total.add(2); total.add(5); total.get()
    7
    """

    def __init__(self, name: str, reduce_function: Callable[[Any, Any], Any], type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", type_info)
        object.__setattr__(self, "reduce_function", reduce_function)
        self.__post_init__()

    def get_reduce_function(self) -> Callable[[Any, Any], Any]:
        return self.reduce_function


class AggregateFunction:
    """PyFlink's AggregateFunction: an accumulator per key, folded in by ``add``.

    >>> class Average(AggregateFunction):
    ...     def create_accumulator(self): return (0, 0)
    ...     def add(self, value, accumulator): return accumulator[0] + value, accumulator[1] + 1
    ...     def get_result(self, accumulator): return accumulator[0] / accumulator[1]
    >>> average = Average(); average.get_result(average.add(4, average.add(2, average.create_accumulator())))
    3.0
    """

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
    """A per-key accumulator of an :class:`AggregateFunction`; ``get()`` returns its result.

    >>> class Longest(AggregateFunction):
    ...     def create_accumulator(self): return ""
    ...     def add(self, value, accumulator): return max(accumulator, value, key=len)
    ...     def get_result(self, accumulator): return accumulator
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)); backend.set_current_key("alice")
    >>> longest = backend.get_state(AggregatingStateDescriptor("longest", Longest()))
    >>> longest.add("spark"); longest.add("flink"); longest.add("chandy"); longest.get()
    'chandy'
    """

    def __init__(self, name: str, agg_function: AggregateFunction, type_info: Any = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type_info", type_info)
        object.__setattr__(self, "agg_function", agg_function)
        self.__post_init__()

    def get_agg_function(self) -> AggregateFunction:
        return self.agg_function


def check_same_declaration(declared: StateDescriptor, descriptor: StateDescriptor) -> None:
    """Refuse a state name declared again as another kind of state, or with another time-to-live.

    >>> check_same_declaration(ValueStateDescriptor("n"), ValueStateDescriptor("n"))
    >>> check_same_declaration(ValueStateDescriptor("n"), ListStateDescriptor("n"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    runtime.errors.StateUsageError: State 'n' was declared as ValueStateDescriptor and again as ListStateDescriptor...
    """
    if type(declared) is not type(descriptor):
        raise StateUsageError(
            f"State '{descriptor.name}' was declared as {type(declared).__name__} and again as "
            f"{type(descriptor).__name__}: give each state of an operator its own name.")
    before = declared.ttl_config if declared.has_ttl else None
    wanted = descriptor.ttl_config if descriptor.has_ttl else None
    if before != wanted:
        raise StateUsageError(
            f"State '{descriptor.name}' was declared {_ttl_phrase(before)} and again {_ttl_phrase(wanted)}: declare "
            "each state with one StateTtlConfig (or none), or give the other declaration its own name.")


def _ttl_phrase(config) -> str:
    return "without a time-to-live" if config is None else f"with {config!r}"


def declared_or_class(declared: dict, states: dict, descriptor: StateDescriptor, classes: dict):
    """``(state, None)``: ``descriptor``'s state, declared before (the same way, else StateUsageError); or
    ``(None, its class)`` from ``classes`` (descriptor type -> state class) to declare it with."""
    existing = declared.get(descriptor.name)
    if existing is not None:
        check_same_declaration(existing, descriptor)
        return states[descriptor.name], None
    state_class = classes.get(type(descriptor))
    if state_class is None:
        raise StateUsageError(f"Unsupported state descriptor {type(descriptor).__name__}: use one of "
                              f"{sorted(c.__name__ for c in classes)}")
    return None, state_class
