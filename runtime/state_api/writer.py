"""Writing a savepoint from Python: bootstrap a new job's state from a table, or change an existing savepoint's
(Flink's ``SavepointWriter``, in Python).

A writer holds each operator's keyed state as ``{state name: {key: entry}}`` (an entry is a value state's value, a
list state's list, a map state's dict) and its operator state as it was stored. ``write(path)`` partitions the
keyed state by the runtime's own key groups (the stable hash a job routes keys with) into one heap state file per
subtask, and writes ``_metadata`` last, so a directory without it is never taken for a savepoint. A job then starts
from it with ``execute(..., restore_from=path)``, on any state backend and at any parallelism.

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
from typing import Any, Callable

from runtime.errors import (
    CheckpointNotFoundError,
    ConfigurationError,
    CorruptCheckpointError,
    SavepointError,
    UnknownNameError,
)
from runtime.ids import CheckpointId
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import assign_to_key_group, key_group_range, key_group_to_subtask
from runtime.protocol.checkpoints import OPERATOR_STATE_GROUP, CompletedCheckpoint, OperatorState
from runtime.state_api.reader import SavepointReader
from state_backends.heap import HeapKeyedStateBackend
from state_backends.storage import SavepointStorage

__all__ = ["SavepointWriter"]


@dataclass
class _Operator:
    uid: str
    name: str
    parallelism: int
    keyed: dict[str, dict[Any, Any]] = field(default_factory=dict)
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
                         parallelism: int | None = None, operator_name: str | None = None) -> "SavepointWriter":
        """Set keyed state ``name`` of operator ``uid`` from ``data``: a ``pyarrow.Table`` or pandas ``DataFrame``
        (its ``key_column`` and ``value_column``), a dict ``{key: entry}`` or ``(key, entry)`` pairs. An entry is
        what the state holds per key: a value state's value, a list state's list, a map state's dict. Keys must
        be what the job's key selector gives (the same type: ``1`` and ``"1"`` are different keys). A new
        operator's ``parallelism`` is 1 unless given; the job may restore it at any parallelism."""
        entries = _entries(data, key_column, value_column)
        draft = self._operators.get(uid)
        if draft is None:
            draft = self._operators[uid] = _Operator(uid, operator_name or uid, parallelism or 1)
        elif parallelism is not None:
            draft.parallelism = parallelism
        draft.keyed[name] = entries
        return self

    def remove_operator(self, uid: str) -> "SavepointWriter":
        """Leave operator ``uid`` out (its job no longer has it)."""
        self._operator(uid)
        del self._operators[uid]
        return self

    def remove_state(self, uid: str, name: str) -> "SavepointWriter":
        self._keyed(uid, name)
        del self._operators[uid].keyed[name]
        return self

    def transform(self, uid: str, name: str, function: Callable[[Any, Any], Any]) -> "SavepointWriter":
        """Replace each entry of keyed state ``name`` of ``uid`` with ``function(key, entry)``; an entry for
        which it returns None is dropped (a migration of values, or a clean-up)."""
        entries = self._keyed(uid, name)
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
            handles = []
            for subtask, rows in enumerate(self._subtask_rows(draft)):
                if rows:
                    handles.append(storage.write_state_file(checkpoint_id, draft.uid, subtask, rows))
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

    def _subtask_rows(self, draft: _Operator) -> list[list[tuple[int, bytes]]]:
        """Each subtask's rows: its operator state first, as a subtask's snapshot writes it, then its key groups."""
        p, maxp = draft.parallelism, self.max_parallelism
        rows: list[list[tuple[int, bytes]]] = [[] for _ in range(max(p, max(draft.operator_rows, default=-1) + 1))]
        for subtask, payload in draft.operator_rows.items():
            rows[subtask].append((OPERATOR_STATE_GROUP, payload))
        if draft.keyed:
            backends = [HeapKeyedStateBackend(maxp, key_group_range(maxp, p, i), operator_uid=draft.uid)
                        for i in range(p)]
            for name, entries in draft.keyed.items():
                for key, entry in entries.items():
                    key = canonical_key(key)
                    backends[key_group_to_subtask(assign_to_key_group(key, maxp), maxp, p)].put_entry(name, key, entry)
            for i, backend in enumerate(backends):
                snapshot = backend.snapshot(full=True)
                if snapshot is not None:
                    rows[i].extend(snapshot.serialized())
        return rows


def _entries(data, key_column: str, value_column: str) -> dict:
    if isinstance(data, dict):
        return dict(data)
    columns = getattr(data, "column_names", None)
    if columns is None and hasattr(data, "columns") and hasattr(data, "to_dict"):  # a pandas DataFrame
        columns = list(data.columns)
    if columns is not None:
        missing = [c for c in (key_column, value_column) if c not in columns]
        if missing:
            raise ConfigurationError(f"SavepointWriter: the table has no column {missing[0]!r} (its columns: "
                                     f"{list(columns)}): name the key's and the entry's columns with key_column=... "
                                     "and value_column=....")
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


def _unique(pairs, key_column: str) -> dict:
    """``{key: entry}``, refusing a key given twice: a state holds one entry per key, and which of two rows was meant
    cannot be guessed (aggregate them first, into a list for a list state)."""
    entries: dict = {}
    for key, entry in pairs:
        key = canonical_key(key)
        if key in entries:
            raise ConfigurationError(f"SavepointWriter: the key {key!r} comes twice in column {key_column!r}: a state "
                                     "holds one entry per key. Aggregate the rows of a key first (a list state's "
                                     "entry is the list of its values).")
        entries[key] = entry
    return entries
