"""The checkpoint protocol's decisions, as pure functions and small state objects (no I/O, no clock).

The coordinator reads the facts (time, pending checkpoints, acks), asks these functions what to do, and
carries it out. Tested without Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TaskId",
    "should_trigger",
    "PendingCheckpoint",
    "TaskAck",
    "Stats",
    "RestoreSpec",
]


@dataclass(frozen=True, order=True)
class TaskId:
    """One chain subtask: the unit that acknowledges a checkpoint."""

    chain: int
    subtask: int


@dataclass(frozen=True)
class TaskAck:
    """What one task contributed to a checkpoint: its state files and timings."""

    task: TaskId
    files: tuple  # of state_backends.storage.StateFileInfo
    sync_ms: float
    async_ms: float
    alignment_ms: float
    source_offsets: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Stats:
    checkpoint_id: int
    duration_ms: float
    sync_ms: float
    async_ms: float
    alignment_ms: float
    bytes: int
    completed_at: float = 0.0  # wall clock, epoch seconds: with duration_ms, when the checkpoint ran


def should_trigger(now_ms: float, interval_ms: float | None, last_trigger_ms: float | None,
                   last_completion_ms: float | None, min_pause_ms: float, pending: int, max_concurrent: int,
                   all_tasks_running: bool) -> bool:
    """Whether to start a checkpoint now."""
    if interval_ms is None or not all_tasks_running or pending >= max_concurrent:
        return False
    if last_trigger_ms is not None and now_ms - last_trigger_ms < interval_ms:
        return False
    if last_completion_ms is not None and now_ms - last_completion_ms < min_pause_ms:
        return False
    return True


@dataclass
class PendingCheckpoint:
    """A triggered checkpoint collecting acknowledgements from every task."""

    checkpoint_id: int
    triggered_ms: float
    expected: frozenset
    acks: dict = field(default_factory=dict)

    def acknowledge(self, ack: TaskAck) -> bool:
        """Record ``ack``; True once every expected task has acknowledged."""
        if ack.task in self.expected:
            self.acks[ack.task] = ack
        return self.is_complete

    @property
    def is_complete(self) -> bool:
        return len(self.acks) == len(self.expected)

    def timed_out(self, now_ms: float, timeout_ms: float) -> bool:
        return now_ms - self.triggered_ms > timeout_ms

    def stats(self, now_ms: float) -> Stats:
        acks = list(self.acks.values())
        return Stats(self.checkpoint_id, round(now_ms - self.triggered_ms, 2),
                     round(max((a.sync_ms for a in acks), default=0.0), 3),
                     round(max((a.async_ms for a in acks), default=0.0), 3),
                     round(max((a.alignment_ms for a in acks), default=0.0), 3),
                     sum(f.size for a in acks for f in a.files))


def source_offsets(acks: Any) -> dict:
    """Source positions of every task, by operator uid and subtask, for ``_metadata``."""
    offsets: dict = {}
    for ack in acks:
        for uid, value in ack.source_offsets.items():
            offsets.setdefault(uid, {})[str(ack.task.subtask)] = value
    return offsets


@dataclass(frozen=True)
class RestoreSpec:
    """What one operator subtask reads: files holding its key groups, and every operator-state file."""

    checkpoint_id: int
    keyed_files: tuple  # file entries of _metadata
    operator_files: tuple
    key_groups: tuple[int, int]  # inclusive range this subtask owns
