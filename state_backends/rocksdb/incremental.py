"""Incremental checkpoints of RocksDB state: the files of a RocksDB checkpoint, each uploaded once.

At the barrier the backend takes a RocksDB checkpoint (memtables flushed, files hard-linked). The asynchronous
part uploads its SST files that no completed checkpoint uploaded before to ``<job>/shared/<uid>/`` (SST files never
change once written, so a name names its content), and its few small files (``MANIFEST``, ``CURRENT``,
``OPTIONS``) beside the checkpoint's state file. A *manifest*, stored as one row of that state file, lists them
all; the checkpoint's ``_metadata`` lists the shared files each subtask references (:class:`SharedFile`), so that
retention deletes a shared file only when no retained checkpoint references it.

Only files of *completed* checkpoints are reused (Flink's rule): a file uploaded for a checkpoint that was then
aborted is uploaded again. After a restore at the same key groups the restored checkpoint's files count as
uploaded, when they lie in this job's own storage.

**Local recovery.** The RocksDB checkpoint of the newest completed checkpoint stays on the worker's disk
(``<local dir>/recovery/...``): a restore on the same machine hard-links its files instead of downloading them,
and downloads whatever is missing or differs in size (Flink's local recovery).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from runtime.errors import CorruptCheckpointError
from runtime.ids import CheckpointId
from runtime.protocol.checkpoints import SharedFile
from state_backends.checksums import of_bytes
from state_backends.rocksdb.portable import portable_rows
from state_backends.storage import uid_directory_name

__all__ = ["MANIFEST_FORMAT", "NativeManifest", "UploadTracker", "recovery_directory", "fetch_files",
           "keep_only_recovery", "upload_checkpoint", "restore_native_state"]

MANIFEST_FORMAT = "rocksdb-native/1"


@dataclass(frozen=True)
class NativeManifest:
    """What one subtask's incremental checkpoint holds: the key groups, and every file of its RocksDB checkpoint
    (``shared`` relative to the job directory, ``private`` relative to the checkpoint's directory).

    >>> manifest = NativeManifest((0, 63), (("000012.sst", SharedFile("shared/c/ab-000012.sst", 9, "crc32:0", 3)),),
    ...                           (("CURRENT", SharedFile("c/0.rocksdb/CURRENT", 16, "crc32:1", 3)),), "/ck/job")
    >>> NativeManifest.from_bytes(manifest.to_bytes()) == manifest
    True
    """

    key_groups: tuple[int, int]
    shared: tuple[tuple[str, SharedFile], ...]  # (local file name, where it is stored)
    private: tuple[tuple[str, SharedFile], ...]
    job_dir: str  # the job directory the shared paths are relative to

    def to_bytes(self) -> bytes:
        return json.dumps({"format": MANIFEST_FORMAT, "key_groups": list(self.key_groups),
                           "shared": [[name, f.to_metadata()] for name, f in self.shared],
                           "private": [[name, f.to_metadata()] for name, f in self.private],
                           "job_dir": self.job_dir}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "NativeManifest":
        entry = json.loads(data)
        if entry.get("format") != MANIFEST_FORMAT:
            raise CorruptCheckpointError(f"RocksDB state in format {entry.get('format')!r}: this version reads "
                                         f"{MANIFEST_FORMAT!r}; restore with the version that took the checkpoint.")
        return cls(tuple(entry["key_groups"]),
                   tuple((name, SharedFile.from_metadata(f)) for name, f in entry["shared"]),
                   tuple((name, SharedFile.from_metadata(f)) for name, f in entry["private"]), entry["job_dir"])


class UploadTracker:
    """Which local SST files are stored already, and where: those of completed checkpoints (reused), and those of
    checkpoints still pending (confirmed when their checkpoint completes). Used by the snapshotter's thread and the
    subtask's, hence the lock."""

    def __init__(self):
        self._lock = threading.Lock()
        self._confirmed: dict[str, SharedFile] = {}
        self._pending: dict[CheckpointId, dict[str, SharedFile]] = {}
        self.job_dir: str | None = None  # the storage the confirmed files lie in
        self.newest_completed: CheckpointId | None = None

    def stored(self, name: str, job_dir: str) -> SharedFile | None:
        with self._lock:
            return self._confirmed.get(name) if job_dir == self.job_dir else None

    def uploaded(self, checkpoint_id: CheckpointId, files: dict[str, SharedFile], job_dir: str) -> None:
        with self._lock:
            if job_dir != self.job_dir:  # another storage (a restore from another job's checkpoint): start over
                self._confirmed, self.job_dir = {}, job_dir
            self._pending[checkpoint_id] = files

    def completed(self, checkpoint_id: CheckpointId) -> bool:
        """Checkpoint ``checkpoint_id`` completed: its files (and no older pending ones) are reused from now on.
        True when this subtask uploaded for it."""
        with self._lock:
            files = self._pending.pop(checkpoint_id, None)
            for older in [c for c in self._pending if c < checkpoint_id]:
                del self._pending[older]
            if files is None:  # completed without this subtask's files: reuse nothing from before it
                self._confirmed = {}
                return False
            self.newest_completed = checkpoint_id
            self._confirmed = dict(files)  # what the newest completed checkpoint holds: files leave as RocksDB
            return True                    # compacts them away, and never come back

    @property
    def used(self) -> bool:
        """Whether files were ever stored or adopted: a checkpoint must then list what it holds, even empty."""
        with self._lock:
            return bool(self._confirmed or self._pending or self.job_dir)

    def seed(self, files: dict[str, SharedFile], job_dir: str) -> None:
        """A restore adopted these stored files."""
        with self._lock:
            self._confirmed, self.job_dir, self._pending = dict(files), job_dir, {}


def recovery_directory(local_root: str, job_dir: str, uid: str, key_groups: tuple[int, int]) -> str:
    """Where a subtask keeps its newest completed checkpoint's files for local recovery: the same path for every
    attempt of the job on this machine."""
    job = hashlib.sha1(job_dir.encode()).hexdigest()[:16]
    return os.path.join(local_root, "recovery", job, f"{uid_directory_name(uid)}-{key_groups[0]}-{key_groups[1]}")


def keep_only_recovery(directory: str, checkpoint_id: CheckpointId) -> None:
    """Delete the local copies of checkpoints older than ``checkpoint_id`` (completed: the newest to restore)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith("chk-") and name[4:].isdigit() and int(name[4:]) < checkpoint_id:
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def upload_checkpoint(path: str, backend, storage, checkpoint_id: CheckpointId, subtask: int,
                      own_files: frozenset[str] = frozenset()) -> tuple[bytes, tuple[SharedFile, ...]]:
    """The asynchronous part of an incremental checkpoint: store the RocksDB checkpoint at ``path`` (SST files not
    stored before, and the small files), then keep it as the local recovery copy. ``own_files``: SST files only
    this checkpoint has (:attr:`~state_backends.rocksdb.barrier.BarrierCut.own_files`), stored with it like the
    small files. Returns the manifest to store in the state file and the shared files it references."""
    job_dir, tracker = storage.job_dir, backend.uploads
    shared, private, referenced = [], [], {}
    for name in sorted(os.listdir(path)):
        local = os.path.join(path, name)
        if name.endswith(".sst") and name not in own_files:
            stored = tracker.stored(name, job_dir)
            if stored is None:
                stored = storage.upload_shared(checkpoint_id, local, backend.operator_uid, f"{backend.instance}-{name}")
            referenced[name] = stored
            shared.append((name, stored))
        else:
            relative = f"{uid_directory_name(backend.operator_uid)}/{subtask}.rocksdb/{name}"
            private.append((name, storage.upload_private(checkpoint_id, local, relative)))
    tracker.uploaded(checkpoint_id, referenced, job_dir)
    key_groups = (backend.key_groups.start, backend.key_groups.end)
    manifest = NativeManifest(key_groups, tuple(shared), tuple(private), job_dir)
    if not backend.local_recovery:
        shutil.rmtree(path, ignore_errors=True)
        return manifest.to_bytes(), tuple(referenced.values())
    recovery = backend.recovery_directory(job_dir)
    if tracker.newest_completed is not None:  # local copies older than the newest completed checkpoint
        keep_only_recovery(recovery, tracker.newest_completed)
    try:
        os.makedirs(recovery, exist_ok=True)
        target = os.path.join(recovery, f"chk-{checkpoint_id}")
        shutil.rmtree(target, ignore_errors=True)
        os.rename(path, target)
    except OSError:  # no local recovery this time: the store has everything
        shutil.rmtree(path, ignore_errors=True)
    return manifest.to_bytes(), tuple(referenced.values())


def restore_native_state(storage, checkpoint_id: CheckpointId, manifests: list[bytes], backend,
                         owned: tuple[int, int]) -> None:
    """Load the key groups ``owned`` from native (incremental RocksDB) snapshots into ``backend``: a RocksDB backend
    restored at key groups one snapshot covers becomes that snapshot's instance; otherwise (a rescale, or the heap
    backend) each snapshot's files are opened and its rows of ``owned`` loaded in the portable format."""
    manifests = [NativeManifest.from_bytes(payload) for payload in manifests]
    if (len(manifests) == 1 and hasattr(backend, "adopt_native") and backend.is_empty()
            and manifests[0].key_groups[0] <= owned[0] and owned[1] <= manifests[0].key_groups[1]):
        backend.adopt_native(storage, checkpoint_id, manifests[0])
        return
    for manifest in manifests:
        first, last = max(owned[0], manifest.key_groups[0]), min(owned[1], manifest.key_groups[1])
        if first > last:
            continue
        scratch = tempfile.mkdtemp(prefix="chandy-restore-")
        try:
            fetch_files(manifest, storage, checkpoint_id, scratch)
            for group, payload in portable_rows(scratch, first, last):
                backend.restore_key_group(group, payload)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def fetch_files(manifest: NativeManifest, storage, checkpoint_id: CheckpointId, target: str,
                local: str | None = None) -> dict:
    """Every file of ``manifest`` into the directory ``target``: hard links from the local recovery copy ``local``
    where it holds the file at its size, else downloaded and checked. Returns how many of each."""
    os.makedirs(target, exist_ok=True)
    counts = {"local": 0, "downloaded": 0, "bytes_downloaded": 0}
    for name, stored in _files(manifest, storage, checkpoint_id):
        destination = os.path.join(target, name)
        if local is not None:
            candidate = os.path.join(local, name)
            try:
                if os.path.getsize(candidate) == stored.size and _checksum_of(candidate, stored) == stored.checksum:
                    try:  # SST files never change: a link will do; RocksDB rewrites the others (MANIFEST, ...)
                        if not name.endswith(".sst"):
                            raise OSError("copied")
                        os.link(candidate, destination)
                    except OSError:  # no hard links here: a copy still beats a download
                        shutil.copyfile(candidate, destination)
                    counts["local"] += 1
                    continue
            except OSError:
                pass
        storage.download(stored, destination)
        counts["downloaded"] += 1
        counts["bytes_downloaded"] += stored.size
    return counts


def _checksum_of(path: str, stored: SharedFile) -> str:
    """The checksum of a local file, as ``stored`` was checked (the same checkpoint id may name another run's
    checkpoint, and a file of the same name and size may hold other data)."""
    return of_bytes(pa.memory_map(path).read_buffer(), like=stored.checksum)


def _files(manifest: NativeManifest, storage, checkpoint_id: CheckpointId) -> Iterator[tuple[str, SharedFile]]:
    for name, stored in manifest.shared:
        yield name, stored
    for name, stored in manifest.private:
        yield name, storage.private_file(checkpoint_id, stored)
