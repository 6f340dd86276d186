"""The :class:`RuntimeContext` a subtask hands its user functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from operators.functions import KeyedProcessFunction, RuntimeContext
from operators.timers import processing_time_ms
from runtime.errors import StateUsageError
from state_backends.descriptors import refuse_ttl

__all__ = ["SubtaskInfo", "StreamingRuntimeContext", "KeyedContext", "OperatorListState"]


@dataclass(frozen=True)
class SubtaskInfo:
    """Where an operator instance runs: its name, subtask index, parallelism and job attempt."""

    operator_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt: int
    job_parameters: dict = field(default_factory=dict)  # env.get_config().set_global_job_parameters(...)
    # Processing time in epoch ms, wherever an operator or a function reads it: the wall clock in a job, the test's
    # clock in a harness (runtime.testing), so that processing-time timers and windows can be tested exactly.
    clock: Callable[[], int] = processing_time_ms
    # The checkpoint this run restored (0: a fresh start). Its own checkpoints are numbered after it, so an id an
    # operator records at the end of its input (the first checkpoint that can include it) comes after it too.
    restored_checkpoint_id: int = 0
    # Called with each queryable state descriptor the operator's functions take (runtime.executor.queryable_state):
    # the slot routes lookups of it. None where nothing answers lookups (a harness).
    declare_queryable: Callable[[Any], None] | None = None


class OperatorListState:
    """Non-keyed list state of one operator subtask (Flink's operator ListState, even-split on rescale).

    >>> items = []
    >>> state = OperatorListState(items)
    >>> state.add(1); state.add_all([2, 3]); list(state.get())
    [1, 2, 3]
    """

    __slots__ = ("_items",)

    def __init__(self, items: list):
        self._items = items

    def get(self) -> list:
        return list(self._items)

    def add(self, value) -> None:
        self._items.append(value)

    def add_all(self, values) -> None:
        self._items.extend(values)

    def update(self, values) -> None:
        self._items[:] = list(values)

    def clear(self) -> None:
        self._items.clear()


class StreamingRuntimeContext(RuntimeContext):
    def __init__(self, info: SubtaskInfo, keyed_backend=None, operator=None):
        self._info = info
        self._backend = keyed_backend
        self._operator = operator

    @property
    def keyed_backend(self):
        """The subtask's keyed state backend; None for operators that are not keyed."""
        return self._backend

    def get_task_name(self) -> str:
        return self._info.operator_name

    def get_index_of_this_subtask(self) -> int:
        return self._info.subtask_index

    def get_number_of_parallel_subtasks(self) -> int:
        return self._info.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._info.max_parallelism

    def get_attempt_number(self) -> int:
        return self._info.attempt

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self._info.job_parameters.get(key, default_value)

    def _keyed(self, what: str):
        if self._backend is None:
            raise StateUsageError(
                f"{what}() is only available in functions applied to a KeyedStream, but operator "
                f"'{self._info.operator_name}' is not keyed: call key_by(...) before it."
            )
        return self._backend

    def get_state(self, state_descriptor):
        state = self._keyed("get_state").get_state(state_descriptor)
        if getattr(state_descriptor, "queryable_name", None) is not None and self._info.declare_queryable is not None:
            self._info.declare_queryable(state_descriptor)
        return state

    get_list_state = get_state
    get_map_state = get_state

    def get_operator_list_state(self, state_descriptor) -> OperatorListState:
        """Non-keyed list state of this subtask, checkpointed and dealt round-robin on a rescaled restore."""
        refuse_ttl(state_descriptor, "operator list state")
        return OperatorListState(self._operator.operator_list(state_descriptor.name))
    get_reducing_state = get_state
    get_aggregating_state = get_state


class KeyedContext(KeyedProcessFunction.OnTimerContext):
    """The ``ctx`` of ``process_element`` and ``on_timer`` on a keyed stream (and, without a key, of a
    ``ProcessFunction``): the operator sets its fields before each call, cheaper than asking the backend."""

    __slots__ = ("current_key", "current_timestamp", "service", "domain")

    def __init__(self, service=None):
        self.current_key = None
        self.current_timestamp = None
        self.service = service
        self.domain = None

    def get_current_key(self):
        return self.current_key

    def timestamp(self):
        return self.current_timestamp

    def timer_service(self):
        return self.service

    def time_domain(self):
        return self.domain
