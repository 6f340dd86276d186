"""The asynchronous part of checkpoints in one slot: serialise and upload, then acknowledge.

One background thread per slot takes snapshots in the order the subtasks took them. Records keep flowing
meanwhile: heap snapshots are copy-on-write (see ``state_backends.heap.snapshot``). A subtask's checkpoint
is acknowledged only after all its files are stored; a failure declines the checkpoint instead, as FATAL
when every later checkpoint would fail the same way (state that cannot be pickled).

>>> sent = []
>>> snapshotter = Snapshotter(CheckpointStorage("memory://snapshotter-doc", "job"), 0, sent.append)
>>> snapshotter.submit(SubtaskSnapshot(1, 0, 0, [OperatorSnapshot("op", None, {"user:seen": [7]})], 0.1, 0.0,
...                                    time.monotonic()))
>>> snapshotter.close(timeout=10)
>>> [(type(m).__name__, m.checkpoint_id, [h.path for h in m.state]) for m in sent]
[('AcknowledgeCheckpoint', 1, ['op/0.arrow'])]
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from runtime.errors import ChandyError, UnpicklableStateError
from runtime.ids import Attempt, ChainIndex, CheckpointId, SubtaskIndex
from runtime.protocol.checkpoints import OPERATOR_STATE_GROUP
from runtime.protocol.messages import AcknowledgeCheckpoint, DeclineCheckpoint, DeclineKind, SubtaskFinished
from state_backends.base import KeyedSnapshot
from state_backends.pickling import pickle_state
from state_backends.storage import CheckpointStorage, SavepointStorage

__all__ = ["OperatorSnapshot", "SubtaskSnapshot", "Snapshotter"]

log = logging.getLogger(__name__)


@dataclass
class OperatorSnapshot:
    """What the synchronous part captured of one operator: its keyed snapshot, its operator list state (copies)
    and, for a source, a readable form of its position; for the head of a chain in an unaligned checkpoint, the
    records in flight into it (a :class:`~runtime.executor.channel_state.ChannelState`)."""

    uid: str
    keyed: KeyedSnapshot | None = None
    operator_state: dict = field(default_factory=dict)
    source_position: str | None = None
    channel_state: Any = None
    descriptors: Mapping[str, Any] = field(default_factory=dict)  # its keyed states' declared types (savepoints)


@dataclass
class SubtaskSnapshot:
    checkpoint_id: CheckpointId
    chain: ChainIndex
    subtask: SubtaskIndex
    operators: list[OperatorSnapshot]
    sync_ms: float
    alignment_ms: float
    started: float
    chain_description: str = ""  # how messages name the chain (its operators and uids)
    final: str | None = None  # the subtask finished: its final state, under this token (sent with SubtaskFinished)
    savepoint: str | None = None  # the directory of the savepoint this checkpoint is, if it is one
    start_delay_ms: float = 0.0  # from the trigger to this subtask's first barrier
    unaligned: bool = False  # taken at its first barrier, the records in flight stored as channel state
    as_tables: bool = False  # keyed state as a savepoint stores it: a typed table per state (state_columns)

    def describe(self) -> str:
        return f"subtask {self.subtask} of {self.chain_description or f'chain {self.chain}'}"


class FinalStateError(Exception):
    """A finished subtask's final state could not be stored: the attempt fails (it restarts from the newest
    checkpoint and finishes again) rather than end without the final checkpoint that commits its sinks."""


class CheckpointAbortedError(Exception):
    """Raised inside the snapshotter to stop writing a checkpoint the coordinator has aborted."""

    def __init__(self, checkpoint_id: CheckpointId):
        super().__init__(f"checkpoint {checkpoint_id} was aborted")


class Snapshotter:
    def __init__(self, storage: CheckpointStorage, attempt: Attempt, send, fail=None):
        self.storage = storage
        self.attempt = attempt
        self.send = send
        self.fail = fail or (lambda exc: log.error("%s", exc))  # fails the slot: the job restarts
        self.queue: queue.Queue = queue.Queue()
        # Checkpoint ids the coordinator aborted: added by the control thread, read here between key groups
        # (a set's add and membership test are atomic under the GIL).
        self._aborted: set[CheckpointId] = set()
        self._savepoints: dict[str, SavepointStorage] = {}  # by directory: where savepoints' files go
        self._stopping = False  # set by stop(): every checkpoint in flight is given up
        self.thread = threading.Thread(target=self._run, name="chandy-snapshotter", daemon=True)
        self.thread.start()

    def submit(self, snapshot: SubtaskSnapshot) -> None:
        if self._stopping:
            _discard(snapshot)
        else:
            self.queue.put(snapshot)

    def abort(self, checkpoint_id: CheckpointId) -> None:
        """The coordinator gave ``checkpoint_id`` up: stop writing it (at 1 GB that saves seconds of CPU)."""
        self._aborted.add(checkpoint_id)

    def close(self, timeout: float) -> None:
        """Store what was submitted, then end: the normal end of a slot (acks of its last checkpoints go out)."""
        self.queue.put(None)
        self.thread.join(timeout)

    def stop(self, timeout: float) -> None:
        """Give up every checkpoint not yet stored and wait for the thread: a cancelled or failed slot must not
        write files after its attempt ended (the driver's end-of-attempt sweep would miss them)."""
        self._stopping = True
        while True:
            try:
                snapshot = self.queue.get_nowait()
            except queue.Empty:
                break
            if snapshot is not None:
                _discard(snapshot)
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
                _discard(snapshot)
                if self._stopping:  # the slot is ending: nobody waits for this checkpoint
                    return
                if snapshot.final is not None:  # no later checkpoint could include the subtask: restart
                    self.fail(FinalStateError(f"The final state of {snapshot.describe()} could not be stored: "
                                              f"{type(exc).__name__}: {exc}"))
                    return
                if snapshot.checkpoint_id in self._aborted:  # the coordinator knows
                    log.debug("checkpoint %d of %s given up: it was aborted", snapshot.checkpoint_id,
                              snapshot.describe())
                    continue
                log.log(logging.DEBUG if self._directory_removed(snapshot, exc) else logging.WARNING,
                        "checkpoint %d of %s not stored: %s: %s", snapshot.checkpoint_id, snapshot.describe(),
                        type(exc).__name__, exc)
                fatal = isinstance(exc, ChandyError) and not exc.retryable
                try:
                    self.send(DeclineCheckpoint(self.attempt, snapshot.checkpoint_id, snapshot.chain,
                                                snapshot.subtask, f"{type(exc).__name__}: {exc}",
                                                DeclineKind.FATAL if fatal else DeclineKind.FAILED))
                except OSError:
                    return

    def _directory_removed(self, snapshot: SubtaskSnapshot, exc: Exception) -> bool:
        """The checkpoint's directory is gone: almost always the coordinator aborted the checkpoint and its
        notice is still on the way, which is not worth a warning."""
        if not isinstance(exc, FileNotFoundError):
            return False
        try:
            return snapshot.checkpoint_id not in self.storage.checkpoint_ids()
        except Exception:  # cannot tell: report it
            return False

    def _unless_aborted(self, checkpoint_id: CheckpointId, rows: Iterator) -> Iterator:
        for row in rows:
            if checkpoint_id in self._aborted or self._stopping:
                raise CheckpointAbortedError(checkpoint_id)
            yield row

    def _storage_for(self, snapshot: SubtaskSnapshot) -> CheckpointStorage:
        if snapshot.savepoint is None:
            return self.storage
        storage = self._savepoints.get(snapshot.savepoint)
        if storage is None:
            storage = self._savepoints[snapshot.savepoint] = self.storage.savepoint_storage(snapshot.savepoint)
        return storage

    def _store(self, snapshot: SubtaskSnapshot) -> AcknowledgeCheckpoint | SubtaskFinished:
        handles = []
        positions = {}
        persisted = 0
        storage = self._storage_for(snapshot)
        for operator in snapshot.operators:
            try:
                rows: list = []
                if operator.operator_state:
                    rows.append((OPERATOR_STATE_GROUP, _pickle_operator_state(operator.operator_state)))
                if operator.channel_state is not None:
                    rows.extend(operator.channel_state.rows())
                    persisted += operator.channel_state.bytes
                native = (operator.keyed is not None and getattr(operator.keyed, "incremental", False)
                          and snapshot.savepoint is None and snapshot.final is None)
                keyed, shared = (), ()
                if native:  # an incremental snapshot: its files uploaded, their manifest in the state file
                    manifest, shared = operator.keyed.upload(
                        storage, snapshot.checkpoint_id, snapshot.subtask,
                        functools.partial(self._unless_aborted, snapshot.checkpoint_id))
                    rows.append((operator.keyed.manifest_group, manifest))
                elif operator.keyed is not None:  # keyed groups stream straight into the file
                    keyed = operator.keyed.serialized()
                if operator.keyed is not None and snapshot.as_tables:
                    # a savepoint is data: its keyed state as a typed table per state, beside the other rows
                    finished = {"finished": snapshot.final} if snapshot.final is not None else {}
                    handle = storage.write_state_file(snapshot.checkpoint_id, operator.uid, snapshot.subtask,
                                                      self._unless_aborted(snapshot.checkpoint_id, iter(rows)),
                                                      **finished)
                    handles.append(storage.write_state_tables(
                        snapshot.checkpoint_id, operator.uid, snapshot.subtask, handle,
                        self._unless_aborted(snapshot.checkpoint_id, keyed), operator.descriptors, **finished))
                elif operator.keyed is not None or rows:
                    handle = storage.write_state_file(
                        snapshot.checkpoint_id, operator.uid, snapshot.subtask,
                        self._unless_aborted(snapshot.checkpoint_id, itertools.chain(rows, keyed)),
                        **({"finished": snapshot.final} if snapshot.final is not None else {}))
                    if native:
                        handle = dataclasses.replace(handle, native_range=operator.keyed.key_range, shared=shared)
                    handles.append(handle)
            except UnpicklableStateError as exc:  # name the operator: the state's name is in the message
                raise UnpicklableStateError(f"operator uid '{operator.uid}': {exc}") from exc
            if operator.source_position is not None:
                positions[operator.uid] = operator.source_position
        if snapshot.final is not None:
            return SubtaskFinished(self.attempt, snapshot.chain, snapshot.subtask, tuple(handles), positions)
        async_ms = (time.monotonic() - snapshot.started) * 1000.0 - snapshot.sync_ms
        return AcknowledgeCheckpoint(self.attempt, snapshot.checkpoint_id, snapshot.chain, snapshot.subtask,
                                     tuple(handles), round(snapshot.sync_ms, 3), round(async_ms, 3),
                                     round(snapshot.alignment_ms, 3), positions,
                                     round(snapshot.start_delay_ms, 3), persisted, snapshot.unaligned)


def _discard(snapshot: SubtaskSnapshot) -> None:
    for operator in snapshot.operators:
        if operator.keyed is not None:
            operator.keyed.discard()


def _pickle_operator_state(state: dict[str, list]) -> bytes:
    return pickle_state(state, "operator list state")
