"""The asynchronous part of checkpoints in one slot: serialise and upload, then acknowledge.

One background thread per slot takes snapshots in the order the tasks took them. Records keep flowing
meanwhile: heap snapshots are copy-on-write (see ``state_backends.heap.snapshot``). A task's checkpoint is
acknowledged only after all its files are stored; a failure declines the checkpoint instead.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from runtime.protocol.messages import AcknowledgeCheckpoint, DeclineCheckpoint
from state_backends.storage import OPERATOR_STATE_GROUP, CheckpointStorage

__all__ = ["OperatorSnapshot", "TaskSnapshot", "Snapshotter"]

log = logging.getLogger(__name__)


@dataclass
class OperatorSnapshot:
    uid: str
    keyed: Any = None  # a HeapSnapshot, or None
    operator_state: dict = field(default_factory=dict)
    source_offsets: Any = None


@dataclass
class TaskSnapshot:
    checkpoint_id: int
    chain: int
    subtask: int
    operators: list[OperatorSnapshot]
    sync_ms: float
    alignment_ms: float
    started: float


class CheckpointAbortedError(Exception):
    """Raised inside the snapshotter to stop writing a checkpoint the coordinator has aborted."""

    def __init__(self, checkpoint_id: int):
        super().__init__(f"checkpoint {checkpoint_id} was aborted")


class Snapshotter:
    def __init__(self, storage: CheckpointStorage, attempt: int, send):
        self.storage = storage
        self.attempt = attempt
        self.send = send
        self.queue: queue.Queue = queue.Queue()
        # Checkpoint ids the coordinator aborted: added by the control thread, read here between key groups
        # (a set's add and membership test are atomic under the GIL).
        self._aborted: set[int] = set()
        self.thread = threading.Thread(target=self._run, name="chandy-snapshotter", daemon=True)
        self.thread.start()

    def submit(self, snapshot: TaskSnapshot) -> None:
        self.queue.put(snapshot)

    def abort(self, checkpoint_id: int) -> None:
        """The coordinator gave ``checkpoint_id`` up: stop writing it (at 1 GB that saves seconds of CPU)."""
        self._aborted.add(checkpoint_id)

    def close(self, timeout: float) -> None:
        self.queue.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        while True:
            snapshot = self.queue.get()
            if snapshot is None:
                return
            try:
                self.send(self._store(snapshot))
            except Exception as exc:  # a failed upload declines this checkpoint; the job decides what next
                for operator in snapshot.operators:
                    if operator.keyed is not None:
                        operator.keyed.discard()
                if snapshot.checkpoint_id in self._aborted:  # the coordinator knows
                    log.debug("checkpoint %d of task %d.%d given up: it was aborted", snapshot.checkpoint_id,
                              snapshot.chain, snapshot.subtask)
                    continue
                log.log(logging.DEBUG if self._directory_removed(snapshot, exc) else logging.WARNING,
                        "checkpoint %d of task %d.%d not stored: %s: %s", snapshot.checkpoint_id,
                        snapshot.chain, snapshot.subtask, type(exc).__name__, exc)
                try:
                    self.send(DeclineCheckpoint(self.attempt, snapshot.checkpoint_id, snapshot.chain,
                                                snapshot.subtask, f"{type(exc).__name__}: {exc}"))
                except OSError:
                    return

    def _directory_removed(self, snapshot: TaskSnapshot, exc: Exception) -> bool:
        """The checkpoint's directory is gone: almost always the coordinator aborted the checkpoint and its
        notice is still on the way, which is not worth a warning."""
        if not isinstance(exc, FileNotFoundError):
            return False
        try:
            return not self.storage.fs.exists(self.storage.checkpoint_dir(snapshot.checkpoint_id))
        except Exception:  # cannot tell: report it
            return False

    def _unless_aborted(self, checkpoint_id: int, rows: Iterator) -> Iterator:
        for row in rows:
            if checkpoint_id in self._aborted:
                raise CheckpointAbortedError(checkpoint_id)
            yield row

    def _store(self, snapshot: TaskSnapshot) -> AcknowledgeCheckpoint:
        files = []
        offsets = {}
        for operator in snapshot.operators:
            rows: list = []
            if operator.operator_state:
                rows.append((OPERATOR_STATE_GROUP,
                             pickle.dumps(operator.operator_state, protocol=pickle.HIGHEST_PROTOCOL)))
            if operator.keyed is not None or rows:  # keyed groups stream straight into the file
                keyed = operator.keyed.serialized() if operator.keyed is not None else ()
                files.append(self.storage.write_state_file(
                    snapshot.checkpoint_id, operator.uid, snapshot.subtask,
                    self._unless_aborted(snapshot.checkpoint_id, itertools.chain(rows, keyed))))
            if operator.source_offsets is not None:
                offsets[operator.uid] = operator.source_offsets
        async_ms = (time.monotonic() - snapshot.started) * 1000.0 - snapshot.sync_ms
        return AcknowledgeCheckpoint(self.attempt, snapshot.checkpoint_id, snapshot.chain, snapshot.subtask,
                                     tuple(files), round(snapshot.sync_ms, 3), round(async_ms, 3),
                                     round(snapshot.alignment_ms, 3), offsets)
