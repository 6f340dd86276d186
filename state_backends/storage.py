"""Checkpoint storage on any fsspec filesystem: the one module that names files in it.

Layout (DESIGN §3)::

    <root>/<job>/chk-<n>/<operator uid>/<subtask>.arrow   state of one operator subtask
    <root>/<job>/chk-<n>/_metadata                        JSON, written last: the commit marker
    <root>/<job>/finished/<token>/<uid>/<subtask>.arrow   final state of a finished subtask (FLIP-147)
    <root>/<job>/shared/<uid>/<instance>-<n>.sst          a RocksDB file of incremental checkpoints, stored once
    <root>/<job>/chk-<n>/<uid>/<subtask>.rocksdb/<file>   the few small files of one incremental RocksDB snapshot
    <root>/<job>/_job.json                                where the running job's driver answers: its REST API
    <savepoints>/savepoint-<n>-<hex>/...                  a savepoint: self-contained, never deleted

A state file is an Arrow IPC file with columns ``key_group`` (int32) and ``payload`` (pickled), one record
batch per key group, so a rescaled restore reads only the key groups it owns. Key group -1 holds the
operator's non-keyed list state. A checkpoint without ``_metadata`` does not exist. Object stores have no
atomic rename, so nothing here relies on one: ``_metadata`` is a single object written after every file, and
never over an existing one. All I/O goes through a :class:`~state_backends.checkpoint_store.CheckpointStore`,
so an unreachable storage raises :class:`~runtime.errors.StorageUnreachableError` instead of looking empty.

>>> storage = CheckpointStorage("memory://doc-storage", "my job")
>>> storage.checkpoint_dir(7)
'/doc-storage/my-job/chk-7'
>>> handle = storage.write_state_file(7, "count", 0, [(3, b"three"), (OPERATOR_STATE_GROUP, b"op")])
>>> handle.key_groups, list(storage.read_state_rows(7, handle, {3}))
((3, -1), [(3, b'three')])
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import posixpath
import re
import struct
import zlib
from dataclasses import dataclass, replace
from enum import Enum
from typing import Iterable, Iterator, Mapping

import pyarrow as pa

from runtime.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    StorageUnreachableError,
)
from runtime.filesystems import failing_fast, filesystem_for
from runtime.ids import CheckpointId, KeyGroup, SubtaskIndex
from runtime.protocol.checkpoints import (
    OPERATOR_STATE_GROUP,
    CompletedCheckpoint,
    SharedFile,
    StateHandle,
    StateTableFile,
)
from state_backends.checkpoint_store import CheckpointStore
from state_backends.checksums import RowsChecksum, of_bytes
from state_backends.heap.snapshot import TTL_FORMAT
from state_backends.pickling import pickle_state
from state_backends.state_columns import StateFileEncoder, StateLayout, decode_batch, state_of_schema

__all__ = ["CheckpointStorage", "SavepointStorage", "CheckpointStatus", "StoredCheckpoint", "OPERATOR_STATE_GROUP",
           "checksum", "job_directory_name", "uid_directory_name"]

METADATA = "_metadata"
JOB_CONTROL = "_job.json"
FINISHED_PREFIX = "../finished/"  # a handle path of a finished subtask's final state
SHARED = "shared"
_CHK = re.compile(r"^chk-(\d+)$")
_SCHEMA = pa.schema([pa.field("key_group", pa.int32()), pa.field("payload", pa.large_binary())])


def _binary_without_copy(payload: bytes) -> pa.Array:
    """A one-value ``large_binary`` array over ``payload``'s own memory. ``pa.array([payload])`` copies it,
    holding the GIL: ~0.25 s per 500 MB of state, taken from the subtask's thread at every checkpoint."""
    offsets = pa.py_buffer(struct.pack("<qq", 0, len(payload)))
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(payload)])


_GROUP = struct.Struct("<i")


def checksum(rows) -> str:
    """The checksum ``_metadata`` records for a state file: :class:`~state_backends.checksums.RowsChecksum` over
    its ``(key group, payload)`` rows in file order, which is everything a restore reads from it.

    It is computed over the payloads as they are written rather than over the file's bytes: feeding Arrow's
    writer through a Python object to see its bytes takes the GIL once per buffer, 4-10x slower per
    checkpoint while the subtask's thread is busy. A change in the file's framing either stops Arrow from
    reading it or changes what it reads, so the rows' checksum catches that too.

    >>> checksum([(3, b"state"), (-1, b"operator")])
    'xxh3:97e240cc0c18c277'
    """
    summed = RowsChecksum()
    for group, payload in rows:
        summed.add(group, payload)
    return summed.text()


def _verified_rows(data: bytes, handle: StateHandle) -> tuple[str | None, list]:
    """``(problem, rows)`` of a state file's bytes: ``problem`` None and the ``(group, payload buffer)`` rows
    when the file is intact, else what is wrong with it."""
    summed = RowsChecksum.like(handle.checksum)
    rows = []
    # A shared rows file's handle lists no groups: its rows say which, and its checksum vouches for them.
    listed = bool(handle.key_groups) or handle.checksum is None
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        if not reader.schema.equals(_SCHEMA):
            return f"is unreadable: its schema is {reader.schema}", []
        if listed and reader.num_record_batches != len(handle.key_groups):
            return (f"is unreadable: it holds {reader.num_record_batches} key groups, {len(handle.key_groups)} "
                    "were written"), []
        for index in range(reader.num_record_batches):
            batch = reader.get_batch(index)
            batch.validate(full=True)  # offsets and lengths checked before any value is touched
            if batch.num_rows != 1 or batch.column(0).null_count or batch.column(1).null_count:
                return f"is unreadable: row {index} is not one row of state", []
            payload = batch.column(1)[0].as_buffer()  # no copy: a view of ``data``
            stored_group = batch.column(0)[0].as_py()
            summed.add(stored_group, payload)
            rows.append((handle.key_groups[index] if listed else stored_group, payload))
    except Exception as exc:  # whatever damaged bytes make Arrow raise (ArrowInvalid, OSError, ...)
        return f"is unreadable: {type(exc).__name__}: {exc}", []
    if handle.checksum is not None and summed.text() != handle.checksum:
        return (f"does not match the checksum written with it ({summed.text()}, not {handle.checksum}): it was "
                "changed or damaged after the checkpoint"), []
    return None, rows


def _table_problem(data: bytes, table: StateTableFile) -> str | None:
    """What is wrong with a state table's bytes (None when it is intact)."""
    actual = of_bytes(data, like=table.checksum)
    if actual != table.checksum:
        return (f"does not match the checksum written with it ({actual}, not {table.checksum}): it was changed or "
                "damaged after the checkpoint")
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        state = state_of_schema(reader.schema)
        if state.get("state") != table.state:
            return f"is unreadable: it holds state {state.get('state')!r}, not {table.state!r}"
        if reader.num_record_batches != len(table.key_groups):
            return (f"is unreadable: it holds {reader.num_record_batches} key groups, {len(table.key_groups)} were "
                    "written")
        for index in range(reader.num_record_batches):
            batch = reader.get_batch(index)
            batch.validate(full=True)
            if batch.num_rows == 0 or batch.column(0)[0].as_py() != table.key_groups[index]:
                return f"is unreadable: batch {index} is not key group {table.key_groups[index]}"
    except CorruptCheckpointError as exc:
        return str(exc)
    except Exception as exc:  # whatever damaged bytes make Arrow raise
        return f"is unreadable: {type(exc).__name__}: {exc}"
    return None


def _absolute_url(url: str) -> str:
    """A local path as an absolute ``file://`` URL; any other URL as it is."""
    return url if "://" in url else "file://" + os.path.abspath(url)


def uid_directory_name(uid: str) -> str:
    """A directory name for an operator uid: readable, and one per uid (``agg:1`` and ``agg-1`` differ).

    >>> uid_directory_name("agg:1") != uid_directory_name("agg-1")
    True
    """
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", uid).strip("-.")[:40] or "operator"
    return f"{readable}-{zlib.crc32(uid.encode()):08x}"


def job_directory_name(job_name: str) -> str:
    """A job's directory under the storage root: its name, made safe for every filesystem.

    >>> job_directory_name("count per key / v2")
    'count-per-key-v2'
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", job_name).strip("-.")
    return slug or "job"


class _NeverCompleted(CorruptCheckpointError):
    """A ``chk-<n>`` directory without ``_metadata``."""


class CheckpointStatus(Enum):
    """What a ``chk-<n>`` directory holds, as far as its ``_metadata`` tells."""

    COMPLETED = "completed"  # _metadata reads
    INCOMPLETE = "incomplete"  # no _metadata: never committed (aborted, or its job died before committing)
    UNREADABLE = "unreadable"  # _metadata exists but does not parse: keep it for a person to look at


@dataclass(frozen=True)
class StoredCheckpoint:
    checkpoint_id: CheckpointId
    status: CheckpointStatus
    checkpoint: CompletedCheckpoint | None = None
    problem: str | None = None


class CheckpointStorage:
    """Checkpoints of one job under ``url``; picklable, so executors write their state files themselves."""

    def __init__(self, url: str, job_name: str, filesystem=None):
        self.url = url
        self.job_name = job_name
        fs, root = filesystem_for(url, "checkpoint storage")
        if filesystem is not None:  # an fsspec filesystem object given directly (custom or instrumented)
            fs = filesystem
        self.store = CheckpointStore(fs, url)
        self.job_dir = posixpath.join(root.rstrip("/"), job_directory_name(job_name))

    @property
    def fs(self):
        return self.store.fs

    @classmethod
    def for_job_directory(cls, url: str) -> "CheckpointStorage":
        """Storage whose job directory is ``url`` itself (for the CLI, given ``<root>/<job>``)."""
        url = url.rstrip("/")
        parent, name = url.rsplit("/", 1) if "/" in url else (".", url)
        return cls(parent if parent else "/", name)

    # -- paths: the only place names are made ------------------------------------------------------

    def checkpoint_dir(self, checkpoint_id: CheckpointId) -> str:
        return posixpath.join(self.job_dir, f"chk-{checkpoint_id}")

    def checkpoint_url(self, checkpoint_id: CheckpointId) -> str:
        """The URL (an absolute path for local storage) that names checkpoint ``checkpoint_id`` to a user:
        ``restore_from`` and ``chandy checkpoint`` take it.

        >>> CheckpointStorage("memory://doc-url", "my job").checkpoint_url(7)
        'memory://doc-url/my-job/chk-7'
        """
        root = self.url.rstrip("/")
        if "://" not in root:
            root = os.path.abspath(root)
        return f"{root}/{posixpath.basename(self.job_dir)}/chk-{checkpoint_id}"

    def metadata_path(self, checkpoint_id: CheckpointId) -> str:
        return posixpath.join(self.checkpoint_dir(checkpoint_id), METADATA)

    @staticmethod
    def state_file_name(uid: str, subtask: SubtaskIndex) -> str:
        return f"{uid}/{subtask}.arrow"

    def absolute(self, checkpoint_id: CheckpointId, relative: str) -> str:
        """Where a handle's file is: relative to its checkpoint's directory, or, for files shared by checkpoints
        (``../finished/...``: the final state of a subtask that finished; ``../shared/...``), to the job's.

        >>> storage = CheckpointStorage("memory://doc-absolute", "job")
        >>> storage.absolute(3, "count/0.arrow"), storage.absolute(3, "../finished/ab12/count/0.arrow")
        ('/doc-absolute/job/chk-3/count/0.arrow', '/doc-absolute/job/finished/ab12/count/0.arrow')
        """
        if relative.startswith("../"):
            return posixpath.join(self.job_dir, relative[3:])
        return posixpath.join(self.checkpoint_dir(checkpoint_id), relative)

    # -- writing -------------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Fail now, naming the URL, if the job directory cannot be created and written: StorageUnreachableError
        saying why (an endpoint that does not answer, a missing bucket, missing or rejected credentials) within
        seconds, since the probe does not retry as the running job does."""
        probe = posixpath.join(self.job_dir, "_probe")
        store = CheckpointStore(failing_fast(self.fs), self.url)
        try:
            store.write(probe, b"ok")
            store.delete(probe)
        except FileNotFoundError as exc:  # writing, not reading: a missing bucket or parent, not a missing file
            raise StorageUnreachableError(self.url, exc) from exc

    def write_state_file(self, checkpoint_id: CheckpointId, uid: str, subtask: SubtaskIndex,
                         rows: Iterable[tuple[KeyGroup, bytes]], finished: str | None = None) -> StateHandle:
        """Write one operator subtask's state; ``finished``: a token naming the final state of a subtask that
        finished, stored beside the checkpoints (every later checkpoint references it) rather than in one."""
        relative = self.state_file_name(uid, subtask)
        if finished is not None:
            relative = f"{FINISHED_PREFIX}{finished}/{relative}"
        path = self.absolute(checkpoint_id, relative)
        groups, checksum = self._write_rows(path, rows)
        return StateHandle(uid, subtask, relative, self.store.size(path), groups, checksum)

    def write_state_tables(self, checkpoint_id: CheckpointId, uid: str, subtask: SubtaskIndex, handle: StateHandle,
                           keyed_rows: Iterable[tuple[KeyGroup, bytes]],
                           descriptors: Mapping[str, object], finished: str | None = None) -> StateHandle:
        """``handle`` with the keyed state of ``keyed_rows`` (a full keyed snapshot's rows) written beside it as
        one table per state (:mod:`state_backends.state_columns`), typed as ``descriptors`` (state name ->
        descriptor) declare: how savepoints store keyed state. Each file's checksum is of its bytes, read back
        once written (savepoints only: checkpoints keep their rows, written without a second pass). ``finished``:
        as :meth:`write_state_file`'s (the final state of a subtask of a job stopping with a savepoint)."""
        writers: dict[str, tuple] = {}
        with contextlib.ExitStack() as files:
            for group, payload in keyed_rows:
                for name, table in pickle.loads(payload).items():
                    ttl = type(table) is tuple
                    if ttl:
                        stored_format, table = table
                        if stored_format != TTL_FORMAT:
                            raise CheckpointError(f"state '{name}' of operator uid '{uid}' is in format "
                                                  f"{stored_format!r}, which this version does not write")
                    if not table:
                        continue
                    open_file = writers.get(name)
                    if open_file is None:
                        encoder = StateFileEncoder(StateLayout.of(name, descriptors.get(name), ttl))
                        batch = encoder.batch(group, table)
                        relative = self.state_table_name(uid, name, subtask)
                        if finished is not None:
                            relative = f"{FINISHED_PREFIX}{finished}/{relative}"
                        sink = files.enter_context(self.store.open_output(self.absolute(checkpoint_id, relative)))
                        writer = files.enter_context(pa.ipc.new_file(sink, encoder.schema))
                        open_file = writers[name] = (encoder, writer, relative, [])
                    else:
                        batch = open_file[0].batch(group, table)
                    open_file[1].write_batch(batch)
                    open_file[3].append(group)
        tables = []
        for name, (_, _, relative, groups) in writers.items():
            data = self.store.read(self.absolute(checkpoint_id, relative))
            tables.append(StateTableFile(name, relative, len(data), of_bytes(data), tuple(groups)))
        return replace(handle, tables=tuple(tables))

    @staticmethod
    def state_table_name(uid: str, state: str, subtask: SubtaskIndex) -> str:
        """Where :meth:`write_state_tables` puts state ``state`` of a subtask: a directory per state, so that a
        state's files read as one dataset (``pyarrow.dataset.dataset(directory, format="arrow")``)."""
        return f"{uid}/{uid_directory_name(state)}/{subtask}.arrow"

    def write_shared_rows(self, checkpoint_id: CheckpointId, uid: str, name: str,
                          rows: Iterable[tuple[KeyGroup, bytes]]) -> tuple[SharedFile, tuple[KeyGroup, ...]]:
        """Write rows as a state file does, to ``shared/<uid>/<name>`` (later checkpoints may reference it: an
        incremental heap checkpoint's key groups). Its checksum is of its rows, as a state file's."""
        relative = self.shared_rows_path(uid, name)
        path = posixpath.join(self.job_dir, relative)
        groups, checksum = self._write_rows(path, rows)
        return SharedFile(relative, self.store.size(path), checksum, checkpoint_id), groups

    @staticmethod
    def shared_rows_path(uid: str, name: str) -> str:
        """Where :meth:`write_shared_rows` puts ``name``, relative to the job's directory."""
        return posixpath.join(SHARED, uid_directory_name(uid), name)

    def _write_rows(self, path: str, rows: Iterable[tuple[KeyGroup, bytes]]) -> tuple[tuple[KeyGroup, ...], str]:
        groups = []
        summed = RowsChecksum()
        with self.store.open_output(path) as sink:
            with pa.ipc.new_file(sink, _SCHEMA) as writer:
                for group, payload in rows:
                    groups.append(group)
                    summed.add(group, payload)  # releases the GIL on large payloads
                    writer.write_batch(pa.RecordBatch.from_arrays(
                        [pa.array([group], pa.int32()), _binary_without_copy(payload)], schema=_SCHEMA))
        return tuple(groups), summed.text()

    def write_metadata(self, checkpoint: CompletedCheckpoint) -> None:
        """Commit ``checkpoint``: write its ``_metadata``, which must not exist yet."""
        data = json.dumps(checkpoint.to_metadata(), indent=1).encode()  # operators in graph order
        if not self.store.create_if_absent(self.metadata_path(checkpoint.checkpoint_id), data):
            raise CheckpointError(
                f"Checkpoint {checkpoint.checkpoint_id} already exists in {self.job_dir}: another run of job "
                f"'{self.job_name}' writes to the same checkpoint directory. Give each running job its own "
                "name or checkpoint storage.")

    def delete_checkpoint(self, checkpoint_id: CheckpointId) -> None:
        self.store.delete(self.checkpoint_dir(checkpoint_id))

    def final_state_tokens(self) -> list[str]:
        """The tokens of the final states of finished subtasks stored for this job (``finished/<token>``)."""
        return self.store.list(posixpath.join(self.job_dir, FINISHED_PREFIX[3:]))

    def delete_final_state(self, token: str) -> None:
        self.store.delete(posixpath.join(self.job_dir, FINISHED_PREFIX[3:], token))

    @staticmethod
    def final_state_token(handle: StateHandle) -> str | None:
        """The token of a handle that points at a finished subtask's final state, else None.

        >>> from runtime.protocol.checkpoints import StateHandle
        >>> CheckpointStorage.final_state_token(StateHandle("src", 0, "../finished/ab12/src/0.arrow", 9, ()))
        'ab12'
        """
        if not handle.path.startswith(FINISHED_PREFIX):
            return None
        return handle.path[len(FINISHED_PREFIX):].split("/", 1)[0]

    def discard_state(self, checkpoint_id: CheckpointId, handles: Iterable[StateHandle]) -> None:
        """Delete state files that no checkpoint will reference (a late or unexpected acknowledgement's)."""
        for handle in handles:
            self.store.delete(self.absolute(checkpoint_id, handle.path))
            for table in handle.tables:
                self.store.delete(self.absolute(checkpoint_id, table.path))

    def default_savepoint_url(self) -> str:
        """Where this job's savepoints go unless told otherwise: ``<storage>/<job>/savepoints``.

        >>> CheckpointStorage("memory://doc-default-savepoints", "my job").default_savepoint_url()
        'memory://doc-default-savepoints/my-job/savepoints'
        """
        return self.checkpoint_url(CheckpointId(0)).rsplit("/", 1)[0] + "/savepoints"

    def savepoint_storage(self, url: str, checkpoint_id: CheckpointId | None = None) -> "SavepointStorage":
        """The savepoint at ``url`` (with ``checkpoint_id``: a new one under the directory ``url``), on this
        storage's filesystem when it lies under it (a filesystem object given to the job is kept)."""
        url = _absolute_url(url)
        if checkpoint_id is not None:
            url = f"{url.rstrip('/')}/{SavepointStorage.new_name(checkpoint_id)}"
        own = _absolute_url(self.url).rstrip("/") + "/"
        return SavepointStorage(url, self.fs if url.startswith(own) else None)

    def publish_job_control(self, description: dict) -> None:
        """Say where the running job can be controlled: the driver's REST API (its URL, token and, in HTTPS,
        certificate; :meth:`runtime.driver.web.server.DashboardServer.describe_for`), which ``chandy savepoint``
        and ``chandy stop`` read here. On a local filesystem only its owner may read it (it holds the token)."""
        path = posixpath.join(self.job_dir, JOB_CONTROL)
        self.store.write(path, json.dumps(description).encode())
        if self.url.startswith("file://") or "://" not in self.url:
            try:
                os.chmod(path, 0o600)
            except OSError:
                pass

    def read_job_control(self) -> dict:
        """What :meth:`publish_job_control` wrote; CheckpointNotFoundError when no job runs (or none did)."""
        path = posixpath.join(self.job_dir, JOB_CONTROL)
        try:
            return json.loads(self.store.read(path))
        except FileNotFoundError:
            raise CheckpointNotFoundError(
                f"No job of {self.job_dir} is running with checkpointing: {path} does not exist (a running job "
                "writes it when it starts and removes it when it ends).") from None

    def remove_job_control(self) -> None:
        """The job has ended: nothing answers at what :meth:`publish_job_control` wrote."""
        self.store.delete(posixpath.join(self.job_dir, JOB_CONTROL))

    # -- files stored once, referenced by many checkpoints (incremental RocksDB snapshots) ----------------

    def upload_shared(self, checkpoint_id: CheckpointId, local_path: str, uid: str, name: str) -> SharedFile:
        """Store a local file under ``shared/<uid>/<name>``, for checkpoint ``checkpoint_id`` and the later ones
        that reference it."""
        return self._upload(local_path, posixpath.join(SHARED, uid_directory_name(uid), name), checkpoint_id, link=True)

    def upload_private(self, checkpoint_id: CheckpointId, local_path: str, relative: str) -> SharedFile:
        """Store a local file in checkpoint ``checkpoint_id``'s directory (deleted with it); its ``path`` is
        relative to that directory."""
        stored = self._upload(local_path, posixpath.join(f"chk-{checkpoint_id}", relative), checkpoint_id, link=False)
        return replace(stored, path=relative)

    def private_file(self, checkpoint_id: CheckpointId, stored: SharedFile) -> SharedFile:
        """A file :meth:`upload_private` stored, with its path relative to the job's directory."""
        return replace(stored, path=posixpath.join(f"chk-{checkpoint_id}", stored.path))

    def _upload(self, local_path: str, relative: str, checkpoint_id: CheckpointId, link: bool) -> SharedFile:
        """Few calls, each releasing the GIL for all its work: the subtask's thread holds the GIL between them, and a
        thread that gives it up waits up to a switch interval (5 ms) to get it back, so a copy in 8 MB chunks (two
        calls per chunk, and open and close) took ~0.1 s per small file while records flowed."""
        path = posixpath.join(self.job_dir, relative)
        data = pa.memory_map(local_path).read_buffer()
        summed = of_bytes(data)
        if link and self.store.is_local:  # SST files never change: a hard link is the copy (a copy across devices)
            try:
                os.makedirs(posixpath.dirname(path), exist_ok=True)
                os.link(local_path, path)
            except FileExistsError:  # a retried upload of the same file, or a name taken by another file
                if os.path.getsize(path) != data.size or of_bytes(self.store.read(path)) != summed:
                    raise CheckpointError(f"{path} exists and holds another file than {local_path}") from None
            except OSError:
                self.store.write(path, data)
        else:
            self.store.write(path, data)
        return SharedFile(relative, data.size, summed, checkpoint_id)

    def download(self, stored: SharedFile, local_path: str) -> None:
        """A stored file (its path relative to the job's directory) to ``local_path``, checked against its size
        and checksum; CorruptCheckpointError naming it when it is missing or differs."""
        path = posixpath.join(self.job_dir, stored.path)
        problem = None
        for _ in range(2):  # a short or failed read is not damage: read once more before calling it corrupt
            try:
                data = self.store.read(path)
            except FileNotFoundError:
                problem = "is missing"
                continue
            actual = of_bytes(data, like=stored.checksum)
            if len(data) != stored.size:
                problem = f"has {len(data)} bytes, {stored.size} were stored"
            elif actual != stored.checksum:
                problem = f"does not match the checksum stored with it ({actual}, not {stored.checksum})"
            else:
                with open(local_path, "wb") as sink:
                    sink.write(data)
                return
        raise CorruptCheckpointError(f"RocksDB file {path} {problem}: it was changed or deleted after the checkpoint. "
                                     f"Restore an older checkpoint. {self.usable_hint()}".rstrip())

    def shared_files(self) -> list[str]:
        """Every file under ``shared/``, relative to the job's directory."""
        root = posixpath.join(self.job_dir, SHARED)
        found = []
        for uid in self.store.list(root):
            for name in self.store.list(posixpath.join(root, uid)):
                found.append(posixpath.join(SHARED, uid, name))
        return found

    def shared_file_exists(self, relative: str) -> bool:
        try:
            self.store.size(posixpath.join(self.job_dir, relative))
        except FileNotFoundError:
            return False
        return True

    def delete_shared(self, paths) -> None:
        for relative in paths:
            self.store.delete(posixpath.join(self.job_dir, relative))

    # -- reading -------------------------------------------------------------------------------------

    def checkpoint_ids(self) -> list[CheckpointId]:
        """Ids of every ``chk-*`` directory, completed or not, ascending. Raises StorageUnreachableError when
        the job directory cannot be listed; a job directory that does not exist holds none."""
        ids = [CheckpointId(int(m.group(1))) for name in self.store.list(self.job_dir) if (m := _CHK.match(name))]
        return sorted(ids)

    def next_checkpoint_id(self) -> CheckpointId:
        ids = self.checkpoint_ids()
        return CheckpointId(ids[-1] + 1 if ids else 1)

    def _load(self, checkpoint_id: CheckpointId) -> CompletedCheckpoint:
        """A checkpoint's ``_metadata``; errors carry no hint (computing one reads metadata again)."""
        path = self.metadata_path(checkpoint_id)
        try:
            data = self.store.read(path)
        except FileNotFoundError:
            if checkpoint_id in self.checkpoint_ids():
                raise _NeverCompleted(
                    f"Checkpoint {checkpoint_id} at {self.checkpoint_dir(checkpoint_id)} has no {METADATA}: it "
                    "was never completed.") from None
            raise CheckpointNotFoundError(
                f"Checkpoint {checkpoint_id} does not exist in {self.url}/{posixpath.basename(self.job_dir)}.") \
                from None
        try:
            checkpoint = CompletedCheckpoint.from_metadata(json.loads(data))
            if checkpoint.checkpoint_id != checkpoint_id:
                raise ValueError(f"it describes checkpoint {checkpoint.checkpoint_id}")
        except Exception as exc:  # unparsable or inconsistent: corrupt
            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id}: {path} is unreadable ({exc}).") from exc
        return checkpoint

    def read_checkpoint(self, checkpoint_id: CheckpointId) -> CompletedCheckpoint:
        """A checkpoint's ``_metadata``; errors name the usable checkpoints."""
        try:
            return self._load(checkpoint_id)
        except (CorruptCheckpointError, CheckpointNotFoundError) as exc:
            public = CorruptCheckpointError if isinstance(exc, CorruptCheckpointError) else CheckpointNotFoundError
            raise public(f"{exc} {self.usable_hint()}") from exc.__cause__

    def problems(self, checkpoint: CompletedCheckpoint) -> list[str]:
        """What is wrong with a checkpoint's files (empty when it is restorable)."""
        checkpoint_id = checkpoint.checkpoint_id
        found = []
        for handle in checkpoint.state_handles:
            found.append(self._size_problem("state file", self.absolute(checkpoint_id, handle.path), handle.size))
            if found[-1] is not None and found[-1].endswith("is missing"):
                continue
            found += [self._size_problem("shared file", posixpath.join(self.job_dir, stored.path), stored.size)
                      for stored in handle.shared]
            found += [self._size_problem("state table", self.absolute(checkpoint_id, table.path), table.size)
                      for table in handle.tables]
        return [problem for problem in found if problem is not None]

    def _size_problem(self, what: str, path: str, written: int) -> str | None:
        try:
            size = self.store.size(path)
        except FileNotFoundError:
            return f"{what} {path} is missing"
        return None if size == written else f"{what} {path} has {size} bytes, {written} were written"

    def validated_checkpoint(self, checkpoint_id: CheckpointId) -> CompletedCheckpoint:
        """A checkpoint whose files are all present; raises CorruptCheckpointError otherwise."""
        checkpoint = self.read_checkpoint(checkpoint_id)
        problems = self.problems(checkpoint)
        if problems:
            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id} cannot be restored: {'; '.join(problems)}. "
                                         f"{self.usable_hint(exclude=checkpoint_id)}")
        return checkpoint

    def survey(self) -> list[StoredCheckpoint]:
        """Every ``chk-*`` directory with what its ``_metadata`` says, ascending by id. Storage errors raise:
        a checkpoint that cannot be read right now is never reported as incomplete."""
        found = []
        for checkpoint_id in self.checkpoint_ids():
            try:
                found.append(StoredCheckpoint(checkpoint_id, CheckpointStatus.COMPLETED, self._load(checkpoint_id)))
            except CheckpointNotFoundError:  # removed since the listing
                continue
            except _NeverCompleted as exc:
                found.append(StoredCheckpoint(checkpoint_id, CheckpointStatus.INCOMPLETE, problem=str(exc)))
            except CorruptCheckpointError as exc:
                found.append(StoredCheckpoint(checkpoint_id, CheckpointStatus.UNREADABLE, problem=str(exc)))
        return found

    def completed(self) -> list[CompletedCheckpoint]:
        """Every checkpoint with a readable ``_metadata``, ascending by id."""
        return [s.checkpoint for s in self.survey() if s.status is CheckpointStatus.COMPLETED]

    def usable_ids(self) -> list[CheckpointId]:
        return [c.checkpoint_id for c in self.completed() if not self.problems(c)]

    def usable_hint(self, exclude: CheckpointId | None = None) -> str:
        try:
            usable = [i for i in self.usable_ids() if i != exclude]
        except StorageUnreachableError:  # the hint must never hide the real error
            return ""
        return f"Usable checkpoints: {usable}." if usable else "There is no usable checkpoint."

    def read_state_rows(self, checkpoint_id: CheckpointId, handle: StateHandle,
                        key_groups=None) -> Iterator[tuple[KeyGroup, bytes]]:
        """``(key group, payload)`` rows of a state file; only those in ``key_groups`` when given.

        The whole file is read first (one request on object stores), validated as Arrow data (damaged bytes
        must never reach code that trusts offsets) and compared with the checksum written with it before any
        row is returned, so a file changed or damaged since the checkpoint, even one that kept its size, is
        never restored. A file that looks damaged is read once more before it is called corrupt: a short or
        failed read is not damage.
        """
        path = self.absolute(checkpoint_id, handle.path)
        _, rows = self._read_checked(path, lambda data: _verified_rows(data, handle),
                                     f"Checkpoint {checkpoint_id}: state file {path} of operator uid '{handle.uid}'")
        for group, payload in rows:
            if key_groups is None or group in key_groups:
                yield group, payload.to_pybytes()
        for table in handle.tables:
            if key_groups is None or any(g in key_groups for g in table.key_groups):
                yield from self._table_rows(checkpoint_id, handle, table, key_groups)

    def _read_checked(self, path: str, check, where: str):
        """``(data, what check found)`` of the file at ``path``; ``check(data)`` gives ``(problem or None,
        result)``. A file that looks damaged or missing is read once more before it is called corrupt: a short or
        failed read is not damage."""
        problem = None
        for _ in range(2):
            try:
                data = self.store.read(path)
            except FileNotFoundError:
                problem = "is missing"
                continue
            problem, result = check(data)
            if problem is None:
                return data, result
        raise CorruptCheckpointError(f"{where} {problem}. Restore an older checkpoint.")

    def _table_rows(self, checkpoint_id: CheckpointId, handle: StateHandle, table: StateTableFile,
                    key_groups) -> Iterator[tuple[KeyGroup, bytes]]:
        """A state table's key groups as the rows of a heap snapshot (one state each), checked as a state file."""
        path = self.absolute(checkpoint_id, table.path)
        data, _ = self._read_checked(path, lambda data: (_table_problem(data, table), None),
                                     f"Checkpoint {checkpoint_id}: state table {path} of state '{table.state}' of "
                                     f"operator uid '{handle.uid}'")
        reader = pa.ipc.open_file(pa.py_buffer(data))
        for index in range(reader.num_record_batches):
            group = table.key_groups[index]
            if key_groups is None or group in key_groups:
                _, name, entries = decode_batch(reader.get_batch(index), reader.schema)
                yield group, pickle_state({name: entries}, "keyed state")


class SavepointStorage(CheckpointStorage):
    """One savepoint: a directory holding its ``_metadata`` and every state file it needs. It references
    nothing outside itself (the final states of finished subtasks are copied in), so it can be moved or
    copied, and it lies outside every job's checkpoint numbering, so retention never deletes it.

    >>> savepoint = SavepointStorage("memory://doc-savepoints/savepoint-7-1a2b3c")
    >>> savepoint.checkpoint_dir(7), savepoint.absolute(7, "count/0.arrow")
    ('/doc-savepoints/savepoint-7-1a2b3c', '/doc-savepoints/savepoint-7-1a2b3c/count/0.arrow')
    >>> SavepointStorage.new_name(7)  # doctest: +ELLIPSIS
    'savepoint-7-...'
    """

    def __init__(self, url: str, filesystem=None):
        url = _absolute_url(url).rstrip("/")
        self.url = url
        self.job_name = posixpath.basename(url)
        fs, root = filesystem_for(url, "savepoint storage")
        if filesystem is not None:
            fs = filesystem
        self.store = CheckpointStore(fs, url)
        self.job_dir = root.rstrip("/")

    @staticmethod
    def new_name(checkpoint_id: CheckpointId) -> str:
        return f"savepoint-{checkpoint_id}-{os.urandom(3).hex()}"

    def checkpoint_dir(self, checkpoint_id: CheckpointId) -> str:
        return self.job_dir

    def checkpoint_url(self, checkpoint_id: CheckpointId) -> str:
        return self.url

    def absolute(self, checkpoint_id: CheckpointId, relative: str) -> str:
        if relative.startswith("../"):
            raise CorruptCheckpointError(f"Savepoint {self.url} references {relative} outside itself: a savepoint "
                                         "must hold every file it needs.")
        return posixpath.join(self.job_dir, relative)

    def checkpoint_ids(self) -> list[CheckpointId]:
        try:
            return [self.read().checkpoint_id]
        except (CheckpointNotFoundError, CorruptCheckpointError):
            return []

    def read(self) -> CompletedCheckpoint:
        """The savepoint's ``_metadata``."""
        path = self.metadata_path(CheckpointId(0))
        try:
            data = self.store.read(path)
        except FileNotFoundError:
            raise CheckpointNotFoundError(f"{self.url} is not a savepoint: it has no {METADATA}.") from None
        try:
            return CompletedCheckpoint.from_metadata(json.loads(data))
        except Exception as exc:
            raise CorruptCheckpointError(f"Savepoint {self.url}: {path} is unreadable ({exc}).") from exc

    def _load(self, checkpoint_id: CheckpointId) -> CompletedCheckpoint:
        return self.read()

    def validated(self) -> CompletedCheckpoint:
        """The savepoint, if every file it names is present; CorruptCheckpointError otherwise."""
        checkpoint = self.read()
        problems = self.problems(checkpoint)
        if problems:
            raise CorruptCheckpointError(f"Savepoint {self.url} cannot be restored: {'; '.join(problems)}.")
        return checkpoint

    def usable_hint(self, exclude: CheckpointId | None = None) -> str:
        return ""

    def delete(self) -> None:
        self.store.delete(self.job_dir)

    def adopt(self, source: CheckpointStorage, checkpoint: CompletedCheckpoint) -> CompletedCheckpoint:
        """``checkpoint`` with the final states it shares with ``source``'s checkpoints copied into this
        savepoint, so that it references nothing outside it."""
        operators = []
        for op in checkpoint.operators:
            handles = []
            for handle in op.handles:
                if handle.path.startswith(FINISHED_PREFIX):
                    relative = self.state_file_name(handle.uid, handle.subtask)
                    self._copy(source, checkpoint.checkpoint_id, handle.path, relative)
                    tables = []
                    for table in handle.tables:
                        table_relative = self.state_table_name(handle.uid, table.state, handle.subtask)
                        self._copy(source, checkpoint.checkpoint_id, table.path, table_relative)
                        tables.append(replace(table, path=table_relative))
                    handle = replace(handle, path=relative, tables=tuple(tables))
                handles.append(handle)
            operators.append(replace(op, handles=tuple(handles)))
        return replace(checkpoint, operators=tuple(operators))

    def _copy(self, source: CheckpointStorage, checkpoint_id: CheckpointId, path: str, relative: str) -> None:
        data = source.store.read(source.absolute(checkpoint_id, path))
        self.store.write(self.absolute(checkpoint_id, relative), data)
