"""Built-in one-input operators: map, flat_map, filter, process, and keyed process / reduce.

An operator runs its function over a whole batch of records at once (``function`` is the user's object,
``call`` the plain callable behind it, see :func:`operators.functions.as_callable`):

>>> FilterOperator("even", None, lambda x: x % 2 == 0).process_batch([1, 2, 3, 4])
[2, 4]
>>> FlatMapOperator("split", None, str.split).process_batch(["to be", "or"])
['to', 'be', 'or']
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from operators.context import KeyedContext
from operators.functions import ProcessFunction
from operators.operator import OneInputOperator
from runtime.errors import FunctionContractError
from runtime.keys.canonical import canonical_key
from runtime.side_outputs import OutputTag, SideOutputRecord

_PLAIN_KEY_TYPES = frozenset({int, str, bytes, bool, type(None)})  # keys that are their own canonical form

__all__ = [
    "MapOperator",
    "FlatMapOperator",
    "FilterOperator",
    "ProcessOperator",
    "KeyedProcessOperator",
    "KeyedReduceOperator",
]


def _tag_side_outputs(records: list, side_tags) -> list:
    """``(OutputTag, value)`` pairs a process function yielded become side-output records."""
    return [SideOutputRecord(r[0].tag_id, r[1]) if type(r) is tuple and len(r) == 2 and type(r[0]) is OutputTag
            else r for r in records]


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
        return [call(r) for r in records]


class FilterOperator(MapOperator):
    def process_batch(self, records: list) -> list:
        call = self.call
        return [r for r in records if call(r)]


class FlatMapOperator(MapOperator):
    def process_batch(self, records: list) -> list:
        call = self.call
        out: list = []
        extend = out.extend
        for r in records:
            result = call(r)
            if result is not None:
                extend(_check_iterable(result, self.name))
        return out


class _PlainContext(ProcessFunction.Context):
    pass


class ProcessOperator(OneInputOperator):
    def open(self) -> None:
        self.ctx = _PlainContext()
        super().open()

    def process_batch(self, records: list) -> list:
        call = self.function.process_element
        ctx = self.ctx
        out: list = []
        extend = out.extend
        for r in records:
            result = call(r, ctx)
            if result is not None:
                extend(_check_iterable(result, self.name))
        return _tag_side_outputs(out, self.side_tags) if self.side_tags else out


class KeyedProcessOperator(OneInputOperator):
    """A KeyedProcessFunction: the key is recomputed here (as Flink does) to scope state."""

    keyed = True

    def __init__(self, name: str, function: Any, key_selector: Callable):
        super().__init__(name, function)
        self.key_selector = key_selector

    def open(self) -> None:
        self.backend = self.runtime_context.keyed_backend
        self.ctx = KeyedContext()
        super().open()

    def process_batch(self, records: list) -> list:
        call = self.function.process_element
        key_of = self.key_selector
        set_key = self.backend.set_current_key
        ctx = self.ctx
        out: list = []
        extend = out.extend
        for r in records:
            key = key_of(r)
            set_key(key)
            ctx.current_key = key
            result = call(r, ctx)
            if result is not None:
                extend(_check_iterable(result, self.name))
        return _tag_side_outputs(out, self.side_tags) if self.side_tags else out


class KeyedReduceOperator(OneInputOperator):
    """Rolling reduce per key: emits the new reduced value for every record (Flink's semantics).

    >>> from operators.context import SubtaskInfo
    >>> from runtime.keys.key_groups import key_group_range
    >>> from state_backends.heap import HeapKeyedStateBackend
    >>> op = KeyedReduceOperator("sum", None, lambda a, b: a + b, key_selector=lambda x: x % 2)
    >>> op.setup(SubtaskInfo("sum", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    >>> op.open(); op.process_batch([1, 2, 3, 4])
    [1, 2, 4, 6]
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
        super().open()

    def process_batch(self, records: list) -> list:
        # One state read and one write per distinct key of the batch, the folding in a local dict: a barrier
        # only ever comes between two batches, so the state is exact at every snapshot.
        reduce = self.call
        keys = [self.key_selector(r) for r in records]
        distinct = list(dict.fromkeys(keys))
        if not _PLAIN_KEY_TYPES.issuperset(map(type, distinct)):  # floats or tuples: NaNs must be one key
            canonical = [canonical_key(k) for k in distinct]
            if any(c is not k for c, k in zip(canonical, distinct)):  # a NaN: records' keys follow
                to_canonical = dict(zip(distinct, canonical))
                keys = [to_canonical[k] for k in keys]
                distinct = list(dict.fromkeys(canonical))
        current = dict(zip(distinct, self.backend.get_many(self.STATE_NAME, distinct)))
        out = []
        append = out.append
        for r, key in zip(records, keys):
            before = current[key]
            value = r if before is None else reduce(before, r)
            current[key] = value
            append(value)
        self.backend.put_many(self.STATE_NAME, distinct, [current[key] for key in distinct])
        return out
