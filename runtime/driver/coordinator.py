"""The driver's checkpoint coordinator: trigger, collect acknowledgements, commit, notify, clean up.

:class:`CheckpointCoordinator` holds the protocol's state and carries out what
:mod:`runtime.protocol.checkpoints` decides; every public method takes its lock, so the job master (attempt
boundaries) and the coordinator's own thread (messages, timers) never interleave inside it.
:class:`~runtime.driver.coordinator_loop.CoordinatorLoop` is that thread: the control server puts every
:class:`CheckpointMessage` straight into its inbox, it wakes for the next trigger or timeout, and it reports a
checkpoint failure the job cannot tolerate to the job master through a callback. What is special about savepoints
is in :mod:`runtime.driver.savepoints`.

A checkpoint exists once its ``_metadata`` is written, which happens only after every chain subtask has
acknowledged; then the slots are told ``NotifyCheckpointComplete``, and the completed-checkpoint store
(:mod:`runtime.driver.completed_checkpoints`) deletes those beyond the retained number; the failure manager
(:mod:`runtime.driver.checkpoint_failures`) counts failures in a row. Acknowledgements that arrive for an aborted checkpoint, or from a subtask the
checkpoint did not expect, have their state files discarded.

>>> from runtime import StreamExecutionEnvironment
>>> from operators import DiscardingSink
>>> env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
>>> _ = env.from_sequence(0, 9).sink_to(DiscardingSink())
>>> class Slots:  # the control server's part: who is there, and what was broadcast to them
...     all_registered, sent = True, []
...     def broadcast(self, message): self.sent.append(message)
>>> now = [0.0]
>>> coordinator = CheckpointCoordinator(CheckpointConfig().set_checkpoint_interval(1000),
...     CheckpointStorage("memory://coordinator-doc", "job"), env.get_job_graph("job"), clock=lambda: now[0])
>>> coordinator.start_attempt(0, Slots()); now[0] = 1.0; coordinator.tick()
>>> Slots.sent
[TriggerCheckpoint(attempt=0, checkpoint_id=1, savepoint=None)]
>>> for subtask in (0, 1):
...     coordinator.on_message(AcknowledgeCheckpoint(0, 1, chain=0, subtask=subtask))
>>> Slots.sent[-1], coordinator.completed_checkpoints()
(NotifyCheckpointComplete(attempt=0, checkpoint_id=1), [1])
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from runtime.checkpoint_config import CheckpointConfig
from runtime.driver.checkpoint_failures import CheckpointFailureManager
from runtime.driver.checkpoint_history import CheckpointHistory
from runtime.driver.completed_checkpoints import CompletedCheckpointStore
from runtime.driver.savepoints import SavepointRequest, Savepoints
from runtime.errors import CheckpointError, JobFailedError
from runtime.graph.job_graph import JobGraph
from runtime.ids import Attempt, CheckpointId
from runtime.protocol.checkpoints import (
    AckResult,
    CheckpointStats,
    CompletedCheckpoint,
    PendingCheckpoint,
    SubtaskAck,
    SubtaskId,
    should_trigger,
)
from runtime.protocol.messages import (
    AcknowledgeCheckpoint,
    CheckpointMessage,
    DeclineCheckpoint,
    DeclineKind,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    StopSources,
    SubtaskFinished,
    TriggerCheckpoint,
)
from runtime.settings.units import human_bytes
from state_backends.storage import CheckpointStatus, CheckpointStorage, SavepointStorage

__all__ = ["CheckpointCoordinator", "CheckpointRequest"]

log = logging.getLogger(__name__)

# Aborted checkpoints remembered so that their late acknowledgements are recognised (and their files removed).
_ABORTED_REMEMBERED = 64


@dataclass
class CheckpointRequest:
    """A checkpoint a user asked for now (``POST /jobs/<id>/checkpoints``). ``done(checkpoint id, error)`` is
    called once, with the coordinator's lock held."""

    done: Callable[[int | None, BaseException | None], None]


class CheckpointCoordinator:
    def __init__(self, config: CheckpointConfig, storage: CheckpointStorage, graph: JobGraph,
                 clock=time.monotonic, wall_clock=time.time):
        self.config = config
        self.storage = storage
        self.graph = graph
        self.clock = clock
        self.wall_clock = wall_clock
        self._lock = threading.Lock()
        self.next_id = storage.next_checkpoint_id()
        self.first_id = self.next_id  # ids from here on are this execution's
        self.subtasks = frozenset(SubtaskId(c.index, s) for c in graph.chains for s in range(c.parallelism))
        self.completed_ids: list[CheckpointId] = []  # completed by this execution, oldest first
        self.stats: list[CheckpointStats] = []
        self.pending: dict[CheckpointId, PendingCheckpoint] = {}
        self.aborted: dict[CheckpointId, PendingCheckpoint] = {}
        self.store = CompletedCheckpointStore(storage, lambda: config.retained)
        self.failures = CheckpointFailureManager(config, graph.job_name)
        self.last_trigger_ms: float | None = None
        self.last_completion_ms: float | None = None
        self.attempt: Attempt | None = None  # None: no attempt running, nothing is triggered
        self.control = None
        self.savepoints = Savepoints(graph.job_name)
        self.closed = False  # the job ended: no request is taken any more
        self.history = CheckpointHistory(len(self.subtasks), wall_clock)
        # Checkpoints asked for now (REST, CLI): each waits for the next checkpoint triggered, then for its end.
        self.manual_requests: list[CheckpointRequest] = []
        self.manual_waiting: dict[CheckpointId, list[CheckpointRequest]] = {}
        self._reset_subtask_progress()
        self.source_subtasks = frozenset(SubtaskId(c.index, s) for c in graph.chains if c.operators and c.is_source
                                         for s in range(c.parallelism))

    def continue_after(self, restored_id: CheckpointId) -> None:
        """Number this execution's checkpoints after the one it restores, as Flink does, also when that one lies
        in another job's directory (a savepoint): sinks record checkpoint ids in the tables they commit to, and a
        table that holds checkpoint 57 of this sink must never see a later commit numbered 3."""
        if restored_id >= self.next_id:
            self.next_id = self.first_id = CheckpointId(restored_id + 1)

    @property
    def consecutive_failures(self) -> int:
        return self.failures.consecutive

    def _reset_subtask_progress(self) -> None:
        """What the coordinator knows of the subtasks of one attempt."""
        self.finished_subtasks: set[SubtaskId] = set()
        # The final state of each finished subtask: every later checkpoint of the attempt includes it (Flink's
        # checkpoints after tasks finish).
        self.final_acks: dict[SubtaskId, SubtaskAck] = {}
        # Every subtask finished and the final checkpoint (their final states alone) is not committed yet: it
        # is retried each interval after a failed attempt, since the finished subtasks wait for it.
        self.final_checkpoint_due = False
        self.stop_sent = False  # StopSources went to this attempt's slots

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    # -- the job master's side ------------------------------------------------------------------------

    def start_attempt(self, attempt: Attempt, control) -> None:
        """A new attempt: checkpoints pending in the old one can never complete."""
        with self._lock:
            self._abort_all("the job restarted")
            self._delete_unreferenced_final_states()
            self.store.load()  # once per attempt: from here on the store follows the commits in memory
            self.attempt = attempt
            self.control = control
            self._reset_subtask_progress()
            self.last_trigger_ms = self._now_ms()  # first checkpoint one interval after the start

    def end_attempt(self, reason: str) -> None:
        """The attempt is over (failed, cancelled): abort what is pending, trigger nothing more."""
        with self._lock:
            self._abort_all(reason)
            self.attempt = None

    def completed_checkpoints(self) -> list[CheckpointId]:
        """Ids this execution completed, oldest first."""
        with self._lock:
            return list(self.completed_ids)

    def checkpoint_stats(self) -> list[CheckpointStats]:
        with self._lock:
            return list(self.stats)

    def request_savepoint(self, request: SavepointRequest) -> None:
        """Take a savepoint (aligned, self-contained, in a directory of its own) as soon as no checkpoint is
        pending, in this attempt or, during a restart, in the next; ``request.done`` says how it went. A stop
        request makes the job's sources stop; the job's final checkpoint is then written as the savepoint too."""
        with self._lock:
            self.savepoints.ask(request, self.closed)

    def request_checkpoint(self, request: CheckpointRequest) -> None:
        """Take a checkpoint as soon as one may start (no more pending than allowed), whatever the interval."""
        with self._lock:
            if self.closed:
                request.done(None, CheckpointError(f"Job '{self.graph.job_name}' has ended: no checkpoint is taken."))
                return
            self.manual_requests.append(request)

    def _attach_manual(self, checkpoint_id: CheckpointId) -> None:
        """The checkpoints asked for now are answered by ``checkpoint_id``, just triggered."""
        if self.manual_requests:
            self.manual_waiting[checkpoint_id], self.manual_requests = self.manual_requests, []

    def _resolve_manual(self, checkpoint_id: CheckpointId, error: str | None) -> None:
        for request in self.manual_waiting.pop(checkpoint_id, ()):
            request.done(None if error else checkpoint_id,
                         CheckpointError(f"Checkpoint {checkpoint_id} of job '{self.graph.job_name}' failed: {error}")
                         if error else None)

    @property
    def stop_sources(self) -> StopSources | None:
        """What the next attempt's slots start with when the job is stopping (their sources read nothing)."""
        with self._lock:
            return self.savepoints.stop_sources(self.attempt)

    def give_up_requests(self, why: str) -> None:
        """The job ended without taking them: every savepoint still asked for fails, saying ``why``."""
        with self._lock:
            self.closed = True
            manual = self.manual_requests + [r for waiting in self.manual_waiting.values() for r in waiting]
            self.manual_requests, self.manual_waiting = [], {}
            for request in manual:
                request.done(None, CheckpointError(f"No checkpoint of job '{self.graph.job_name}' was taken: {why}."))
            self.savepoints.give_up_waiting(why)

    def finish(self) -> None:
        """The job ended: remove directories of checkpoints that never completed (slots wrote them late)."""
        with self._lock:
            self._abort_all("the job finished")
            self.attempt = None
            try:
                for stored in self.storage.survey():
                    if stored.status is CheckpointStatus.INCOMPLETE and stored.checkpoint_id >= self.first_id:
                        self.storage.delete_checkpoint(stored.checkpoint_id)
            except Exception:  # best effort: an incomplete directory is never restored anyway
                log.debug("could not clean up incomplete checkpoints", exc_info=True)
            self._delete_unreferenced_final_states()

    def discard_at_end(self, status: str) -> None:
        """The job ended with ``status`` (a JobStatus name): delete the checkpoints this run completed if its
        retention mode says so (``set_externalized_checkpoint_retention``). Never the checkpoint the run was
        restored from, nor a savepoint."""
        mode = self.config.externalized
        if not mode.deletes_when(status):
            return
        with self._lock:
            try:
                for stored in self.storage.survey():
                    if stored.checkpoint_id >= self.first_id:
                        self.storage.delete_checkpoint(stored.checkpoint_id)
                self.completed_ids = []
                self.store.forget_all()
                self._delete_unreferenced_final_states()
                log.info("Job '%s' %s: its checkpoints were deleted (%s)", self.graph.job_name, status, mode.name)
            except Exception as exc:  # the retention mode is a wish about storage, not a reason to fail
                log.warning("Job '%s': could not delete its checkpoints (%s): %s", self.graph.job_name, mode.name, exc)

    # -- time ----------------------------------------------------------------------------------------

    def next_wakeup(self) -> float:
        """Seconds until the coordinator has something to do (trigger or time out)."""
        with self._lock:
            if self.attempt is None:
                return 1.0
            now = self._now_ms()
            waits = [self.config.interval_ms - (now - (self.last_trigger_ms or now))]
            for pending in self.pending.values():
                waits.append(self.config.timeout_ms - (now - pending.triggered_ms))
            savepoints = self.savepoints
            if (savepoints.waiting and not self.pending) or (savepoints.stop_request and not self.stop_sent) \
                    or self.manual_requests:
                waits.append(50.0)  # the rendezvous is near, or the slots are still registering: look again soon
            return max(0.001, min(waits) / 1000.0)

    def handle(self, message: CheckpointMessage | None) -> tuple[Attempt | None, JobFailedError | None]:
        """The loop's step: handle ``message`` (if any), then what time says; the failure comes with the
        attempt it belongs to, both read under the lock."""
        with self._lock:
            attempt = self.attempt
            failure = self._on_message(message) if message is not None else None
            return attempt, self._tick() or failure

    def tick(self) -> JobFailedError | None:
        """Time out overdue checkpoints and trigger the next one when it is due."""
        with self._lock:
            return self._tick()

    def _tick(self) -> JobFailedError | None:
        if self.attempt is None:
            return None
        now = self._now_ms()
        failure = None
        for checkpoint_id, pending in list(self.pending.items()):
            if pending.timed_out(now, self.config.timeout_ms):
                missing = sorted(pending.expected - set(pending.acks))
                failure = self._abort(checkpoint_id, f"not acknowledged within {self.config.timeout_ms:.0f} ms "
                                                     f"by {self._describe_subtasks(missing)}") or failure
        due = should_trigger(now, self.config.interval_ms, self.last_trigger_ms, self.last_completion_ms,
                             self.config.min_pause_ms, len(self.pending), self.config.max_concurrent,
                             all_subtasks_running=self.control.all_registered)
        ready = self.control.all_registered
        stop = self.savepoints.stop_request
        if stop is not None and not self.stop_sent and ready:
            self.stop_sent = True
            log.info("Job '%s' stops with a savepoint%s", self.graph.job_name,
                     ", draining its input" if stop.drain else "")
            self.control.broadcast(StopSources(self.attempt, bool(stop.drain)))
        if self.final_checkpoint_due and due:
            failure = self._commit_final_checkpoint(now) or failure
        elif self.savepoints.waiting:  # no new checkpoint until it is taken: overlapping ones would starve it
            if not self.pending and ready and self._can_trigger():
                self._trigger(now, self.savepoints.waiting.pop(0))
        elif (due or (self.manual_requests and ready and len(self.pending) < self.config.max_concurrent)) \
                and self._can_trigger():
            self._trigger(now)
        return failure

    # -- messages from slots -------------------------------------------------------------------------

    def on_message(self, message: CheckpointMessage) -> JobFailedError | None:
        with self._lock:
            return self._on_message(message)

    def _on_message(self, message: CheckpointMessage) -> JobFailedError | None:
        if self.attempt is None or message.attempt != self.attempt:
            if isinstance(message, AcknowledgeCheckpoint):  # of an attempt that is over: never needed
                self._discard_state(message, AckResult.DISCARDED)
            return None
        if isinstance(message, AcknowledgeCheckpoint):
            return self._on_ack(message)
        if isinstance(message, DeclineCheckpoint):
            return self._on_decline(message)
        if isinstance(message, SubtaskFinished):
            return self._on_finished(message)
        return None

    # -- carrying decisions out (lock held) ----------------------------------------------------------

    def _can_trigger(self) -> bool:
        """Checkpoints need a running source subtask to start them."""
        return not self.finished_subtasks or bool(self.source_subtasks - self.finished_subtasks)

    def _on_finished(self, message: SubtaskFinished) -> JobFailedError | None:
        subtask = SubtaskId(message.chain, message.subtask)
        finished = self._describe_subtasks([subtask])
        if message.state is None:  # a slot stores the final state before it says so: a bug, not an I/O error
            return JobFailedError(f"Job '{self.graph.job_name}': {finished} finished without a final state, so no "
                                  "later checkpoint could include it.")
        log.debug("%s finished", finished)
        self.finished_subtasks.add(subtask)
        final = SubtaskAck(subtask, tuple(message.state), source_positions=dict(message.source_positions))
        self.final_acks[subtask] = final
        failure = None
        for pending in list(self.pending.values()):  # it ended without the barrier: everything it did is before
            if subtask not in pending.acks and pending.acknowledge(final) is AckResult.SUCCESS:
                self._note_final_ack(pending.checkpoint_id, final)
                if pending.is_complete:
                    failure = self._commit(pending) or failure
        if self.finished_subtasks >= self.subtasks:
            # Every subtask finished: the job's final checkpoint, made of their final states, is what commits the
            # transactions their sinks pre-committed at the end of input (they wait for it before exiting).
            self.final_checkpoint_due = True
            failure = self._commit_final_checkpoint(self._now_ms()) or failure
        return failure

    def _new_pending(self, now: float, savepoint: bool = False) -> PendingCheckpoint:
        """The next checkpoint, pending, with the final state of every subtask that has finished in it."""
        checkpoint_id = self.next_id
        self.next_id = CheckpointId(self.next_id + 1)
        pending = self.pending[checkpoint_id] = PendingCheckpoint(checkpoint_id, now, self.subtasks)
        self.history.triggered(checkpoint_id, savepoint)
        for final in self.final_acks.values():
            pending.acknowledge(final)
            self._note_final_ack(checkpoint_id, final)
        return pending

    def _note_final_ack(self, checkpoint_id: CheckpointId, final: SubtaskAck) -> None:
        """A finished subtask's final state stands in for its part of ``checkpoint_id`` (it wrote nothing new)."""
        self.history.acknowledged(checkpoint_id, chain=final.subtask.chain, subtask=final.subtask.subtask,
                                  sync_ms=0.0, async_ms=0.0, alignment_ms=0.0, start_delay_ms=0.0, bytes=0,
                                  persisted_bytes=0, unaligned=False)

    def _commit_final_checkpoint(self, now: float) -> JobFailedError | None:
        self.last_trigger_ms = now
        pending = self._new_pending(now)
        checkpoint_id = pending.checkpoint_id
        self._attach_manual(checkpoint_id)  # the final checkpoint answers those asked for now
        log.debug("final checkpoint %d of job '%s'", checkpoint_id, self.graph.job_name)
        stop = self.savepoints.stop_request
        if stop is not None and stop.url is None:  # the stop's savepoint first: the job ends once it commits
            try:
                target = self.storage.savepoint_storage(stop.directory, checkpoint_id)
                Savepoints.store(self._completed(pending), self.storage, target)
                stop.url = target.url
            except Exception as exc:
                del self.pending[checkpoint_id]
                reason = f"writing the savepoint failed: {type(exc).__name__}: {exc}"
                self.history.failed(checkpoint_id, reason)
                self._resolve_manual(checkpoint_id, reason)
                return self._fail(checkpoint_id, reason)
        failure = self._commit(pending)
        if failure is None and checkpoint_id in self.completed_ids:
            self.final_checkpoint_due = False
            if stop is not None:
                self.savepoints.stopped(stop, self.attempt)
        return failure

    def _describe_subtasks(self, subtasks) -> str:
        return "; ".join(f"subtask {s.subtask} of {self.graph.chains[s.chain].describe()}" for s in subtasks)

    def _trigger(self, now: float, savepoint: SavepointRequest | None = None) -> None:
        target = None
        if savepoint is not None:
            target = self.savepoints.target(savepoint, self.storage, self.next_id)
            if target is None:
                return
        pending = self._new_pending(now, savepoint is not None)
        checkpoint_id = pending.checkpoint_id
        if savepoint is None:
            self._attach_manual(checkpoint_id)
            self.last_trigger_ms = now
            log.debug("triggering checkpoint %d", checkpoint_id)
            self.control.broadcast(TriggerCheckpoint(self.attempt, checkpoint_id,
                                                     triggered_at_ms=int(self.wall_clock() * 1000)))
            return
        self.savepoints.taking[checkpoint_id] = (savepoint, target)
        log.info("Triggering savepoint %d of job '%s' into %s", checkpoint_id, self.graph.job_name, target.url)
        self.control.broadcast(TriggerCheckpoint(self.attempt, checkpoint_id, target.url,
                                                 int(self.wall_clock() * 1000)))
        if pending.is_complete:  # every subtask had finished already
            self._commit(pending)

    def _on_ack(self, message: AcknowledgeCheckpoint) -> JobFailedError | None:
        pending = self.pending.get(message.checkpoint_id) or self.aborted.get(message.checkpoint_id)
        ack = SubtaskAck(SubtaskId(message.chain, message.subtask), tuple(message.state), message.sync_ms,
                         message.async_ms, message.alignment_ms, dict(message.source_positions),
                         message.start_delay_ms, message.persisted_bytes, message.unaligned)
        result = pending.acknowledge(ack) if pending is not None else AckResult.DISCARDED
        if result is AckResult.SUCCESS:
            self.history.acknowledged(
                message.checkpoint_id, chain=message.chain, subtask=message.subtask, sync_ms=message.sync_ms,
                async_ms=message.async_ms, alignment_ms=message.alignment_ms, start_delay_ms=message.start_delay_ms,
                bytes=sum(h.uploaded_bytes(message.checkpoint_id) for h in message.state),
                persisted_bytes=message.persisted_bytes, unaligned=message.unaligned)
            return self._commit(pending) if pending.is_complete else None
        if result is AckResult.DUPLICATE:
            log.warning("checkpoint %d: duplicate acknowledgement from %s ignored", message.checkpoint_id,
                        self._describe_subtasks([ack.subtask]))
        else:
            self._discard_state(message, result)
        return None

    def _discard_state(self, message: AcknowledgeCheckpoint, result: AckResult) -> None:
        if message.checkpoint_id in self.completed_ids:  # never touch the files of a committed checkpoint
            return
        savepoint = self.savepoints.given_up.get(message.checkpoint_id)
        if savepoint is not None:  # written after the savepoint was given up: its directory goes
            Savepoints.delete(savepoint)
            return
        log.debug("checkpoint %d: %s acknowledgement, discarding its %d state file(s)", message.checkpoint_id,
                  result.value, len(message.state))
        try:
            self.storage.discard_state(message.checkpoint_id, message.state)
        except Exception:  # files no checkpoint references are never restored; retention removes them later
            log.debug("could not discard state of checkpoint %d", message.checkpoint_id, exc_info=True)

    def _on_decline(self, message: DeclineCheckpoint) -> JobFailedError | None:
        who = self._describe_subtasks([SubtaskId(message.chain, message.subtask)])
        reason = f"{who} declined: {message.reason}"
        if message.kind is DeclineKind.FATAL:
            failure = self._abort(message.checkpoint_id, reason, count_failure=False)
            return failure or JobFailedError(
                f"Job '{self.graph.job_name}': checkpoint {message.checkpoint_id} failed: {reason}. Every later "
                "checkpoint would fail the same way, so the job was not restarted.", retryable=False)
        return self._abort(message.checkpoint_id, reason, count_failure=message.kind is DeclineKind.FAILED)

    def _completed(self, pending: PendingCheckpoint) -> CompletedCheckpoint:
        stats = pending.stats(self._now_ms(), completed_at=round(self.wall_clock(), 3))
        operators = [(node.uid, node.name, node.parallelism) for node in self.graph.operators]
        return CompletedCheckpoint.from_acks(pending, self.graph.job_name, operators, self.graph.max_parallelism,
                                             self.attempt, int(self.wall_clock() * 1000), stats)

    def _commit_savepoint(self, pending: PendingCheckpoint) -> None:
        """A savepoint completes: written in its own directory, never retained or deleted by the job, and not
        notified (as in Flink: sinks commit with the next checkpoint; restores never fall back to it)."""
        checkpoint_id = pending.checkpoint_id
        del self.pending[checkpoint_id]
        request, target = self.savepoints.taking.pop(checkpoint_id)
        try:
            checkpoint = Savepoints.store(self._completed(pending), self.storage, target)
        except Exception as exc:
            self._give_up_savepoint(checkpoint_id, request, target, f"writing it failed: {type(exc).__name__}: {exc}")
            return
        log.info("Savepoint %d of job '%s' stored at %s: %d bytes in %.0f ms", checkpoint_id, self.graph.job_name,
                 target.url, checkpoint.bytes, checkpoint.stats.duration_ms)
        self.history.completed(checkpoint_id, checkpoint.bytes, checkpoint.bytes)
        request.done(target.url, None)

    def _give_up_savepoint(self, checkpoint_id: CheckpointId, request: SavepointRequest, target: SavepointStorage,
                           reason: str) -> None:
        self.history.failed(checkpoint_id, reason)
        self.savepoints.give_up(checkpoint_id, request, target, reason)

    def _commit(self, pending: PendingCheckpoint) -> JobFailedError | None:
        checkpoint_id = pending.checkpoint_id
        if checkpoint_id in self.savepoints.taking:
            return self._commit_savepoint(pending)
        checkpoint = self._completed(pending)
        gone = self._gone_shared_files(checkpoint)
        if gone:
            return self._abort(checkpoint_id, f"it references shared files that retention deleted while it was being "
                                              f"taken ({', '.join(gone[:3])}); the next checkpoint stores their state "
                                              "anew", count_failure=False)
        del self.pending[checkpoint_id]
        now = self._now_ms()
        stats = checkpoint.stats
        try:
            self.storage.write_metadata(checkpoint)
        except Exception as exc:  # the commit marker could not be written: this checkpoint failed
            self.aborted[checkpoint_id] = pending
            pending.discard()
            self._forget_old_aborts()
            reason = f"writing _metadata failed: {type(exc).__name__}: {exc}"
            self.history.failed(checkpoint_id, reason)
            self._resolve_manual(checkpoint_id, reason)
            return self._fail(checkpoint_id, reason)
        self.completed_ids.append(checkpoint_id)
        self.stats.append(stats)
        self.failures.succeeded()
        self.last_completion_ms = now
        full_bytes = sum(h.full_bytes for h in checkpoint.state_handles)
        self.history.completed(checkpoint_id, stats.bytes, full_bytes)
        self._resolve_manual(checkpoint_id, None)
        log.info("Checkpoint %d of job '%s' complete in %.0f ms: %s stored%s (sync %.1f ms, async %.0f ms, alignment "
                 "%.1f ms, start delay %.1f ms)%s", checkpoint_id, self.graph.job_name, stats.duration_ms,
                 human_bytes(stats.bytes), f" of {human_bytes(full_bytes)}" if full_bytes != stats.bytes else "",
                 stats.sync_ms, stats.async_ms, stats.alignment_ms, stats.start_delay_ms,
                 f", unaligned: {human_bytes(stats.persisted_bytes)} in flight" if stats.unaligned else "")
        self.control.broadcast(NotifyCheckpointComplete(self.attempt, checkpoint_id))
        # A pending checkpoint may refer to shared files that the subsumed ones release (a subtask that had not
        # heard of a newer checkpoint when its barrier came reuses the files of the one it had heard of): it is
        # then aborted when it completes (_gone_shared_files), and the next one stores that state anew.
        self.store.add(checkpoint, frozenset(self.pending))
        return None

    def _delete_unreferenced_final_states(self) -> None:
        """Final states of finished subtasks that no checkpoint references any more. Only between attempts and
        at the end, when no slot is writing one (a final state is stored before its subtask says so), and only
        when every checkpoint's metadata could be read: one that could not may reference any of them."""
        token_of = self.storage.final_state_token
        referenced, shared = set(), set()
        try:
            for entry in self.storage.survey():
                if entry.status is CheckpointStatus.UNREADABLE:
                    return
                if entry.checkpoint is not None:
                    referenced.update(token_of(h) for h in entry.checkpoint.state_handles)
                    shared.update(entry.checkpoint.shared_paths())
            for token in self.storage.final_state_tokens():
                if token not in referenced:
                    self.storage.delete_final_state(token)
            # Files of incremental checkpoints that never completed (aborted, or their attempt failed).
            self.storage.delete_shared(sorted(set(self.storage.shared_files()) - shared))
        except Exception as exc:  # best effort: the next commit tries again
            log.debug("could not delete final states or unreferenced shared files: %s", exc)

    def _gone_shared_files(self, checkpoint: CompletedCheckpoint) -> list[str]:
        """Shared files ``checkpoint`` references that are not there any more. Only files it did not store itself
        and no retained checkpoint references are looked at (normally none: no storage call)."""
        if not self.store.loaded:
            self.store.load()
        retained = self.store.shared_paths()
        unsure = sorted({f.path for h in checkpoint.state_handles for f in h.shared
                         if f.uploaded_in != checkpoint.checkpoint_id and f.path not in retained})
        return [path for path in unsure if not self.storage.shared_file_exists(path)]

    def _abort_all(self, reason: str) -> None:
        for checkpoint_id in list(self.pending):
            self._abort(checkpoint_id, reason, count_failure=False)

    def _abort(self, checkpoint_id: CheckpointId, reason: str, count_failure: bool = True) -> JobFailedError | None:
        pending = self.pending.pop(checkpoint_id, None)
        if pending is None:
            return None
        pending.discard()
        self._resolve_manual(checkpoint_id, reason)
        if checkpoint_id in self.savepoints.taking:  # a failed savepoint fails no job (Flink's too)
            request, target = self.savepoints.taking.pop(checkpoint_id)
            self._give_up_savepoint(checkpoint_id, request, target, reason)
            self.aborted[checkpoint_id] = pending
            self._forget_old_aborts()
            if self.control is not None and self.attempt is not None:
                self.control.broadcast(NotifyCheckpointAborted(self.attempt, checkpoint_id))
            return None
        self.aborted[checkpoint_id] = pending
        self._forget_old_aborts()
        self.history.failed(checkpoint_id, reason)
        # Expected aborts (the input ended mid-checkpoint) are not the user's concern; failures are.
        log.log(logging.WARNING if count_failure else logging.INFO, "checkpoint %d aborted: %s", checkpoint_id, reason)
        if self.control is not None and self.attempt is not None:
            self.control.broadcast(NotifyCheckpointAborted(self.attempt, checkpoint_id))
        try:
            self.storage.delete_checkpoint(checkpoint_id)
        except Exception:  # leftover files without _metadata are never restored
            log.debug("could not delete aborted checkpoint %d", checkpoint_id, exc_info=True)
        if not count_failure:
            return None
        return self._fail(checkpoint_id, reason)

    def _forget_old_aborts(self) -> None:
        while len(self.aborted) > _ABORTED_REMEMBERED:
            del self.aborted[min(self.aborted)]

    def _fail(self, checkpoint_id: CheckpointId, reason: str) -> JobFailedError | None:
        return self.failures.failed(checkpoint_id, reason)
