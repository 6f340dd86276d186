"""Reading a savepoint's or a checkpoint's state as data: Flink's ``SavepointReader`` (its State Processor API, which
is Java only), in Python, into Arrow tables and pandas.

A reader opens one savepoint or checkpoint (a savepoint's directory, a job's ``chk-<n>`` directory, or a job
directory with ``"latest"`` or an id) and reads an operator's state the way a restore would: every key group of
the operator is loaded into a heap backend by the runtime's own restore code, whichever backend wrote it (heap,
incremental heap, RocksDB's native files), so the reader never parses a file format of its own. Keyed state comes
as a table of ``key`` and ``value`` (and ``key_group`` on request): list state as the list, map state as the dict
of each key. Columns are Arrow types inferred from the values; values Arrow cannot hold (objects of your classes,
mixed types) come as their pickled bytes, in a column named ``value_pickled`` (or ``key_pickled``).

>>> import pyarrow as pa
>>> _column("value", [1, 2, None])
('value', <pyarrow.lib.Int64Array object at ...>
[
  1,
  2,
  null
])
>>> _column("value", [1, "two"])[0]
'value_pickled'
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pyarrow as pa

from runtime.errors import UnknownNameError
from runtime.executor.restore import operator_lists, restore_operator
from runtime.ids import CheckpointId
from runtime.keys.key_groups import KeyGroupRange
from runtime.protocol.checkpoints import CompletedCheckpoint, RestoreSpec
from runtime.tools.checkpoint_inspection import open_checkpoint
from state_backends.heap import HeapKeyedStateBackend
from state_backends.storage import CheckpointStorage, SavepointStorage

__all__ = ["SavepointReader", "OperatorInfo"]


@dataclass(frozen=True)
class OperatorInfo:
    """An operator of the checkpoint: its ``uid``, ``name`` and ``parallelism``, whether it has keyed state and
    operator (list) state, and the names of its keyed states (internal ones, such as timers, start with ``__``)."""

    uid: str
    name: str
    parallelism: int
    keyed_states: tuple[str, ...]
    operator_states: tuple[str, ...]


class SavepointReader:
    """The state of one savepoint or checkpoint. ``SavepointReader.read(path)`` opens it.

    ``path``: a savepoint's directory or a job's ``chk-<n>`` directory (as ``restore_from`` takes them); or a job's
    directory with ``checkpoint="latest"`` (the newest restorable checkpoint) or a checkpoint id.
    """

    def __init__(self, storage, checkpoint: CompletedCheckpoint):
        self.storage = storage
        self.checkpoint = checkpoint
        self._backends: dict[str, HeapKeyedStateBackend] = {}

    @classmethod
    def read(cls, path: str, checkpoint: int | str | None = None) -> "SavepointReader":
        storage, completed = open_checkpoint(path, checkpoint)
        return cls(storage, completed)

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self.checkpoint.checkpoint_id

    @property
    def max_parallelism(self) -> int:
        return self.checkpoint.max_parallelism

    def operators(self) -> list[OperatorInfo]:
        """Every operator with state, in the job's order."""
        found = []
        for state in self.checkpoint.operators:
            keyed = tuple(sorted(self._backend(state.uid).state_names())) if self._keyed_handles(state) else ()
            operator = tuple(sorted(self._operator_lists(state.uid))) if self._operator_handles(state) else ()
            if keyed or operator:
                found.append(OperatorInfo(state.uid, state.name, state.parallelism, keyed, operator))
        return found

    def keyed_state(self, uid: str, name: str, key_groups: bool = False) -> pa.Table:
        """The keyed state ``name`` of operator ``uid``: one row per key, ``key`` and ``value`` (with
        ``key_groups``, a ``key_group`` column first), ordered by key group."""
        backend = self._backend(uid)
        if name not in backend.state_names():
            known = sorted(backend.state_names())
            raise UnknownNameError(f"Operator '{uid}' of checkpoint {self.checkpoint_id} has no keyed state '{name}': "
                                   f"its keyed states are {known}.")
        rows = sorted(backend.raw_entries(name), key=lambda row: row[0])
        columns = [_column("key", [key for _, key, _ in rows]), _column("value", [value for _, _, value in rows])]
        if key_groups:
            columns.insert(0, ("key_group", pa.array([group for group, _, _ in rows], pa.int32())))
        return pa.table(dict(columns))

    def operator_state(self, uid: str, name: str) -> pa.Table:
        """The operator list state ``name`` of operator ``uid``: one row per item, from every subtask in turn."""
        lists = self._operator_lists(uid)
        if name not in lists:
            raise UnknownNameError(f"Operator '{uid}' of checkpoint {self.checkpoint_id} has no operator state "
                                   f"'{name}': its operator states are {sorted(lists)}.")
        return pa.table(dict([_column("value", lists[name])]))

    def keyed_state_frame(self, spark, uid: str, name: str, pickled: bool = False):
        """The keyed state ``name`` of ``uid`` as a Spark DataFrame (``key``, ``value``), read in parallel on the
        executors: one partition per state file, each restored on its own, so state larger than the driver's
        memory reads at the cluster's speed. Spark infers the columns' types from the values; with ``pickled``,
        both are the pickled bytes instead (for values Spark has no type for: unpickle them with ``pickle.loads``).
        The executors must reach the checkpoint's storage (a shared file system or an object store)."""
        state = self._state(uid)
        handles = self._keyed_handles(state)
        if isinstance(self.storage, SavepointStorage):
            where = ("savepoint", self.storage.url)
        else:
            where = ("checkpoints", self.storage.url, self.storage.job_name)
        tasks = [(where, int(self.checkpoint_id), self.max_parallelism, handle, name, pickled) for handle in handles]
        rows = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(_read_one_file)
        if pickled:
            from pyspark.sql.types import BinaryType, StructField, StructType

            schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
            return spark.createDataFrame(rows, schema)
        return spark.createDataFrame(rows, ["key", "value"])

    # -- loading ---------------------------------------------------------------------------------------------

    def _state(self, uid: str):
        state = self.checkpoint.operator(uid)
        if state is None:
            raise UnknownNameError(f"Checkpoint {self.checkpoint_id} has no operator with uid '{uid}': its operators "
                                   f"are {[op.uid for op in self.checkpoint.operators]}.")
        return state

    @staticmethod
    def _keyed_handles(state) -> tuple:
        return tuple(h for h in state.handles if h.keyed_groups or h.is_native)

    @staticmethod
    def _operator_handles(state) -> tuple:
        return tuple(h for h in state.handles if h.has_operator_state)

    def _backend(self, uid: str) -> HeapKeyedStateBackend:
        """Every key group of operator ``uid``, restored by the runtime's restore code into one heap backend."""
        backend = self._backends.get(uid)
        if backend is None:
            backend = self._backends[uid] = _restored(self.storage, self.checkpoint_id, self.max_parallelism, uid,
                                                      self._keyed_handles(self._state(uid)),
                                                      (0, self.max_parallelism - 1))
        return backend

    def _operator_lists(self, uid: str) -> dict[str, list]:
        handles = sorted(self._operator_handles(self._state(uid)), key=lambda h: h.subtask)
        return operator_lists(self.storage, self.checkpoint_id, handles)


def _read_one_file(task) -> list[tuple]:
    """On an executor: the ``(key, value)`` rows of one state file's state ``name``."""
    where, checkpoint_id, max_parallelism, handle, name, pickled = task
    if where[0] == "savepoint":
        storage = SavepointStorage(where[1])
    else:
        storage = CheckpointStorage(where[1], where[2])
    groups = handle.keyed_groups
    backend = _restored(storage, CheckpointId(checkpoint_id), max_parallelism, handle.uid, (handle,),
                        (min(groups), max(groups)))
    if pickled:
        return [(pickle.dumps(key), pickle.dumps(value)) for _, key, value in backend.raw_entries(name)]
    return [(key, value) for _, key, value in backend.raw_entries(name)]


def _restored(storage, checkpoint_id: CheckpointId, max_parallelism: int, uid: str, handles: tuple,
              key_groups: tuple[int, int]) -> HeapKeyedStateBackend:
    """A heap backend holding key groups ``key_groups`` (inclusive) of ``handles``, loaded by the restore code."""
    backend = HeapKeyedStateBackend(max_parallelism, KeyGroupRange(*key_groups), operator_uid=uid)
    restore_operator(storage, RestoreSpec(checkpoint_id, tuple(handles), (), key_groups), None, backend, 0, 1)
    return backend


def _column(name: str, values: list) -> tuple[str, pa.Array]:
    """``(name, Arrow array)`` of ``values``, or ``(name + "_pickled", their pickled bytes)`` when Arrow cannot hold
    them as they are."""
    try:
        return name, pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return f"{name}_pickled", pa.array([pickle.dumps(v, protocol=5) for v in values], pa.binary())
