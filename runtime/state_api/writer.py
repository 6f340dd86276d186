"""Writing a savepoint from Python: bootstrap a new job's state from a table, or change an existing savepoint's
(Flink's ``SavepointWriter``, in Python).

A writer holds each operator's keyed state as ``{state name: {key: entry}}`` (an entry is a value state's value, a
list state's list, a map state's dict) and its operator state as it was stored. ``write(path)`` partitions the
keyed state by the runtime's own key groups (the stable hash a job routes keys with) into one heap state file per
subtask, and writes ``_metadata`` last, so a directory without it is never taken for a savepoint. A job then starts
from it with ``execute(..., restore_from=path)``, on any state backend and at any parallelism.

Keyed state may also come from a Spark DataFrame, which the writer never collects: at ``write`` its rows are routed
to their subtasks on the executors and each subtask's file is written there, by the same function that writes
the driver's files, so the two give the same files for the same data; only the files' descriptions come back to
the driver, which writes ``_metadata``. With ``spark`` a SparkSession and ``frame`` a DataFrame of ``user`` and
``visits`` (not run here, it needs Spark)::

    frame = spark.range(10_000).selectExpr("concat('user-', id) AS user", "id % 7 AS visits")
    path = (SavepointWriter.new_savepoint(128)
            .with_keyed_state("count", "visits", frame, key_column="user", value_column="visits", parallelism=3)
            .write("/shared/savepoints/bootstrap"))    # a path every executor reaches, or an object store

>>> from runtime.state_api import SavepointReader, SavepointWriter
>>> path = (SavepointWriter.new_savepoint(max_parallelism=128)
...         .with_keyed_state("count", "count", {"spark": 2, "flink": 1}, parallelism=2)
...         .write("memory://state-writer-doc/bootstrap"))
>>> table = SavepointReader.read(path).keyed_state("count", "count")
>>> sorted(zip(table["key"].to_pylist(), table["value"].to_pylist()))
[('flink', 1), ('spark', 2)]
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from runtime.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    CorruptCheckpointError,
    SavepointError,
    UnknownNameError,
)
from runtime.ids import CheckpointId
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import assign_to_key_group, key_group_range, subtask_for_key
from runtime.protocol.checkpoints import OPERATOR_STATE_GROUP, CompletedCheckpoint, OperatorState, StateHandle
from runtime.state_api.reader import SavepointReader
from state_backends.descriptors import ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend
from state_backends.storage import SavepointStorage

__all__ = ["SavepointWriter"]


@dataclass(frozen=True)
class _Frame:
    """Keyed state still in a Spark DataFrame: its rows are read, routed and written on the executors at write()."""

    frame: Any  # a pyspark.sql.DataFrame
    key_column: str
    value_column: str


@dataclass
class _Operator:
    uid: str
    name: str
    parallelism: int
    keyed: dict[str, "dict[Any, Any] | _Frame"] = field(default_factory=dict)
    types: dict[str, Any] = field(default_factory=dict)  # state name -> the declared type of its entries
    operator_rows: dict[int, bytes] = field(default_factory=dict)  # subtask -> its pickled operator state
    source_positions: dict = field(default_factory=dict)


class SavepointWriter:
    """Build one with :meth:`new_savepoint` or :meth:`from_existing`; every method returns the writer."""

    def __init__(self, max_parallelism: int, checkpoint_id: int = 1, job_name: str = "savepoint-writer"):
        if type(max_parallelism) is not int or not 1 <= max_parallelism <= 32768:
            raise ConfigurationError(f"SavepointWriter: max_parallelism={max_parallelism!r}: a whole number of key "
                                     "groups from 1 to 32768, the max parallelism of the job that restores it.")
        self.max_parallelism = max_parallelism
        self.checkpoint_id = checkpoint_id
        self.job_name = job_name
        self._operators: dict[str, _Operator] = {}

    @classmethod
    def new_savepoint(cls, max_parallelism: int = 128) -> "SavepointWriter":
        """An empty savepoint for a job whose max parallelism is ``max_parallelism`` (128 unless set)."""
        return cls(max_parallelism)

    @classmethod
    def from_existing(cls, path: str, checkpoint: int | str | None = None) -> "SavepointWriter":
        """Everything of the savepoint or checkpoint at ``path`` (as :meth:`SavepointReader.read` opens it), to
        change and write elsewhere. Keyed state of any backend is rewritten as heap state files."""
        reader = SavepointReader.read(path, checkpoint)
        writer = cls(reader.max_parallelism, int(reader.checkpoint_id), reader.checkpoint.job_name)
        for state in reader.checkpoint.operators:
            if any(h.channel_key_groups for h in state.handles):
                raise SavepointError(f"{path}: operator '{state.uid}' holds records in flight of an unaligned "
                                     "checkpoint, which a rewritten savepoint cannot carry: take a savepoint "
                                     "(aligned) of the job and change that.")
            draft = writer._operators[state.uid] = _Operator(state.uid, state.name, state.parallelism,
                                                            source_positions=dict(state.source_positions))
            if reader._keyed_handles(state):
                backend = reader._backend(state.uid)
                for name in backend.state_names():
                    draft.keyed[name] = {key: entry for _, key, entry in backend.raw_entries(name)}
            for handle in reader._operator_handles(state):
                for _, payload in reader.storage.read_state_rows(reader.checkpoint_id, handle, {OPERATOR_STATE_GROUP}):
                    draft.operator_rows[handle.subtask] = payload
        return writer

    def operators(self) -> list[str]:
        return list(self._operators)

    def with_keyed_state(self, uid: str, name: str, data, key_column: str = "key", value_column: str = "value",
                         parallelism: int | None = None, operator_name: str | None = None,
                         type_info=None) -> "SavepointWriter":
        """Set keyed state ``name`` of operator ``uid`` from ``data``: a ``pyarrow.Table``, a pandas ``DataFrame``
        or a Spark ``DataFrame`` (its ``key_column`` and ``value_column``), a dict ``{key: entry}`` or ``(key,
        entry)`` pairs. An entry is what the state holds per key: a value state's value, a list state's list, a map
        state's dict. Keys must be what the job's key selector gives (the same type: ``1`` and ``"1"`` are
        different keys). A new operator's ``parallelism`` is 1 unless given; the job may restore it at any
        parallelism. ``type_info`` (``Types.LONG()``, ``Types.LIST(Types.STRING())``, ...) types the entries'
        column in the savepoint's table (docs/savepoint-format.md), as a descriptor's type does in a job's
        savepoint; without it (and for entries that do not fit it) they are stored pickled. Either way they
        restore as given. A key given twice is refused with a ``ConfigurationError`` (a state holds one entry per key):
        here, for a table or pairs.

        A Spark DataFrame is not collected: :meth:`write` runs a Spark job in which the executors route each row
        to the subtask the runtime routes its key to (its key group, by the runtime's stable hash), shuffle the
        rows so that one partition holds one subtask's keys, and write that subtask's state file, the same file
        the driver writes for the same data (its content does not depend on the rows' order, so a task Spark runs
        again writes it again alike). An operator with any state from a DataFrame has all its files written so:
        its other states' entries, held by the driver, go to the executors with it. A key the DataFrame holds
        twice fails :meth:`write` with the same ``ConfigurationError`` as a table's (the executor that holds both
        rows finds it) and leaves nothing behind. The executors must reach ``write``'s path (a local path on
        ``local[*]``, a shared file system or an object store on a cluster; not ``memory://``). Values come as
        Spark gives them to Python (an array as a list, a map as a dict, a struct as a ``Row``); a
        ``value_column`` ending in ``_pickled`` holds pickled entries, on every path. Spark Connect has no RDDs
        and is refused."""
        if _is_spark_frame(data):
            entries: "dict | _Frame" = _frame(data, key_column, value_column)
        else:
            entries = _entries(data, key_column, value_column)
        draft = self._operators.get(uid)
        if draft is None:
            draft = self._operators[uid] = _Operator(uid, operator_name or uid, parallelism or 1)
        elif parallelism is not None:
            draft.parallelism = parallelism
        draft.keyed[name] = entries
        if type_info is not None:
            draft.types[name] = type_info
        else:
            draft.types.pop(name, None)
        return self

    def remove_operator(self, uid: str) -> "SavepointWriter":
        """Leave operator ``uid`` out (its job no longer has it)."""
        self._operator(uid)
        del self._operators[uid]
        return self

    def remove_state(self, uid: str, name: str) -> "SavepointWriter":
        self._keyed(uid, name)
        del self._operators[uid].keyed[name]
        self._operators[uid].types.pop(name, None)
        return self

    def transform(self, uid: str, name: str, function: Callable[[Any, Any], Any]) -> "SavepointWriter":
        """Replace each entry of keyed state ``name`` of ``uid`` with ``function(key, entry)``; an entry for
        which it returns None is dropped (a migration of values, or a clean-up)."""
        entries = self._keyed(uid, name)
        if isinstance(entries, _Frame):
            raise ConfigurationError(f"SavepointWriter: keyed state '{name}' of '{uid}' comes from a Spark DataFrame, "
                                     "which the writer does not collect: change the DataFrame (withColumn, filter) "
                                     "and give it to with_keyed_state again.")
        changed = {}
        for key, entry in entries.items():
            new = function(key, entry)
            if new is not None:
                changed[key] = new
        self._operators[uid].keyed[name] = changed
        return self

    def write(self, path: str, overwrite: bool = False) -> str:
        """Write the savepoint into the directory ``path``; returns its URL, which ``restore_from`` takes. A
        directory that holds a savepoint already is refused, unless ``overwrite``. A write that fails leaves
        nothing behind."""
        storage = SavepointStorage(path)
        try:
            storage.read()
        except (CheckpointNotFoundError, CorruptCheckpointError):
            pass
        else:
            if not overwrite:
                raise SavepointError(f"{storage.url} holds a savepoint already: write to a new directory, or "
                                     "write(path, overwrite=True) to replace it.")
            storage.delete()
        try:
            return self._write(storage)
        except BaseException:
            storage.delete()
            raise

    def _write(self, storage: SavepointStorage) -> str:
        checkpoint_id = CheckpointId(self.checkpoint_id)
        operators = []
        for draft in self._operators.values():
            if any(isinstance(entries, _Frame) for entries in draft.keyed.values()):
                handles = self._written_on_executors(storage, checkpoint_id, draft)
            else:
                handles = self._written_here(storage, checkpoint_id, draft)
            operators.append(OperatorState(draft.uid, draft.name, draft.parallelism, tuple(handles),
                                           draft.source_positions))
        checkpoint = CompletedCheckpoint(checkpoint_id, self.job_name, int(time.time() * 1000), 0,
                                         max((op.parallelism for op in operators), default=1), self.max_parallelism,
                                         tuple(operators), savepoint=True)
        storage.write_metadata(checkpoint)  # last: until it is there, the directory is no savepoint
        return storage.url

    # -- helpers ---------------------------------------------------------------------------------------------

    def _operator(self, uid: str) -> _Operator:
        draft = self._operators.get(uid)
        if draft is None:
            raise UnknownNameError(f"SavepointWriter: no operator with uid '{uid}': its operators are "
                                   f"{sorted(self._operators)}.")
        return draft

    def _keyed(self, uid: str, name: str) -> dict:
        draft = self._operator(uid)
        if name not in draft.keyed:
            raise UnknownNameError(f"SavepointWriter: operator '{uid}' has no keyed state '{name}': its keyed states "
                                   f"are {sorted(draft.keyed)}.")
        return draft.keyed[name]

    def _written_here(self, storage, checkpoint_id: CheckpointId, draft: _Operator) -> list[StateHandle]:
        """Each subtask's state file, written by the driver from the entries it holds."""
        routed: list[list] = [[] for _ in range(_subtask_count(draft))]
        for name, entries in draft.keyed.items():
            for subtask, row in _routed(name, entries.items(), self.max_parallelism, draft.parallelism):
                routed[subtask].append(row)
        handles = (_subtask_file(storage, checkpoint_id, draft.uid, self.max_parallelism, draft.parallelism, subtask,
                                 draft.operator_rows.get(subtask), rows, draft.types)
                   for subtask, rows in enumerate(routed))
        return [handle for handle in handles if handle is not None]

    def _written_on_executors(self, storage, checkpoint_id: CheckpointId, draft: _Operator) -> list[StateHandle]:
        """Each subtask's state file, written on the executors: every row goes to the partition of the subtask that
        owns its key, and each partition writes its subtask's file. Only the files' handles come back."""
        if storage.url.startswith("memory://"):
            raise ConfigurationError(f"SavepointWriter: {storage.url} is in the driver's memory, where the executors "
                                     "cannot write keyed state from a Spark DataFrame: write to a path they reach (a "
                                     "local path on local[*], a shared file system or an object store).")
        maxp, p = self.max_parallelism, draft.parallelism
        frames = [(name, entries) for name, entries in draft.keyed.items() if isinstance(entries, _Frame)]
        context = frames[0][1].frame.sparkSession.sparkContext
        parts = [entries.frame.select(entries.key_column, entries.value_column).rdd
                 .mapPartitions(_RouteRows(name, maxp, p, entries.value_column.endswith("_pickled")))
                 for name, entries in frames]
        held = [routed for name, entries in draft.keyed.items() if not isinstance(entries, _Frame)
                for routed in _routed(name, entries.items(), maxp, p)]  # in the driver's memory already
        if held:
            parts.append(context.parallelize(held, max(1, min(p, len(held)))))
        write = _WriteSubtask(storage, checkpoint_id, draft.uid, maxp, p, dict(draft.operator_rows),
                              dict(draft.types))
        results = (context.union(parts).partitionBy(_subtask_count(draft), _subtask_is_partition)
                   .mapPartitionsWithIndex(write).collect())  # a handle (or a key given twice) per subtask
        for outcome in results:
            if outcome[0] == "twice":
                _, name, key = outcome
                raise ConfigurationError(_twice_message(key, draft.keyed[name].key_column))
        return sorted((handle for _, handle in results), key=lambda handle: handle.subtask)


class _KeyTwice(Exception):
    """A key came twice for one state (raised where the rows meet: on an executor for a Spark DataFrame)."""

    def __init__(self, name: str, key):
        super().__init__(name, key)
        self.name, self.key = name, key


def _subtask_count(draft: _Operator) -> int:
    """The subtasks that get a file: the operator's, and any beyond it that held operator state (an existing
    savepoint's, kept as it was)."""
    return max(draft.parallelism, max(draft.operator_rows, default=-1) + 1)


def _routed(name: str, pairs: Iterable, max_parallelism: int, parallelism: int):
    """``(subtask, (name, key, entry))`` for each ``(key, entry)``: the subtask the runtime routes the key to, by
    its key group (the runtime's stable hash, never Python's built-in ``hash``). The driver and the executors route
    with this one function."""
    for key, entry in pairs:
        key = canonical_key(key)
        yield subtask_for_key(key, max_parallelism, parallelism), (name, key, entry)


def _subtask_file(storage, checkpoint_id: CheckpointId, uid: str, max_parallelism: int, parallelism: int,
                  subtask: int, operator_payload: bytes | None, rows: Iterable,
                  types: dict | None = None) -> StateHandle | None:
    """Write the state files of ``subtask`` (None when it has nothing): its operator state in its state file, as a
    subtask's snapshot writes it, and its keyed state as a savepoint's tables (typed by ``types``: state name ->
    type information), from ``rows`` of ``(state name, key, entry)``, every one of a key this subtask owns. The
    driver and the executors write files with this one function. Entries go into the backend ordered by state
    name, key group and pickled key, so the files are the same whatever order the rows came in. A key given twice
    for a state raises :class:`_KeyTwice`.

    >>> from state_backends.storage import SavepointStorage
    >>> storage = SavepointStorage("memory://state-writer-doc/one-file")
    >>> rows = [("n", "b", 2), ("n", "a", 1)]
    >>> handle = _subtask_file(storage, CheckpointId(1), "count", 128, 1, 0, None, rows)
    >>> handle == _subtask_file(storage, CheckpointId(1), "count", 128, 1, 0, None, rows[::-1])
    True
    >>> try:
    ...     _subtask_file(storage, CheckpointId(1), "count", 128, 1, 0, None, rows + [("n", "a", 3)])
    ... except _KeyTwice as twice:
    ...     print("twice:", twice.name, twice.key)
    twice: n a
    """
    tables: dict[str, dict] = {}
    for name, key, entry in rows:
        table = tables.setdefault(name, {})
        if key in table:
            raise _KeyTwice(name, key)
        table[key] = entry
    backend = HeapKeyedStateBackend(max_parallelism, key_group_range(max_parallelism, parallelism, subtask),
                                    operator_uid=uid)
    for name in sorted(tables):
        table = tables[name]
        for key in sorted(table, key=lambda k: (assign_to_key_group(k, max_parallelism), pickle.dumps(k, 5))):
            backend.put_entry(name, key, table[key])
    snapshot = backend.snapshot(full=True)
    if operator_payload is None and snapshot is None:
        return None
    handle = storage.write_state_file(checkpoint_id, uid, subtask,
                                      [] if operator_payload is None else [(OPERATOR_STATE_GROUP, operator_payload)])
    if snapshot is None:
        return handle
    declared = {name: ValueStateDescriptor(name, type_info) for name, type_info in (types or {}).items()}
    return storage.write_state_tables(checkpoint_id, uid, subtask, handle, snapshot.serialized(), declared)


class _RouteRows:
    """On an executor: a DataFrame partition's ``(key, value)`` rows as ``(subtask, (name, key, entry))``."""

    def __init__(self, name: str, max_parallelism: int, parallelism: int, pickled: bool):
        self.name, self.max_parallelism, self.parallelism, self.pickled = name, max_parallelism, parallelism, pickled

    def __call__(self, rows):
        pairs = ((row[0], pickle.loads(row[1]) if self.pickled else row[1]) for row in rows)
        return _routed(self.name, pairs, self.max_parallelism, self.parallelism)


def _subtask_is_partition(subtask: int) -> int:
    return subtask


class _WriteSubtask:
    """On an executor: the partition of subtask ``index`` (every row of the keys it owns) written as its state file,
    by :func:`_subtask_file`; gives ``("handle", handle)``, or ``("twice", state name, key)`` for a key that came
    twice, for the driver to raise."""

    def __init__(self, storage, checkpoint_id: CheckpointId, uid: str, max_parallelism: int, parallelism: int,
                 operator_rows: dict[int, bytes], types: dict):
        self.storage, self.checkpoint_id, self.uid = storage, checkpoint_id, uid
        self.max_parallelism, self.parallelism, self.operator_rows = max_parallelism, parallelism, operator_rows
        self.types = types

    def __call__(self, index: int, routed) -> list[tuple]:
        try:
            handle = _subtask_file(self.storage, self.checkpoint_id, self.uid, self.max_parallelism, self.parallelism,
                                   index, self.operator_rows.get(index), (row for _, row in routed), self.types)
        except _KeyTwice as twice:
            return [("twice", twice.name, twice.key)]
        return [] if handle is None else [("handle", handle)]


def _entries(data, key_column: str, value_column: str) -> dict:
    if isinstance(data, dict):
        return dict(data)
    columns = getattr(data, "column_names", None)
    if columns is None and hasattr(data, "columns") and hasattr(data, "to_dict"):  # a pandas DataFrame
        columns = list(data.columns)
    if columns is not None:
        _check_columns(columns, key_column, value_column)
        keys, values = data[key_column], data[value_column]
        keys = keys.to_pylist() if hasattr(keys, "to_pylist") else list(keys)
        values = values.to_pylist() if hasattr(values, "to_pylist") else list(values)
        if value_column.endswith("_pickled"):  # as the reader gives values Arrow cannot hold
            values = [pickle.loads(v) for v in values]
        return _unique(zip(keys, values), key_column)
    try:
        return _unique(iter(data), key_column)
    except (TypeError, ValueError):
        raise ConfigurationError(f"SavepointWriter: keyed state comes from a pyarrow.Table, a pandas DataFrame, a "
                                 f"dict or (key, entry) pairs, not {type(data).__name__}.") from None


def _is_spark_frame(data) -> bool:
    return type(data).__module__.startswith("pyspark.sql") and hasattr(data, "sparkSession")


def _frame(data, key_column: str, value_column: str) -> _Frame:
    if type(data).__module__.startswith("pyspark.sql.connect"):
        raise ConfigurationError("SavepointWriter: a Spark Connect DataFrame has no RDDs to write state files from "
                                 "on the executors: use a classic SparkSession, or give a pyarrow.Table "
                                 "(frame.toArrow()) for the driver to write.")
    _check_columns(data.columns, key_column, value_column)  # the schema only: nothing runs
    return _Frame(data, key_column, value_column)


def _check_columns(columns, key_column: str, value_column: str) -> None:
    missing = [c for c in (key_column, value_column) if c not in columns]
    if missing:
        raise ConfigurationError(f"SavepointWriter: the table has no column {missing[0]!r} (its columns: "
                                 f"{list(columns)}): name the key's and the entry's columns with key_column=... "
                                 "and value_column=....")


def _twice_message(key, key_column: str) -> str:
    return (f"SavepointWriter: the key {key!r} comes twice in column {key_column!r}: a state holds one entry per key. "
            "Aggregate the rows of a key first (a list state's entry is the list of its values).")


def _unique(pairs, key_column: str) -> dict:
    """``{key: entry}``, refusing a key given twice: a state holds one entry per key, and which of two rows was meant
    cannot be guessed (aggregate them first, into a list for a list state)."""
    entries: dict = {}
    for key, entry in pairs:
        key = canonical_key(key)
        if key in entries:
            raise ConfigurationError(_twice_message(key, key_column))
        entries[key] = entry
    return entries
