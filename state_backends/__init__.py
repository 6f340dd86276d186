"""Keyed state: descriptors and their time-to-live (``ttl``), the backend interfaces (``base``), their
implementations (``heap``) and checkpoint storage (``storage`` over ``checkpoint_store``)."""

from state_backends.base import KeyedStateBackend, StateBackend
from state_backends.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from state_backends.heap import HashMapStateBackend, HeapKeyedStateBackend
from state_backends.ttl import StateTtlConfig

__all__ = [
    "AggregateFunction",
    "AggregatingStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "ValueStateDescriptor",
    "StateTtlConfig",
    "StateBackend",
    "KeyedStateBackend",
    "HashMapStateBackend",
    "HeapKeyedStateBackend",
]
