"""PyFlink's ``pyflink.datastream.state``: state descriptors and the state handles functions get.

>>> from runtime.datastream.state import ValueStateDescriptor
>>> ValueStateDescriptor("count").name
'count'
"""

from operators.broadcast import BroadcastState, ReadOnlyBroadcastState
from state_backends.base import AggregatingState, ListState, MapState, ReducingState, State, ValueState
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from state_backends.ttl import StateTtlConfig

__all__ = [
    "State",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "BroadcastState",
    "ReadOnlyBroadcastState",
    "StateTtlConfig",
]
