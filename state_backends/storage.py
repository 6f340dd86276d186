"""Checkpoint storage on any fsspec filesystem: the one module that names files in it.

Layout (DESIGN §3)::

    <root>/<job>/chk-<n>/<operator uid>/<subtask>.arrow   state of one operator subtask
    <root>/<job>/chk-<n>/_metadata                        JSON, written last: the commit marker

A state file is an Arrow IPC file with columns ``key_group`` (int32) and ``payload`` (pickled), one record
batch per key group, so a rescaled restore reads only the key groups it owns. Key group -1 holds the
operator's non-keyed list state. A checkpoint without ``_metadata`` does not exist. Object stores have no
atomic rename, so nothing here relies on one: ``_metadata`` is a single object written after every file.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import struct
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator

import fsspec
from fsspec.implementations.local import LocalFileSystem
import pyarrow as pa

from runtime.errors import CheckpointNotFoundError, CorruptCheckpointError, StorageUnreachableError

__all__ = ["StateFileInfo", "CheckpointStorage", "OPERATOR_STATE_GROUP", "job_directory_name"]

OPERATOR_STATE_GROUP = -1
METADATA = "_metadata"
_CHK = re.compile(r"^chk-(\d+)$")
_WRITE_BUFFER = 1 << 20
_SCHEMA = pa.schema([pa.field("key_group", pa.int32()), pa.field("payload", pa.large_binary())])


def _binary_without_copy(payload: bytes) -> pa.Array:
    """A one-value ``large_binary`` array over ``payload``'s own memory. ``pa.array([payload])`` copies it,
    holding the GIL: ~0.25 s per 500 MB of state, taken from the task thread at every checkpoint."""
    offsets = pa.py_buffer(struct.pack("<qq", 0, len(payload)))
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(payload)])


@dataclass(frozen=True)
class StateFileInfo:
    """One state file: whose it is, where (relative to its checkpoint's directory), and what it holds."""

    uid: str
    subtask: int
    path: str
    size: int
    key_groups: tuple[int, ...]  # in batch order


def job_directory_name(job_name: str) -> str:
    """A job's directory under the storage root: its name, made safe for every filesystem."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", job_name).strip("-.")
    return slug or "job"


class CheckpointStorage:
    """Checkpoints of one job under ``url``; picklable, so executors write their state files themselves."""

    def __init__(self, url: str, job_name: str, filesystem=None):
        self.url = url
        self.job_name = job_name
        self.fs, root = fsspec.core.url_to_fs(url)
        if filesystem is not None:  # an fsspec filesystem object given directly (custom or instrumented)
            self.fs = filesystem
        self.job_dir = posixpath.join(root.rstrip("/"), job_directory_name(job_name))

    @classmethod
    def for_job_directory(cls, url: str) -> "CheckpointStorage":
        """Storage whose job directory is ``url`` itself (for the CLI, given ``<root>/<job>``)."""
        url = url.rstrip("/")
        parent, name = url.rsplit("/", 1) if "/" in url else (".", url)
        return cls(parent if parent else "/", name)

    # -- paths: the only place names are made ------------------------------------------------------

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        return posixpath.join(self.job_dir, f"chk-{checkpoint_id}")

    def metadata_path(self, checkpoint_id: int) -> str:
        return posixpath.join(self.checkpoint_dir(checkpoint_id), METADATA)

    @staticmethod
    def state_file_name(uid: str, subtask: int) -> str:
        return f"{uid}/{subtask}.arrow"

    def absolute(self, checkpoint_id: int, relative: str) -> str:
        return posixpath.join(self.checkpoint_dir(checkpoint_id), relative)

    # -- writing -------------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Fail now, naming the URL, if the job directory cannot be created and written."""
        probe = posixpath.join(self.job_dir, "_probe")
        try:
            self.fs.makedirs(self.job_dir, exist_ok=True)
            with self.fs.open(probe, "wb") as f:
                f.write(b"ok")
            self.fs.rm(probe)
        except Exception as exc:  # any failure here means the storage is unusable
            raise StorageUnreachableError(self.url, exc) from exc

    def write_state_file(self, checkpoint_id: int, uid: str, subtask: int,
                         rows: Iterable[tuple[int, bytes]]) -> StateFileInfo:
        relative = self.state_file_name(uid, subtask)
        path = self.absolute(checkpoint_id, relative)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        groups = []
        with self._output_stream(path) as sink:
            with pa.ipc.new_file(sink, _SCHEMA) as writer:
                for group, payload in rows:
                    groups.append(group)
                    writer.write_batch(pa.RecordBatch.from_arrays(
                        [pa.array([group], pa.int32()), _binary_without_copy(payload)], schema=_SCHEMA))
        return StateFileInfo(uid, subtask, relative, self.fs.size(path), tuple(groups))

    @contextlib.contextmanager
    def _output_stream(self, path: str) -> Iterator[pa.NativeFile]:
        # Arrow's writer calls a Python file once per buffer of a batch, and each call waits for the GIL,
        # which the task thread holds up to 5 ms at a time: most of a checkpoint's time at 1 GB. A local
        # file is written by Arrow itself, without the GIL; any other file through a buffer.
        if type(self.fs) is LocalFileSystem:
            with pa.OSFile(path, "wb") as sink:
                yield sink
        else:
            with self.fs.open(path, "wb") as f, pa.output_stream(f, buffer_size=_WRITE_BUFFER) as sink:
                yield sink

    def write_metadata(self, checkpoint_id: int, metadata: dict) -> None:
        data = json.dumps(metadata, indent=1, sort_keys=True).encode()
        path = self.metadata_path(checkpoint_id)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        if isinstance(self.fs, LocalFileSystem):
            temporary = path + ".inprogress"
            with self.fs.open(temporary, "wb") as f:
                f.write(data)
            self.fs.mv(temporary, path)  # a rename on local disks: readers never see half a marker
        else:
            with self.fs.open(path, "wb") as f:  # one PUT: atomic on object stores
                f.write(data)

    def delete_checkpoint(self, checkpoint_id: int) -> None:
        directory = self.checkpoint_dir(checkpoint_id)
        if self.fs.exists(directory):
            self.fs.rm(directory, recursive=True)

    # -- reading -------------------------------------------------------------------------------------

    def checkpoint_ids(self) -> list[int]:
        """Ids of every ``chk-*`` directory, completed or not, ascending."""
        try:
            entries = self.fs.ls(self.job_dir, detail=False) if self.fs.exists(self.job_dir) else []
        except Exception as exc:  # listing failed: the storage is unusable, say so
            raise StorageUnreachableError(self.url, exc) from exc
        ids = []
        for entry in entries:
            match = _CHK.match(posixpath.basename(entry.rstrip("/")))
            if match:
                ids.append(int(match.group(1)))
        return sorted(ids)

    def next_checkpoint_id(self) -> int:
        ids = self.checkpoint_ids()
        return (ids[-1] + 1) if ids else 1

    def _load_metadata(self, checkpoint_id: int) -> dict:
        """``_metadata`` of a checkpoint; errors carry no hint (computing one reads metadata again)."""
        path = self.metadata_path(checkpoint_id)
        if not self.fs.exists(path):
            if self.fs.exists(self.checkpoint_dir(checkpoint_id)):
                raise CorruptCheckpointError(
                    f"Checkpoint {checkpoint_id} at {self.checkpoint_dir(checkpoint_id)} has no {METADATA}: it "
                    "was never completed.")
            raise CheckpointNotFoundError(
                f"Checkpoint {checkpoint_id} does not exist in {self.url}/{posixpath.basename(self.job_dir)}.")
        try:
            with self.fs.open(path, "rb") as f:
                metadata = json.loads(f.read())
            if metadata.get("checkpoint_id") != checkpoint_id:
                raise ValueError(f"it describes checkpoint {metadata.get('checkpoint_id')}")
        except Exception as exc:  # unparsable or inconsistent: corrupt
            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id}: {path} is unreadable ({exc}).") from exc
        return metadata

    def read_metadata(self, checkpoint_id: int) -> dict:
        """``_metadata`` of a checkpoint; errors name the usable checkpoints."""
        try:
            return self._load_metadata(checkpoint_id)
        except (CorruptCheckpointError, CheckpointNotFoundError) as exc:
            raise type(exc)(f"{exc} {self.usable_hint()}") from exc.__cause__

    def problems(self, metadata: dict) -> list[str]:
        """What is wrong with a checkpoint's files (empty when it is restorable)."""
        checkpoint_id = metadata["checkpoint_id"]
        found = []
        for operator in metadata.get("operators", {}).values():
            for file in operator.get("files", []):
                path = self.absolute(checkpoint_id, file["path"])
                try:
                    size = self.fs.size(path)
                except FileNotFoundError:
                    found.append(f"state file {path} is missing")
                    continue
                if size != file["size"]:
                    found.append(f"state file {path} has {size} bytes, {file['size']} were written")
        return found

    def validated_metadata(self, checkpoint_id: int) -> dict:
        """``_metadata`` of a checkpoint whose files are all present; raises CorruptCheckpointError otherwise."""
        metadata = self.read_metadata(checkpoint_id)
        problems = self.problems(metadata)
        if problems:
            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id} cannot be restored: {'; '.join(problems)}. "
                                         f"{self.usable_hint(exclude=checkpoint_id)}")
        return metadata

    def completed(self) -> list[dict]:
        """Metadata of every checkpoint with a readable ``_metadata``, ascending by id."""
        result = []
        for checkpoint_id in self.checkpoint_ids():
            try:
                result.append(self._load_metadata(checkpoint_id))
            except (CorruptCheckpointError, CheckpointNotFoundError):
                continue
        return result

    def usable_ids(self) -> list[int]:
        return [m["checkpoint_id"] for m in self.completed() if not self.problems(m)]

    def usable_hint(self, exclude: int | None = None) -> str:
        try:
            usable = [i for i in self.usable_ids() if i != exclude]
        except Exception:  # the hint must never hide the real error
            return ""
        return f"Usable checkpoints: {usable}." if usable else "There is no usable checkpoint."

    def read_state_rows(self, checkpoint_id: int, file: dict, key_groups=None) -> Iterator[tuple[int, bytes]]:
        """``(key group, payload)`` rows of a state file; only those in ``key_groups`` when given."""
        path = self.absolute(checkpoint_id, file["path"])
        try:
            with self.fs.open(path, "rb") as f:
                reader = pa.ipc.open_file(f)
                for index, group in enumerate(file["key_groups"]):
                    if key_groups is None or group in key_groups:
                        batch = reader.get_batch(index)
                        yield batch.column(0)[0].as_py(), batch.column(1)[0].as_py()
        except (OSError, pa.ArrowException) as exc:
            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id}: state file {path} is unreadable: {exc}. "
                                         "Restore an older checkpoint.") from exc

    @staticmethod
    def file_entry(info: StateFileInfo) -> dict:
        entry = asdict(info)
        entry["key_groups"] = list(info.key_groups)
        return entry
