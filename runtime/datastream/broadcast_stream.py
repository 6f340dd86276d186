"""Broadcast state's API: ``DataStream.broadcast(MapStateDescriptor, ...)`` gives a :class:`BroadcastStream`;
``stream.connect(broadcast_stream)`` a :class:`BroadcastConnectedStream`, whose ``process`` takes a
``BroadcastProcessFunction`` (or, on a ``KeyedStream``, a ``KeyedBroadcastProcessFunction``).

>>> from runtime import StreamExecutionEnvironment
>>> from state_backends import MapStateDescriptor
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> rules = env.from_collection([("max", 10)]).broadcast(MapStateDescriptor("rules"))
>>> connected = env.from_collection([3, 12]).connect(rules)
>>> type(rules).__name__, type(connected).__name__
('BroadcastStream', 'BroadcastConnectedStream')
"""

from __future__ import annotations

from operators.broadcast import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from operators.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from runtime.errors import ApiUsageError
from runtime.graph.transformation import Transformation
from runtime.types import TypeInformation
from state_backends.descriptors import MapStateDescriptor, refuse_ttl

__all__ = ["BroadcastStream", "BroadcastConnectedStream"]


def checked_descriptors(descriptors: tuple) -> tuple[MapStateDescriptor, ...]:
    """The descriptors of ``broadcast(...)``: MapStateDescriptors with distinct names."""
    for d in descriptors:
        if not isinstance(d, MapStateDescriptor):
            raise ApiUsageError(f"broadcast() takes MapStateDescriptors (broadcast state is a map), got "
                                f"{type(d).__name__}: use MapStateDescriptor(name, key_type, value_type).")
        refuse_ttl(d, "broadcast state")
    names = [d.name for d in descriptors]
    if len(set(names)) != len(names):
        raise ApiUsageError(f"broadcast() got two descriptors named alike ({names}): give each state its own name.")
    return tuple(descriptors)


class BroadcastStream:
    """A stream whose every record goes to every subtask of the operator it is connected to, together with the
    broadcast states (map states) that operator keeps.

    >>> from runtime import StreamExecutionEnvironment
    >>> from state_backends import MapStateDescriptor
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.from_collection([1]).broadcast(MapStateDescriptor("a"), MapStateDescriptor("b")).descriptors
    (MapStateDescriptor(name='a', ...), MapStateDescriptor(name='b', ...))
    """

    def __init__(self, stream, descriptors: tuple[MapStateDescriptor, ...]):
        self.stream = stream
        self.descriptors = descriptors

    def get_execution_environment(self):
        return self.stream.get_execution_environment()


class BroadcastConnectedStream:
    """A stream connected with a :class:`BroadcastStream`: ``process(BroadcastProcessFunction)``, or on a keyed
    stream ``process(KeyedBroadcastProcessFunction)``.

    >>> from operators.functions import KeyedBroadcastProcessFunction
    >>> from runtime import StreamExecutionEnvironment
    >>> from state_backends import MapStateDescriptor
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> rules = env.from_collection([1]).broadcast(MapStateDescriptor("rules"))
    >>> try:
    ...     env.from_collection([2]).connect(rules).process(KeyedBroadcastProcessFunction())
    ... except Exception as e:
    ...     print(e)
    A KeyedBroadcastProcessFunction needs a keyed stream: stream.key_by(...).connect(broadcast_stream).process(...)
    """

    def __init__(self, stream, broadcast_stream: BroadcastStream):
        if stream.get_schema() is not None or broadcast_stream.stream.get_schema() is not None:
            raise ApiUsageError("connect() works on streams of records; call to_rows() on a columnar stream first.")
        if stream.get_execution_environment() is not broadcast_stream.get_execution_environment():
            raise ApiUsageError("connect() needs two streams of the same StreamExecutionEnvironment.")
        self.stream = stream
        self.broadcast_stream = broadcast_stream

    def process(self, func, output_type: TypeInformation | None = None):
        from runtime.datastream.data_stream import DataStream, KeyedStream

        descriptors = self.broadcast_stream.descriptors
        keyed = isinstance(self.stream, KeyedStream)
        if isinstance(func, KeyedBroadcastProcessFunction):
            if not keyed:
                raise ApiUsageError("A KeyedBroadcastProcessFunction needs a keyed stream: "
                                    "stream.key_by(...).connect(broadcast_stream).process(...)")
            key_selector = self.stream._key_selector

            def make(name):
                return KeyedBroadcastProcessOperator(name, func, descriptors, key_selector)
            name = "Keyed-Broadcast-Process"
        elif isinstance(func, BroadcastProcessFunction):
            if keyed:
                raise ApiUsageError("A keyed stream connected with a broadcast stream takes a "
                                    "KeyedBroadcastProcessFunction (with keyed state and timers), got a "
                                    "BroadcastProcessFunction: subclass KeyedBroadcastProcessFunction.")
            if callable(getattr(func, "on_timer", None)):
                raise ApiUsageError(f"{type(func).__name__} defines on_timer(), but timers need a keyed stream: "
                                    "key_by(...) it and use a KeyedBroadcastProcessFunction.")

            def make(name):
                return BroadcastProcessOperator(name, func, descriptors)
            name = "Broadcast-Process"
        else:
            raise ApiUsageError(f"process() on a broadcast-connected stream expects a BroadcastProcessFunction or "
                                f"a KeyedBroadcastProcessFunction, got {type(func).__name__}")
        env = self.stream.get_execution_environment()
        t = Transformation("operator", name, [self.stream._transformation,
                                              self.broadcast_stream.stream._transformation],
                           make, output_type=output_type, environment=env, two_input=True)
        env._add(t)
        return DataStream(env, t)
