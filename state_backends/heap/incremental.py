"""Incremental checkpoints of heap state: only the key groups changed since the last completed checkpoint are
pickled and stored; the others are referenced where an earlier checkpoint stored them.

Each incremental checkpoint of a subtask writes the key groups it must write into one *rows file* under the job's
``shared/`` directory (the format of a state file: one ``(key group, pickled tables)`` row per group), and its
state file holds a manifest: for every key group it covers, the rows file holding that group as it was at this
checkpoint's barrier. The checkpoint's metadata lists the rows files it references (``StateHandle.shared``), so
retention deletes a rows file only once no retained checkpoint references it, as for RocksDB's files.

A group counts as changed when the subtask set a key of it, or changed it in bulk, since the barrier of the newest
completed checkpoint (reads count too: handles hand out values that may be changed in place). Only a completed
checkpoint's files are referenced: an aborted one's may be deleted.

The granularity is the key group: with keys spread evenly, a job touching a few thousand keys between checkpoints
touches every one of 128 key groups, and each checkpoint writes everything. Sparse or clustered updates, and a
larger ``max_parallelism`` (more, smaller groups), are where this pays.

>>> manifest = GroupManifest((0, 3), {0: "shared/a.arrow", 1: "shared/b.arrow"})
>>> GroupManifest.from_bytes(manifest.to_bytes()) == manifest
True
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Iterator

from runtime.protocol.checkpoints import CheckpointId, KeyGroup, SharedFile, StateHandle

__all__ = ["GroupManifest", "GroupFiles", "upload_groups", "restore_group_rows", "MANIFEST_FORMAT"]

MANIFEST_FORMAT = "heap-groups/1"


@dataclass(frozen=True)
class GroupManifest:
    """Which rows file (path relative to the job's directory) holds each key group of one subtask's snapshot."""

    key_groups: tuple[int, int]  # the range the snapshot covers (inclusive): groups absent from ``files`` are empty
    files: dict[int, str] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        by_file: dict[str, list[int]] = {}
        for group, path in sorted(self.files.items()):
            by_file.setdefault(path, []).append(group)
        return json.dumps({"format": MANIFEST_FORMAT, "key_groups": list(self.key_groups), "files": by_file},
                          separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "GroupManifest":
        from runtime.errors import CorruptCheckpointError

        entry = json.loads(data)
        if entry.get("format") != MANIFEST_FORMAT:
            raise CorruptCheckpointError(f"an incremental heap snapshot in format {entry.get('format')!r}: this "
                                         f"version reads {MANIFEST_FORMAT!r}. Restore with the version that took it.")
        first, last = entry["key_groups"]
        return cls((int(first), int(last)), {int(group): str(path) for path, groups in entry["files"].items()
                                             for group in groups})


class GroupFiles:
    """Where the key groups of one heap backend's checkpoints are stored, and which of them a new checkpoint may
    reference: those of the newest completed one (written by the snapshotter's thread, completed on the subtask's,
    read at the barrier: hence the lock, taken once per checkpoint)."""

    def __init__(self):
        self._lock = threading.Lock()
        # stored, not completed yet
        self._awaiting_completion: dict[CheckpointId, tuple[int, dict[int, SharedFile]]] = {}
        self._base: tuple[int, dict[int, SharedFile]] | None = None  # (barrier number, group -> its rows file)
        self._newest_completed: CheckpointId | None = None

    def base(self) -> tuple[int, dict[int, SharedFile]] | None:
        """``(barrier number, {group: rows file})`` of the newest completed checkpoint, or None."""
        with self._lock:
            return self._base

    def stored(self, checkpoint_id: CheckpointId, barrier: int, files: dict[int, SharedFile]) -> None:
        with self._lock:
            self._awaiting_completion[checkpoint_id] = (barrier, files)

    def completed(self, checkpoint_id: CheckpointId) -> None:
        with self._lock:
            taken = self._awaiting_completion.pop(checkpoint_id, None)
            for older in [c for c in self._awaiting_completion if c < checkpoint_id]:
                del self._awaiting_completion[older]  # a checkpoint older than a completed one never completes
            if taken is not None and (self._newest_completed is None or checkpoint_id > self._newest_completed):
                self._base, self._newest_completed = taken, checkpoint_id

    def seed(self, files: dict[int, SharedFile]) -> None:
        """A restore from an incremental heap checkpoint: its groups, unchanged since (barrier number 0)."""
        with self._lock:
            self._base = (0, dict(files))


def upload_groups(storage, checkpoint_id: CheckpointId, uid: str, name: str, rows: Iterator[tuple[int, bytes]],
                  key_range: tuple[int, int], references: dict[int, SharedFile]
                  ) -> tuple[bytes, tuple[SharedFile, ...], dict[int, SharedFile]]:
    """Store ``rows`` (the changed groups) as the rows file ``name``, if there are any; returns the manifest (those
    groups there, ``references`` where they are), the rows files it references, and its group -> rows file map."""
    files = dict(references)
    rows = iter(rows)
    first = next(rows, None)
    if first is not None:  # nothing changed: no file
        try:
            written, groups = storage.write_shared_rows(checkpoint_id, uid, name, itertools.chain((first,), rows))
        except BaseException:  # aborted, or failed: no checkpoint will reference what was written
            storage.delete_shared([storage.shared_rows_path(uid, name)])
            raise
        files.update({group: written for group in groups})
    manifest = GroupManifest(key_range, {group: stored.path for group, stored in files.items()})
    shared = {stored.path: stored for stored in files.values()}
    return manifest.to_bytes(), tuple(shared.values()), files


def restore_group_rows(storage, checkpoint_id: CheckpointId, uid: str, manifest: GroupManifest,
                       shared: tuple[SharedFile, ...], owned: tuple[int, int]) -> Iterator[tuple[KeyGroup, bytes]]:
    """The rows of the groups ``owned`` of an incremental heap snapshot, read file by file (each checked against
    its checksum before any row is used)."""
    by_path = {stored.path: stored for stored in shared}
    wanted: dict[str, set[int]] = {}
    for group, path in manifest.files.items():
        if owned[0] <= group <= owned[1]:
            wanted.setdefault(path, set()).add(group)
    for path, groups in sorted(wanted.items()):
        stored = by_path.get(path)
        if stored is None:
            from runtime.errors import CorruptCheckpointError

            raise CorruptCheckpointError(f"Checkpoint {checkpoint_id}: the manifest of operator uid '{uid}' names "
                                         f"{path}, which its metadata does not list. Restore another checkpoint.")
        handle = StateHandle(uid, 0, "../" + stored.path, stored.size, (), stored.checksum)
        yield from storage.read_state_rows(checkpoint_id, handle, groups)
