"""How one subtask takes the checkpoint barriers of its input gate: aligned, unaligned, or aligned until a timeout.

Flink's ``SingleCheckpointBarrierHandler`` is the model: one object owns what a checkpoint in progress means for
the gate (which channels are blocked, what is being recorded) and asks its subtask, through
:class:`CheckpointActions`, to snapshot. The subtask's loop only hands it barriers, ends of input, and time.

Its lifecycle, one checkpoint at a time (:class:`BarrierHandlerState`):

- ``WAITING``: no checkpoint is between its first barrier here and its snapshot.
- ``ALIGNING``: some channels delivered checkpoint n's barrier (:class:`~runtime.executor.aligner.BarrierAligner`
  counts them); exactly once blocks those channels. When the last open channel delivers it, the subtask snapshots
  and forwards the barrier: ``WAITING``. A newer barrier supersedes n.
- ``RECORDING``: the subtask snapshotted n unaligned, at n's first barrier (or when alignment timed out), ahead of
  the records in flight; what each channel carries before its barrier n is being recorded as channel state. When
  every channel's barrier has come, the snapshot goes to the snapshotter: ``WAITING``. If the coordinator aborts n,
  or a newer checkpoint's barrier comes (the coordinator runs one unaligned checkpoint at a time, so n is over),
  the snapshot is discarded.

>>> from types import SimpleNamespace
>>> class Gate:                                   # records what the handler does to the gate
...     channels, announced, blocked = [(0, 0), (0, 1)], None, set()
...     def block(self, channel): self.blocked.add(channel)
...     def unblock_all(self): self.blocked.clear()
>>> class Subtask:
...     def snapshot_aligned(self, checkpoint_id, alignment_ms, savepoint, triggered_at_ms, start_delay_ms):
...         print("snapshot", checkpoint_id)
>>> handler = BarrierHandler(Gate(), Subtask(), exactly_once=True, unaligned=False, aligned_timeout_ms=0.0)
>>> handler.on_barrier(0, CheckpointBarrier(1)); handler.state, sorted(handler.gate.blocked)
(<BarrierHandlerState.ALIGNING: 'aligning'>, [0])
>>> handler.on_barrier(1, CheckpointBarrier(1))
snapshot 1
>>> handler.state, sorted(handler.gate.blocked)
(<BarrierHandlerState.WAITING: 'waiting'>, [])
"""

from __future__ import annotations

import logging
import time
from collections import deque
from enum import Enum
from typing import Callable, Protocol

from runtime.executor.aligner import Alignment, BarrierAligner
from runtime.executor.channel_state import ChannelState
from runtime.executor.snapshotter import SubtaskSnapshot
from runtime.ids import CheckpointId
from runtime.protocol.events import CheckpointBarrier
from runtime.protocol.records import slice_batch

__all__ = ["BarrierHandler", "BarrierHandlerState", "CheckpointActions", "Leftover"]

log = logging.getLogger(__name__)

# A batch taken from a channel whose records from ``start`` on are not processed yet: (channel, batch, start).
Leftover = tuple[int, list, int]


class BarrierHandlerState(Enum):
    WAITING = "waiting"
    ALIGNING = "aligning"
    RECORDING = "recording"


class CheckpointActions(Protocol):
    """What the handler asks of its subtask."""

    def snapshot_aligned(self, checkpoint_id: CheckpointId, alignment_ms: float, savepoint: str | None,
                         triggered_at_ms: int, start_delay_ms: float) -> None:
        """Snapshot now and forward the barrier behind every record processed (the snapshot goes to the
        snapshotter)."""

    def snapshot_unaligned(self, checkpoint_id: CheckpointId, triggered_at_ms: int,
                           start_delay_ms: float) -> SubtaskSnapshot:
        """Snapshot now and forward the barrier ahead of the output in flight; the snapshot is returned, to be
        completed with the input's channel state."""

    def submit_snapshot(self, snapshot: SubtaskSnapshot) -> None:
        """Hand ``snapshot`` to the asynchronous part (an unaligned one, once its channel state is recorded)."""


class BarrierHandler:
    """The barrier handling of one subtask with input gate ``gate``. ``channel_state_of(recorder)``: the channel
    state a recorder fills (unaligned checkpoints)."""

    def __init__(self, gate, actions: CheckpointActions, exactly_once: bool, unaligned: bool,
                 aligned_timeout_ms: float, channel_state_of: Callable[..., ChannelState] | None = None,
                 description: str = "this subtask"):
        self.gate = gate
        self.actions = actions
        self.aligner = BarrierAligner(len(gate.channels), exactly_once)
        self.unaligned = unaligned
        self.aligned_timeout_ms = aligned_timeout_ms if unaligned else 0.0
        self.channel_state_of = channel_state_of
        self.description = description
        self.state = BarrierHandlerState.WAITING
        self.first_barrier = CheckpointBarrier(0)  # of the checkpoint in progress, and when it came
        self.first_arrived_ms = 0.0
        self.recording: SubtaskSnapshot | None = None  # RECORDING: the snapshot waiting for its channel state
        self.recording_started = 0.0
        self.aborted: deque = deque()  # checkpoint ids the coordinator aborted, appended by the control thread

    # -- input ------------------------------------------------------------------------------------------

    def on_barrier(self, channel: int, barrier: CheckpointBarrier, leftover: Leftover | None = None) -> None:
        """A barrier polled from ``channel`` (in order, or ahead of the records when unaligned)."""
        aligner = self.aligner
        checkpoint_id = barrier.checkpoint_id
        self._note_first_barrier(barrier)
        if self.recording is not None and checkpoint_id > self.recording.checkpoint_id:
            self._supersede(checkpoint_id)
        if self.unaligned and barrier.savepoint is None and (barrier.unaligned or self._timed_out(barrier)):
            if checkpoint_id > aligner.last_completed and (aligner.current is None or checkpoint_id >= aligner.current):
                # polled in order: nothing of this channel is in flight before it
                self._snapshot_unaligned(checkpoint_id, None if barrier.unaligned else channel, leftover)
            return
        self._on_alignment(aligner.on_barrier(channel, checkpoint_id, barrier.savepoint), channel, checkpoint_id)

    def on_end_of_input(self, channel: int) -> None:
        """``channel`` ended: it counts as aligned for every barrier from now on."""
        checkpoint_id = self.aligner.current
        self._on_alignment(self.aligner.on_end_of_input(channel), channel, checkpoint_id)

    def abort_later(self, checkpoint_id: CheckpointId) -> None:
        """The coordinator aborted ``checkpoint_id`` (any thread): forgotten at the subtask's next :meth:`tend`."""
        self.aborted.append(checkpoint_id)

    def tend(self, leftover: Leftover | None = None) -> float:
        """What an unaligned subtask does between two batches, two slices, or two waits for output room: forget a
        recording whose checkpoint was aborted, hand on one whose channel state is complete, switch to unaligned
        after the aligned timeout. Returns when (monotonic s) the timeout is next due."""
        if self.aborted:
            self._drop_aborted()
        if self.recording is not None:
            self._hand_on_recorded()
        return self._check_alignment_timeout(leftover) if self.aligned_timeout_ms else float("inf")

    def finish(self) -> None:
        """Every channel ended: a recording's records in flight are all recorded."""
        if self.recording is not None:
            self._hand_on_recorded()

    # -- aligned --------------------------------------------------------------------------------------------

    def _on_alignment(self, decision: Alignment, channel: int, checkpoint_id: CheckpointId | None) -> None:
        aligner = self.aligner
        if decision is Alignment.BLOCK:
            self.state = BarrierHandlerState.ALIGNING
            if aligner.should_block(channel):
                self.gate.block(channel)
        elif decision is Alignment.COMPLETE:
            barrier = self.first_barrier
            self.actions.snapshot_aligned(checkpoint_id, aligner.alignment_ms, aligner.savepoint,
                                          barrier.timestamp_ms, self._start_delay_ms())
            self.gate.unblock_all()
            self.state = BarrierHandlerState.WAITING

    def _note_first_barrier(self, barrier: CheckpointBarrier) -> None:
        """The first barrier of its checkpoint here: when it came says how long it waited in queues on the way."""
        aligner = self.aligner
        if barrier.checkpoint_id != aligner.current and barrier.checkpoint_id > aligner.last_completed:
            self.first_barrier = barrier
            self.first_arrived_ms = time.time() * 1000.0

    def _start_delay_ms(self) -> float:
        barrier = self.first_barrier
        return max(0.0, self.first_arrived_ms - barrier.timestamp_ms) if barrier.timestamp_ms else 0.0

    # -- unaligned ------------------------------------------------------------------------------------------

    def _timed_out(self, barrier: CheckpointBarrier) -> bool:
        return time.time() * 1000.0 - barrier.timestamp_ms >= self.aligned_timeout_ms

    def _check_alignment_timeout(self, leftover: Leftover | None) -> float:
        """Switch to unaligned if the newest barrier that reached the gate (queued, or being aligned) was
        triggered longer ago than the aligned timeout; else return when (monotonic s) it will have been."""
        barrier = self.gate.announced
        if barrier is None or barrier.savepoint is not None or barrier.checkpoint_id <= self.aligner.last_completed:
            return float("inf")
        remaining_ms = barrier.timestamp_ms + self.aligned_timeout_ms - time.time() * 1000.0
        if remaining_ms > 0:
            return time.monotonic() + remaining_ms / 1000.0
        self._note_first_barrier(barrier)
        if self.recording is not None and barrier.checkpoint_id > self.recording.checkpoint_id:
            self._supersede(barrier.checkpoint_id)
        self._snapshot_unaligned(barrier.checkpoint_id, None, leftover)
        return float("inf")

    def _snapshot_unaligned(self, checkpoint_id: CheckpointId, polled: int | None, leftover: Leftover | None) -> None:
        """Snapshot now, ahead of the records in flight, and record as channel state what each channel carries
        before its barrier. Nothing is left on the channels that delivered their barrier while aligning, nor on
        ``polled`` (whose barrier was just taken in order), nor on ended ones; ``leftover``: records taken from a
        channel and not processed yet."""
        aligner = self.aligner
        done = set(aligner.seen) if aligner.current == checkpoint_id else set()
        done |= aligner.ended
        if polled is not None:
            done.add(polled)
        aligner.take_unaligned(checkpoint_id)
        self.gate.unblock_all()
        if leftover is not None:
            channel, batch, start = leftover
            leftover = (channel, slice_batch(batch, start, len(batch)))
        recorder = self.gate.record_in_flight(checkpoint_id, done, leftover)
        snapshot = self.actions.snapshot_unaligned(checkpoint_id, self.first_barrier.timestamp_ms,
                                                   self._start_delay_ms())
        snapshot.operators[0].channel_state = self.channel_state_of(recorder)
        self.recording = snapshot
        self.recording_started = time.monotonic()
        self.state = BarrierHandlerState.RECORDING
        self._hand_on_recorded()

    def _hand_on_recorded(self) -> None:
        """Hand the recording snapshot to the snapshotter once every channel's barrier was put."""
        snapshot = self.recording
        if not snapshot.operators[0].channel_state.recorder.complete:
            return
        self.recording = None
        self.gate.stop_recording()
        snapshot.alignment_ms = (time.monotonic() - self.recording_started) * 1000.0
        self.actions.submit_snapshot(snapshot)
        self.state = BarrierHandlerState.WAITING

    def _supersede(self, checkpoint_id: CheckpointId) -> None:
        """A newer checkpoint's barrier came while recording: the coordinator runs one unaligned checkpoint at a
        time, so the recorded one is over unless its channel state is complete (then it is handed on)."""
        self._hand_on_recorded()
        if self.recording is not None:
            self._discard_recording(f"superseded by checkpoint {checkpoint_id}")

    def _drop_aborted(self) -> None:
        aborted = set()
        while self.aborted:
            aborted.add(self.aborted.popleft())
        if self.recording is not None and self.recording.checkpoint_id in aborted:
            self._discard_recording("aborted by the coordinator")

    def _discard_recording(self, why: str) -> None:
        snapshot, self.recording = self.recording, None
        log.info("checkpoint %d of %s %s before its records in flight were recorded", snapshot.checkpoint_id,
                 self.description, why)
        for operator in snapshot.operators:
            if operator.keyed is not None:
                operator.keyed.discard()
        self.gate.stop_recording()
        self.state = BarrierHandlerState.WAITING

