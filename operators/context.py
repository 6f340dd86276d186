"""The :class:`RuntimeContext` a subtask hands its user functions."""

from __future__ import annotations

from dataclasses import dataclass

from operators.functions import KeyedProcessFunction, RuntimeContext

__all__ = ["SubtaskInfo", "StreamingRuntimeContext", "KeyedContext"]


@dataclass(frozen=True)
class SubtaskInfo:
    """Where an operator instance runs: its name, subtask index, parallelism and job attempt."""

    operator_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt: int


class StreamingRuntimeContext(RuntimeContext):
    def __init__(self, info: SubtaskInfo, keyed_backend=None):
        self._info = info
        self._backend = keyed_backend

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

    def _keyed(self, what: str):
        if self._backend is None:
            raise RuntimeError(
                f"{what}() is only available in functions applied to a KeyedStream, but operator "
                f"'{self._info.operator_name}' is not keyed: call key_by(...) before it."
            )
        return self._backend

    def get_state(self, state_descriptor):
        return self._keyed("get_state").get_state(state_descriptor)

    get_list_state = get_state
    get_map_state = get_state
    get_reducing_state = get_state
    get_aggregating_state = get_state


class KeyedContext(KeyedProcessFunction.Context):
    """The ``ctx`` of ``process_element`` on a keyed stream."""

    __slots__ = ("_backend",)

    def __init__(self, backend):
        self._backend = backend

    def get_current_key(self):
        return self._backend.current_key
