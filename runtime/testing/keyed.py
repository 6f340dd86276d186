"""The test harness of keyed operators: the job's operator with a keyed state backend for its subtask's key groups.

Python's counterpart of Flink's ``KeyedOneInputStreamOperatorTestHarness`` (and, built with ``for_two_inputs``, of
its ``KeyedTwoInputStreamOperatorTestHarness`` and ``KeyedBroadcastOperatorTestHarness``). The keyed state lives in
the heap backend (:mod:`state_backends.heap`), made for the key groups the subtask owns
(:mod:`runtime.keys.key_groups`) as a slot makes it; timers are keyed state too, so a snapshot carries them, and a
restore at another parallelism moves them with their key groups. A record whose key another subtask owns is
refused: a job never sends it there.

>>> from operators.functions import KeyedProcessFunction
>>> from state_backends.descriptors import ValueStateDescriptor
>>> class Total(KeyedProcessFunction):   # each key's running total, announced 10 ms after its first record
...     def open(self, runtime_context):
...         self.total = runtime_context.get_state(ValueStateDescriptor("total"))
...     def process_element(self, value, ctx):
...         if self.total.value() is None:
...             ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
...         self.total.update((self.total.value() or 0) + value[1])
...     def on_timer(self, timestamp, ctx):
...         yield ctx.get_current_key(), self.total.value()
>>> harness = KeyedOperatorHarness.for_process_function(Total(), key_selector=lambda r: r[0])
>>> harness.open()
>>> harness.process_elements([("a", 1), ("b", 5), ("a", 2)], timestamps=[0, 3, 4])
>>> harness.process_watermark(10); harness.output_with_timestamps()
[(('a', 3), 10)]
>>> snapshot = harness.snapshot(checkpoint_id=1)           # b's total and timer are in it
>>> restored = KeyedOperatorHarness.for_process_function(Total(), key_selector=lambda r: r[0])
>>> restored.restore(snapshot); restored.open(); restored.process_watermark(20); restored.output()
[('b', 5)]
"""

from __future__ import annotations

from typing import Any

from operators.functions import KeyedProcessFunction, ProcessFunction
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import KeyGroupRange, assign_to_key_group, key_group_range, key_group_to_subtask
from runtime.testing.errors import HarnessError
from runtime.testing.harness import OperatorHarness
from runtime.types import TypeInformation
from state_backends.heap import HeapKeyedStateBackend

__all__ = ["KeyedOperatorHarness"]


class KeyedOperatorHarness(OperatorHarness):
    """Drives a keyed operator: ``KeyedStream.process`` / ``reduce`` / ``window(...)`` and the ``map``,
    ``flat_map``, ``filter`` of a keyed stream whose function declares state. The factories take the key selector
    (``key_by``'s); :meth:`for_stream` takes any keyed operator, windows included, and
    :meth:`~OperatorHarness.for_two_inputs` the keyed ones of two inputs: a keyed stream connected to a broadcast
    one (whose records reach every subtask) or two connected streams keyed alike.

    >>> from runtime.datastream.window import TumblingEventTimeWindows
    >>> harness = KeyedOperatorHarness.for_stream(
    ...     lambda ds: ds.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(10))
    ...                  .reduce(lambda a, b: (a[0], a[1] + b[1])))
    >>> harness.open()
    >>> harness.process_elements([("a", 1), ("a", 2), ("a", 4)], timestamps=[1, 8, 12])
    >>> harness.process_watermark(9); harness.output_with_timestamps()
    [(('a', 3), 9)]
    """

    keyed = True

    def _create_backend(self) -> HeapKeyedStateBackend:
        owned = key_group_range(self.max_parallelism, self.parallelism, self.subtask_index)
        # the harness's clock is processing time for state with a time-to-live too
        return HeapKeyedStateBackend(self.max_parallelism, owned, clock=self._clock.now_ms,
                                     operator_uid=self._declared.node.uid)

    @classmethod
    def _wrong_kind(cls, name: str, kind: str) -> str:
        return (f"Operator '{name}' ({kind}) is not keyed: harness it with OperatorHarness. (On a KeyedStream, map, "
                "flat_map, filter run keyed only when the function's class defines open(), where state is declared.)")

    # -- building ----------------------------------------------------------------------------------------

    @classmethod
    def for_process_function(cls, function, key_selector, output_type: TypeInformation | None = None,
                             **placement) -> "KeyedOperatorHarness":
        """A harness of ``stream.key_by(key_selector).process(function)``, a KeyedProcessFunction; ``placement``:
        ``parallelism``, ``subtask_index``, ``max_parallelism`` (see :meth:`OperatorHarness.for_stream`).

        >>> from operators.functions import MapFunction
        >>> KeyedOperatorHarness.for_process_function(MapFunction(), key_selector=str)
        Traceback (most recent call last):
            ...
        runtime.errors.ApiUsageError: KeyedStream.process() expects a KeyedProcessFunction, got MapFunction
        """
        if isinstance(function, ProcessFunction) and not isinstance(function, KeyedProcessFunction):
            raise HarnessError(f"{type(function).__name__} is a ProcessFunction, which runs on a stream that is not "
                               "keyed: harness it with OperatorHarness.for_process_function(function), or make it a "
                               "KeyedProcessFunction.")
        return cls.for_stream(lambda ds: ds.key_by(key_selector).process(function, output_type), **placement)

    @classmethod
    def for_reduce(cls, function, key_selector, **placement) -> "KeyedOperatorHarness":
        """A harness of ``stream.key_by(key_selector).reduce(function)``: a rolling reduce per key.

        >>> harness = KeyedOperatorHarness.for_reduce(lambda a, b: a + b, key_selector=lambda x: x % 2)
        >>> harness.open(); harness.process_elements([1, 2, 3, 4]); harness.output()
        [1, 2, 4, 6]
        """
        return cls.for_stream(lambda ds: ds.key_by(key_selector).reduce(function), **placement)

    @classmethod
    def for_map(cls, function, key_selector, output_type: TypeInformation | None = None,
                **placement) -> "KeyedOperatorHarness":
        """A harness of ``stream.key_by(key_selector).map(function)``, whose function declares keyed state in
        ``open`` (one that does not runs unkeyed: :meth:`OperatorHarness.for_map`).

        >>> from operators.functions import MapFunction
        >>> from state_backends.descriptors import ValueStateDescriptor
        >>> class Seen(MapFunction):
        ...     def open(self, runtime_context):
        ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
        ...     def map(self, word):
        ...         self.seen.update((self.seen.value() or 0) + 1)
        ...         return word, self.seen.value()
        >>> harness = KeyedOperatorHarness.for_map(Seen(), key_selector=lambda w: w)
        >>> harness.open(); harness.process_elements(["a", "b", "a"]); harness.output()
        [('a', 1), ('b', 1), ('a', 2)]
        """
        return cls.for_stream(lambda ds: ds.key_by(key_selector).map(function, output_type), **placement)

    @classmethod
    def for_flat_map(cls, function, key_selector, output_type: TypeInformation | None = None,
                     **placement) -> "KeyedOperatorHarness":
        """A harness of ``stream.key_by(key_selector).flat_map(function)``, whose function declares keyed state.

        >>> KeyedOperatorHarness.for_flat_map(str.split, key_selector=len)
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: Operator 'FlatMap' (FlatMapOperator) is not keyed: harness it with...
        """
        return cls.for_stream(lambda ds: ds.key_by(key_selector).flat_map(function, output_type), **placement)

    @classmethod
    def for_filter(cls, function, key_selector, **placement) -> "KeyedOperatorHarness":
        """A harness of ``stream.key_by(key_selector).filter(function)``, whose function declares keyed state.

        >>> from operators.functions import FilterFunction
        >>> from state_backends.descriptors import ValueStateDescriptor
        >>> class FirstOfKey(FilterFunction):
        ...     def open(self, runtime_context):
        ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
        ...     def filter(self, word):
        ...         first = self.seen.value() is None
        ...         self.seen.update(True)
        ...         return first
        >>> harness = KeyedOperatorHarness.for_filter(FirstOfKey(), key_selector=lambda w: w)
        >>> harness.open(); harness.process_elements(["a", "a", "b"]); harness.output()
        ['a', 'b']
        """
        return cls.for_stream(lambda ds: ds.key_by(key_selector).filter(function), **placement)

    # -- keys and state ----------------------------------------------------------------------------------

    @property
    def key_groups(self) -> KeyGroupRange:
        """The key groups this subtask owns.

        >>> KeyedOperatorHarness.for_reduce(max, key_selector=len, parallelism=2, subtask_index=1).key_groups
        KeyGroupRange(start=64, end=127)
        """
        return self._backend.key_groups

    def owns_key(self, key: Any) -> bool:
        """Whether a job would send this subtask the records of ``key`` (its key group is this subtask's).

        >>> harness = KeyedOperatorHarness.for_reduce(max, key_selector=len, parallelism=2, subtask_index=0)
        >>> harness.owns_key("spark"), harness.owns_key(3)
        (True, False)
        """
        return assign_to_key_group(canonical_key(key), self.max_parallelism) in self.key_groups

    def _admit(self, records: list, input_number: int) -> None:
        key_of = self._declared.key_selectors[input_number - 1]
        if key_of is None:  # not keyed: a broadcast input reaches every subtask
            return
        groups, max_parallelism = self.key_groups, self.max_parallelism
        for record in records:
            key = canonical_key(key_of(record))
            group = assign_to_key_group(key, max_parallelism)
            if group not in groups:
                owner = key_group_to_subtask(group, max_parallelism, self.parallelism)
                raise HarnessError(
                    f"Record {record!r:.200} has key {key!r:.100} (key group {group}), which subtask {owner} of "
                    f"{self.parallelism} owns, not this one (subtask {self.subtask_index}, key groups "
                    f"{groups.start}..{groups.end}): feed it to the harness of subtask {owner}, as a job routes each "
                    "record to the subtask that owns its key (harness.owns_key(key) tells).")

    def keyed_state(self, state_name: str) -> dict:
        """``{key: value}`` of keyed state ``state_name`` on this subtask, as the backend holds it (a list state's
        lists, a map state's dicts).

        >>> harness = KeyedOperatorHarness.for_reduce(lambda a, b: a + b, key_selector=lambda x: x % 2)
        >>> harness.open(); harness.process_elements([1, 2, 3]); harness.keyed_state("reduce")
        {1: 4, 0: 2}
        """
        return {key: value for _, key, value in self._backend.entries(state_name)}
