"""Barrier alignment for one subtask's input gate (Chandy-Lamport over FIFO channels).

EXACTLY_ONCE: after barrier n arrives on a channel, that channel is not read until barrier n has arrived
on every other open channel; then the subtask snapshots and forwards barrier n. AT_LEAST_ONCE: channels are
never blocked; the snapshot happens when the last barrier arrives, so it may include records from after
the barrier on faster channels (they are replayed after a restore: at least once).

A channel that has ended counts as aligned for every later barrier: nothing more can come from it.

>>> aligner = BarrierAligner(channels=2, exactly_once=True)
>>> aligner.on_barrier(channel=0, checkpoint_id=1), aligner.should_block(0), aligner.should_block(1)
(<Alignment.BLOCK: 'block'>, True, False)
>>> aligner.on_barrier(channel=1, checkpoint_id=1), aligner.should_block(0)
(<Alignment.COMPLETE: 'complete'>, False)
"""

from __future__ import annotations

import time
from enum import Enum

__all__ = ["BarrierAligner", "Alignment"]


class Alignment(Enum):
    """What a barrier (or an end of input) means for the subtask, as :class:`BarrierAligner` decides.

    >>> BarrierAligner(1, exactly_once=True).on_barrier(0, 1)
    <Alignment.COMPLETE: 'complete'>
    """

    IGNORE = "ignore"        # a barrier of a checkpoint that is already done or superseded
    BLOCK = "block"          # barrier received; keep waiting for the others (block this channel if EO)
    COMPLETE = "complete"    # all channels delivered the barrier: snapshot and forward it now


class BarrierAligner:
    """The alignment state of one input gate with ``channels`` channels; fed every barrier and end of input.

    >>> aligner = BarrierAligner(channels=2, exactly_once=False)
    >>> aligner.on_barrier(0, 1), aligner.should_block(0)  # at least once: never blocks
    (<Alignment.BLOCK: 'block'>, False)
    >>> aligner.on_end_of_input(1), aligner.on_barrier(0, 1)  # an ended channel is aligned; 1 is done now
    (<Alignment.COMPLETE: 'complete'>, <Alignment.IGNORE: 'ignore'>)
    """

    def __init__(self, channels: int, exactly_once: bool, clock=time.monotonic):
        self.channels = channels
        self.exactly_once = exactly_once
        self.clock = clock
        self.current: int | None = None
        self.last_completed = 0
        self.seen: set[int] = set()
        self.ended: set[int] = set()
        self.started = 0.0
        self.alignment_ms = 0.0
        self.savepoint: str | None = None  # of the current (or the last completed) checkpoint, if it is one

    def on_barrier(self, channel: int, checkpoint_id: int, savepoint: str | None = None) -> Alignment:
        """``savepoint``: the barrier's savepoint directory; a savepoint is aligned even in AT_LEAST_ONCE mode."""
        if checkpoint_id <= self.last_completed or (self.current is not None and checkpoint_id < self.current):
            return Alignment.IGNORE
        if self.current != checkpoint_id:  # a newer checkpoint supersedes one still aligning
            self.current = checkpoint_id
            self.savepoint = savepoint
            self.seen = set()
            self.started = self.clock()
        self.seen.add(channel)
        return self._progress()

    def on_end_of_input(self, channel: int) -> Alignment:
        self.ended.add(channel)
        return self._progress() if self.current is not None else Alignment.IGNORE

    def _progress(self) -> Alignment:
        if len(self.seen | self.ended) < self.channels:
            return Alignment.BLOCK
        self.alignment_ms = (self.clock() - self.started) * 1000.0
        self.last_completed = self.current
        self.current = None
        self.seen = set()
        return Alignment.COMPLETE

    def take_unaligned(self, checkpoint_id: int) -> None:
        """The subtask took ``checkpoint_id`` unaligned (at its first barrier, or when alignment timed out): its
        later barriers are ignored, and no channel stays blocked for it."""
        self.last_completed = max(self.last_completed, checkpoint_id)
        self.current = None
        self.seen = set()
        self.savepoint = None

    def should_block(self, channel: int) -> bool:
        return ((self.exactly_once or self.savepoint is not None) and self.current is not None
                and channel in self.seen)
