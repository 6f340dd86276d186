"""The driver's checkpoint coordinator: trigger, collect acknowledgements, commit, notify, clean up.

Runs on the job master's thread (no locks): the master feeds it the tasks' messages and calls ``tick``
when ``next_wakeup`` says. Decisions come from :mod:`runtime.protocol.checkpoints`; this class carries
them out. A checkpoint exists once its ``_metadata`` is written, which happens only after every task has
acknowledged; then tasks are told ``NotifyCheckpointComplete``, and checkpoints beyond the retained
number are deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from runtime.checkpoint_config import CheckpointConfig
from runtime.protocol.checkpoints import PendingCheckpoint, Stats, TaskAck, TaskId, should_trigger, source_offsets
from runtime.errors import JobFailedError
from runtime.graph.job_graph import JobGraph
from runtime.protocol.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    SubtaskFinished,
    TriggerCheckpoint,
)
from state_backends.storage import CheckpointStorage

__all__ = ["CheckpointCoordinator"]

log = logging.getLogger(__name__)

METADATA_FORMAT = 1


class CheckpointCoordinator:
    def __init__(self, config: CheckpointConfig, storage: CheckpointStorage, graph: JobGraph,
                 clock=time.monotonic, wall_clock=time.time):
        self.config = config
        self.storage = storage
        self.graph = graph
        self.clock = clock
        self.wall_clock = wall_clock
        self.next_id = storage.next_checkpoint_id()
        self.tasks = frozenset(TaskId(c.index, s) for c in graph.chains for s in range(c.parallelism))
        self.completed_ids: list[int] = []  # completed by this execution, oldest first
        self.stats: list[Stats] = []
        self.pending: dict[int, PendingCheckpoint] = {}
        self.consecutive_failures = 0
        self.last_trigger_ms: float | None = None
        self.last_completion_ms: float | None = None
        self.attempt = -1
        self.control = None
        self.finished_tasks: set[TaskId] = set()

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def start_attempt(self, attempt: int, control) -> None:
        """A new attempt: checkpoints pending in the old one can never complete."""
        for checkpoint_id in list(self.pending):
            self._abort(checkpoint_id, "the job restarted", count_failure=False)
        self.attempt = attempt
        self.control = control
        self.finished_tasks = set()
        self.last_trigger_ms = self._now_ms()  # first checkpoint one interval after the start

    # -- time ----------------------------------------------------------------------------------------

    def next_wakeup(self) -> float:
        """Seconds until the coordinator has something to do (trigger or time out)."""
        now = self._now_ms()
        waits = [self.config.interval_ms - (now - (self.last_trigger_ms or now))]
        for pending in self.pending.values():
            waits.append(self.config.timeout_ms - (now - pending.triggered_ms))
        return max(0.001, min(waits) / 1000.0)

    def tick(self) -> JobFailedError | None:
        now = self._now_ms()
        failure = None
        for checkpoint_id, pending in list(self.pending.items()):
            if pending.timed_out(now, self.config.timeout_ms):
                failure = self._abort(checkpoint_id, f"not acknowledged within {self.config.timeout_ms:.0f} ms")
        if should_trigger(now, self.config.interval_ms, self.last_trigger_ms, self.last_completion_ms,
                          self.config.min_pause_ms, len(self.pending), self.config.max_concurrent,
                          all_tasks_running=self.control.all_registered and not self.finished_tasks):
            self._trigger(now)
        return failure

    # -- messages from tasks -------------------------------------------------------------------------

    def on_message(self, message) -> JobFailedError | None:
        if isinstance(message, AcknowledgeCheckpoint):
            return self._on_ack(message)
        if isinstance(message, DeclineCheckpoint):
            finished = "finished" in message.reason
            return self._abort(message.checkpoint_id, f"task {message.chain}.{message.subtask} declined: "
                                                      f"{message.reason}", count_failure=not finished)
        if isinstance(message, SubtaskFinished):
            log.info("task %d.%d finished; no more checkpoints in this attempt", message.chain, message.subtask)
            self.finished_tasks.add(TaskId(message.chain, message.subtask))
            for checkpoint_id in list(self.pending):
                self._abort(checkpoint_id, "a task finished before acknowledging", count_failure=False)
        return None

    def _trigger(self, now: float) -> None:
        checkpoint_id = self.next_id
        self.next_id += 1
        self.last_trigger_ms = now
        self.pending[checkpoint_id] = PendingCheckpoint(checkpoint_id, now, self.tasks)
        log.debug("triggering checkpoint %d", checkpoint_id)
        self.control.broadcast(TriggerCheckpoint(self.attempt, checkpoint_id))

    def _on_ack(self, message: AcknowledgeCheckpoint) -> JobFailedError | None:
        pending = self.pending.get(message.checkpoint_id)
        if pending is None:
            return None  # aborted meanwhile; its directory is (being) removed
        ack = TaskAck(TaskId(message.chain, message.subtask), message.files, message.sync_ms, message.async_ms,
                      message.alignment_ms, message.source_offsets)
        if pending.acknowledge(ack):
            return self._commit(pending)
        return None

    # -- outcomes ------------------------------------------------------------------------------------

    def _commit(self, pending: PendingCheckpoint) -> JobFailedError | None:
        checkpoint_id = pending.checkpoint_id
        del self.pending[checkpoint_id]
        now = self._now_ms()
        stats = dataclasses.replace(pending.stats(now), completed_at=round(self.wall_clock(), 3))
        operators = {}
        for chain in self.graph.chains:
            for node in chain.operators:
                operators[node.uid] = {"name": node.name, "parallelism": node.parallelism, "files": []}
        for ack in pending.acks.values():
            for info in ack.files:
                operators[info.uid]["files"].append(CheckpointStorage.file_entry(info))
        metadata = {
            "format": METADATA_FORMAT,
            "checkpoint_id": checkpoint_id,
            "job_name": self.graph.job_name,
            "timestamp_ms": int(self.wall_clock() * 1000),
            "attempt": self.attempt,
            "max_parallelism": self.graph.max_parallelism,
            "operators": operators,
            "source_offsets": source_offsets(pending.acks.values()),
            "stats": dataclasses.asdict(stats),
        }
        try:
            self.storage.write_metadata(checkpoint_id, metadata)
        except Exception as exc:  # the commit marker could not be written: this checkpoint failed
            return self._fail(checkpoint_id, f"writing _metadata failed: {type(exc).__name__}: {exc}")
        self.completed_ids.append(checkpoint_id)
        self.stats.append(stats)
        self.consecutive_failures = 0
        self.last_completion_ms = now
        log.info("checkpoint %d complete: %.0f ms (sync %.1f ms, async %.1f ms, alignment %.1f ms), %d bytes",
                 checkpoint_id, stats.duration_ms, stats.sync_ms, stats.async_ms, stats.alignment_ms, stats.bytes)
        self.control.broadcast(NotifyCheckpointComplete(self.attempt, checkpoint_id))
        self._apply_retention()
        return None

    def _apply_retention(self) -> None:
        try:
            completed = [m["checkpoint_id"] for m in self.storage.completed() if not m.get("savepoint")]
            keep = set(completed[-self.config.retained:])
            newest = completed[-1] if completed else 0
            for checkpoint_id in self.storage.checkpoint_ids():
                obsolete = checkpoint_id in completed and checkpoint_id not in keep
                abandoned = checkpoint_id not in completed and checkpoint_id < newest and \
                    checkpoint_id not in self.pending
                if obsolete or abandoned:
                    self.storage.delete_checkpoint(checkpoint_id)
        except Exception:  # cleanup is best effort; the next commit tries again
            log.warning("could not delete old checkpoints", exc_info=True)

    def finish(self) -> None:
        """The job ended: remove directories of checkpoints that never completed (tasks wrote them late)."""
        for checkpoint_id in list(self.pending):
            self._abort(checkpoint_id, "the job finished", count_failure=False)
        try:
            completed = {m["checkpoint_id"] for m in self.storage.completed()}
            for checkpoint_id in self.storage.checkpoint_ids():
                if checkpoint_id not in completed and checkpoint_id >= min(self.completed_ids or [checkpoint_id]):
                    self.storage.delete_checkpoint(checkpoint_id)
        except Exception:  # best effort: an incomplete directory is never restored anyway
            log.debug("could not clean up incomplete checkpoints", exc_info=True)

    def _abort(self, checkpoint_id: int, reason: str, count_failure: bool = True) -> JobFailedError | None:
        if self.pending.pop(checkpoint_id, None) is None:
            return None
        # Expected aborts (the input ended mid-checkpoint) are not the user's concern; failures are.
        log.log(logging.WARNING if count_failure else logging.INFO, "checkpoint %d aborted: %s", checkpoint_id, reason)
        if self.control is not None:
            self.control.broadcast(NotifyCheckpointAborted(self.attempt, checkpoint_id))
        try:
            self.storage.delete_checkpoint(checkpoint_id)
        except Exception:  # leftover files without _metadata are never restored
            log.debug("could not delete aborted checkpoint %d", checkpoint_id, exc_info=True)
        if not count_failure:
            return None
        return self._fail(checkpoint_id, reason)

    def _fail(self, checkpoint_id: int, reason: str) -> JobFailedError | None:
        self.consecutive_failures += 1
        if self.consecutive_failures > self.config.tolerable_failures:
            return JobFailedError(
                f"Job '{self.graph.job_name}': checkpoint {checkpoint_id} failed ({reason}), "
                f"{self.consecutive_failures} consecutive checkpoint failure(s), more than the "
                f"{self.config.tolerable_failures} tolerated (set_tolerable_checkpoint_failure_number).")
        return None
