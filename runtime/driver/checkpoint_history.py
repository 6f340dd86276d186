"""The checkpoints of one job as people look at them: every one triggered, in progress, completed or failed with
its reason, and what each subtask contributed; kept for the REST API and the dashboard (Flink's checkpoint
statistics tracker).

The coordinator tells it what happens, on its own thread; readers (the REST server's threads) take copies. It
has a lock of its own, so a reader never waits for the coordinator's storage calls.

>>> history = CheckpointHistory(expected=2, clock=lambda: 1_000.0)
>>> history.triggered(1, savepoint=False)
>>> history.acknowledged(1, chain=0, subtask=1, sync_ms=0.5, async_ms=3.0, alignment_ms=1.0, start_delay_ms=0.2,
...                      bytes=2048, persisted_bytes=0, unaligned=False)
>>> history.failed(1, "subtask 0 declined: disk full")
>>> [(r["id"], r["status"], r["failure_message"]) for r in history.summary()["history"]]
[(1, 'FAILED', 'subtask 0 declined: disk full')]
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["CheckpointHistory", "HISTORY_SIZE"]

HISTORY_SIZE = 100  # checkpoints remembered (Flink's web.checkpoints.history is 10)


@dataclass
class _Record:
    checkpoint_id: int
    savepoint: bool
    trigger_ms: float
    status: str = "IN_PROGRESS"
    end_ms: float | None = None
    failure: str | None = None
    acks: dict = field(default_factory=dict)  # (chain, subtask) -> dict
    bytes: int | None = None
    full_bytes: int | None = None

    def to_json(self, expected: int, now_ms: float) -> dict:
        acks = list(self.acks.values())
        end = self.end_ms if self.end_ms is not None else (max((a["ack_ms"] for a in acks), default=None))
        return {"id": self.checkpoint_id, "status": self.status, "is_savepoint": self.savepoint,
                "trigger_timestamp": int(self.trigger_ms), "latest_ack_timestamp": int(end) if end else None,
                "end_to_end_duration": round((self.end_ms if self.end_ms is not None else now_ms) - self.trigger_ms, 1),
                "state_size": self.bytes if self.bytes is not None else sum(a["bytes"] for a in acks),
                "checkpointed_size": self.full_bytes,
                "sync_duration": max((a["sync_ms"] for a in acks), default=0.0),
                "async_duration": max((a["async_ms"] for a in acks), default=0.0),
                "alignment_duration": max((a["alignment_ms"] for a in acks), default=0.0),
                "start_delay": max((a["start_delay_ms"] for a in acks), default=0.0),
                "persisted_data": sum(a["persisted_bytes"] for a in acks),
                "unaligned": any(a["unaligned"] for a in acks),
                "num_subtasks": expected, "num_acknowledged_subtasks": len(acks),
                "failure_message": self.failure}


class CheckpointHistory:
    """What happened to each checkpoint of a job; see the module docstring. ``expected``: chain subtasks a
    checkpoint waits for."""

    def __init__(self, expected: int, clock=time.time, size: int = HISTORY_SIZE):
        self.expected = expected
        self.clock = clock
        self.size = size
        self._lock = threading.Lock()
        self._records: OrderedDict[int, _Record] = OrderedDict()
        self.counts = {"completed": 0, "failed": 0}
        self.restored: dict | None = None

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def restored_from(self, checkpoint_id: int, path: str, savepoint: bool) -> None:
        with self._lock:
            self.restored = {"id": checkpoint_id, "restore_timestamp": int(self._now_ms()), "external_path": path,
                             "is_savepoint": savepoint}

    def triggered(self, checkpoint_id: int, savepoint: bool) -> None:
        with self._lock:
            self._records[checkpoint_id] = _Record(checkpoint_id, savepoint, self._now_ms())
            while len(self._records) > self.size:
                self._records.popitem(last=False)

    def acknowledged(self, checkpoint_id: int, chain: int, subtask: int, **details) -> None:
        with self._lock:
            record = self._records.get(checkpoint_id)
            if record is not None:
                record.acks[(chain, subtask)] = {"chain": chain, "subtask": subtask, "ack_ms": self._now_ms(),
                                                 **details}

    def completed(self, checkpoint_id: int, bytes: int, full_bytes: int) -> None:
        with self._lock:
            self.counts["completed"] += 1
            record = self._records.get(checkpoint_id)
            if record is not None:
                record.status, record.end_ms = "COMPLETED", self._now_ms()
                record.bytes, record.full_bytes = bytes, full_bytes

    def failed(self, checkpoint_id: int, reason: str) -> None:
        with self._lock:
            record = self._records.get(checkpoint_id)
            if record is None or record.status != "IN_PROGRESS":
                return
            self.counts["failed"] += 1
            record.status, record.end_ms, record.failure = "FAILED", self._now_ms(), reason

    def summary(self) -> dict:
        """Flink's ``/jobs/<id>/checkpoints`` shape: counts, a min/avg/max summary of the completed ones, the
        latest of each kind and the history, newest first."""
        now = self._now_ms()
        with self._lock:
            history = [record.to_json(self.expected, now) for record in reversed(self._records.values())]
            counts = dict(self.counts)
            restored = dict(self.restored) if self.restored else None
        in_progress = sum(1 for r in history if r["status"] == "IN_PROGRESS")
        completed = [r for r in history if r["status"] == "COMPLETED"]
        failed = [r for r in history if r["status"] == "FAILED"]
        return {
            "counts": {"restored": 1 if restored else 0, "total": counts["completed"] + counts["failed"] + in_progress,
                       "in_progress": in_progress, "completed": counts["completed"], "failed": counts["failed"]},
            "summary": {name: _stats([r[key] for r in completed]) for name, key in (
                ("state_size", "state_size"), ("end_to_end_duration", "end_to_end_duration"),
                ("alignment_duration", "alignment_duration"), ("sync_duration", "sync_duration"),
                ("async_duration", "async_duration"), ("start_delay", "start_delay"))},
            "latest": {"completed": next((r for r in completed if not r["is_savepoint"]), None),
                       "savepoint": next((r for r in completed if r["is_savepoint"]), None),
                       "failed": failed[0] if failed else None, "restored": restored},
            "history": history,
        }

    def latest_completed(self) -> dict | None:
        """The newest completed checkpoint (not a savepoint) with its subtasks' parts, or None: what the status
        line and ``/metrics`` show, without building the whole history."""
        with self._lock:
            newest = next((r.checkpoint_id for r in reversed(self._records.values())
                           if r.status == "COMPLETED" and not r.savepoint), None)
        return None if newest is None else self.details(newest)

    def details(self, checkpoint_id: int) -> dict | None:
        """One checkpoint with every subtask's part (Flink's ``/checkpoints/details/<id>`` and its subtasks)."""
        now = self._now_ms()
        with self._lock:
            record = self._records.get(checkpoint_id)
            if record is None:
                return None
            result = record.to_json(self.expected, now)
            result["subtasks"] = [
                {"chain": a["chain"], "subtask": a["subtask"], "ack_timestamp": int(a["ack_ms"]),
                 "end_to_end_duration": round(a["ack_ms"] - record.trigger_ms, 1), "state_size": a["bytes"],
                 "sync_duration": a["sync_ms"], "async_duration": a["async_ms"],
                 "alignment_duration": a["alignment_ms"], "start_delay": a["start_delay_ms"],
                 "persisted_data": a["persisted_bytes"], "unaligned": a["unaligned"]}
                for a in sorted(record.acks.values(), key=lambda a: (a["chain"], a["subtask"]))]
        return result


def _stats(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"min": None, "max": None, "avg": None}
    return {"min": min(values), "max": max(values), "avg": round(sum(values) / len(values), 1)}
