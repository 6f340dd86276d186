"""The driver's side of one job: attempts, restarts, checkpoints, and how the job ends.

Lifecycle: CREATED -> RUNNING -> (RESTARTING -> RUNNING)* -> FINISHED | FAILED | CANCELLING -> CANCELED.
A job master thread owns everything: it launches an attempt (one barrier stage), then handles events from
one queue (task reports via the control server, the stage's outcome, cancel requests) and the checkpoint
coordinator's timer. When an attempt fails and the restart strategy allows, the next attempt restores the
newest checkpoint of this execution whose files are all present (else an older one, else the checkpoint
the job was started from, else nothing).
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
import time
import uuid
from typing import Any

import cloudpickle

from operators.sinks import CollectSink
from runtime.checkpoint_config import RestartStrategy
from runtime.driver.coordinator import CheckpointCoordinator
from runtime.driver.control_server import ControlServer, SlotDisconnected
from runtime.errors import CorruptCheckpointError, JobCancelledError, JobFailedError
from runtime.driver.failure_diagnosis import FailureEvidence, diagnose
from runtime.graph.job_graph import JobGraph
from runtime.driver.launcher import BarrierStage, StageCompleted, StageFailed
from runtime.protocol.messages import (
    AcknowledgeCheckpoint,
    Cancel,
    DeclineCheckpoint,
    SubtaskFinished,
    TaskFailed,
)
from runtime.driver.restore_plan import plan_restore
from runtime.driver.result import JobResult, JobStatus
from runtime.executor.entry import barrier_task

__all__ = ["JobRun"]

log = logging.getLogger(__name__)

# After a first failure report, wait this long for others: a peer's "connection lost" can overtake the
# report of the operator that really failed.
FAILURE_GRACE_S = 1.0
# How long to wait for the Spark stage to end after cancelling it.
STAGE_STOP_TIMEOUT_S = 60.0
_CHECKPOINT_MESSAGES = (AcknowledgeCheckpoint, DeclineCheckpoint, SubtaskFinished)


class _CancelRequested:
    pass


def _driver_host(spark) -> str:
    return spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")


class JobRun:
    def __init__(self, graph: JobGraph, spark, sinks: dict[str, Any], restart: RestartStrategy,
                 coordinator: CheckpointCoordinator | None = None, restore: tuple | None = None):
        self.graph = graph
        self.spark = spark
        self.sinks = sinks  # sink uid -> the user's Sink object (driver side)
        self.restart = restart
        self.coordinator = coordinator
        self.initial_restore = restore  # (storage, validated metadata) or None
        self.job_id = uuid.uuid4().hex
        self.status = JobStatus.CREATED
        self.events: queue.Queue = queue.Queue()
        self.attempt = 0
        self.restarts = 0
        self.restored_from: list[int | None] = []
        self._outcome: JobResult | BaseException | None = None
        self._done = threading.Event()
        self._started = 0.0
        self._payload = cloudpickle.dumps(graph)
        self.registered_pids: list[int] = []
        self.data_addresses: list[tuple[str, int]] = []

    # -- the user's side -----------------------------------------------------------------------------

    def start(self) -> None:
        self._started = time.monotonic()
        log.info("Launching %s", self.graph.describe())
        self._master = threading.Thread(target=self._run_master, name=f"chandy-master-{self.job_id[:8]}",
                                        daemon=True)
        self._master.start()

    def cancel(self) -> None:
        self.events.put(_CancelRequested())
        self._done.wait()

    def wait(self, timeout: float | None = None) -> JobResult:
        if not self._done.wait(timeout):
            raise TimeoutError(f"Job '{self.graph.job_name}' still running after {timeout} s")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    # -- the master thread ---------------------------------------------------------------------------

    def _run_master(self) -> None:
        try:
            self._outcome = self._run_attempts()
        except BaseException as exc:  # a bug of ours must still end the job visibly
            log.exception("job master failed")
            self.status = JobStatus.FAILED
            self._outcome = exc
        finally:
            self._done.set()

    def _run_attempts(self):
        restore = self.initial_restore
        while True:
            outcome = self._run_attempt(restore)
            if not isinstance(outcome, JobFailedError):
                return outcome
            if self.restarts >= self.restart.max_attempts:
                if self.restarts:
                    outcome.args = (f"{outcome.args[0]}\n(after {self.restarts} restart(s); the restart strategy "
                                    f"allows {self.restart.max_attempts})",)
                self.status = JobStatus.FAILED
                return outcome
            self.restarts += 1
            self.status = JobStatus.RESTARTING
            log.warning("Job '%s' attempt %d failed, restarting in %.0f ms (restart %d of %d): %s",
                        self.graph.job_name, self.attempt, self.restart.delay_ms, self.restarts,
                        self.restart.max_attempts, str(outcome).splitlines()[0])
            if self._cancelled_while_waiting(self.restart.delay_ms / 1000.0):
                self.status = JobStatus.CANCELED
                return JobCancelledError(f"Job '{self.graph.job_name}' ({self.job_id}) was cancelled")
            restore = self._choose_restore()
            self.attempt += 1

    def _cancelled_while_waiting(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                if isinstance(self.events.get(timeout=remaining), _CancelRequested):
                    return True
            except queue.Empty:
                break
        return False

    def _choose_restore(self) -> tuple | None:
        """Newest usable checkpoint of this execution, else the one the job started from, else None."""
        if self.coordinator is not None:
            storage = self.coordinator.storage
            for checkpoint_id in reversed(self.coordinator.completed_ids):
                try:
                    return storage, storage.validated_metadata(checkpoint_id)
                except CorruptCheckpointError as exc:
                    log.warning("Not restoring checkpoint %d: %s", checkpoint_id, exc)
        return self.initial_restore

    def _run_attempt(self, restore: tuple | None):
        graph = self.graph
        restore_payload = None
        if restore is not None:
            storage, metadata = restore
            restore_payload = pickle.dumps((storage, plan_restore(metadata, graph)))
            log.info("Attempt %d restores checkpoint %d", self.attempt, metadata["checkpoint_id"])
        self.restored_from.append(restore[1]["checkpoint_id"] if restore else None)
        self.control = ControlServer(_driver_host(self.spark), self.attempt, graph.slots, self.events)
        task = barrier_task(self._payload, self.control.address, self.attempt, restore_payload)
        self.stage = BarrierStage(self.spark, f"chandy-{self.job_id}-{self.attempt}",
                                  f"Chandy job '{graph.job_name}' attempt {self.attempt}", graph.slots, task,
                                  self.attempt, self.events)
        self.status = JobStatus.RUNNING
        self.stage.start()
        coordinator = self.coordinator
        if coordinator is not None:
            coordinator.start_attempt(self.attempt, self.control)
        while True:
            try:
                event = self.events.get(timeout=coordinator.next_wakeup() if coordinator else None)
            except queue.Empty:
                event = None
            if coordinator is not None and (event is None or coordinator.next_wakeup() <= 0.001):
                failure = coordinator.tick()
                if failure is not None:
                    return self._fail(failure)
            if event is None or getattr(event, "attempt", self.attempt) != self.attempt:
                continue
            if isinstance(event, StageCompleted):
                return self._finish(event.results)
            if isinstance(event, (TaskFailed, StageFailed, SlotDisconnected)):
                return self._fail(diagnose(self.graph.job_name, self._gather_evidence(event)))
            if isinstance(event, _CancelRequested):
                self.status = JobStatus.CANCELLING
                self._stop_everything("cancelled by the user")
                self.status = JobStatus.CANCELED
                return JobCancelledError(f"Job '{self.graph.job_name}' ({self.job_id}) was cancelled")
            if coordinator is not None and isinstance(event, _CHECKPOINT_MESSAGES):
                failure = coordinator.on_message(event)
                if failure is not None:
                    return self._fail(failure)

    def _gather_evidence(self, first) -> FailureEvidence:
        """The first failure event plus whatever else arrives within the grace period."""
        evidence = FailureEvidence()
        deadline = time.monotonic() + FAILURE_GRACE_S
        event = first
        while True:
            if getattr(event, "attempt", self.attempt) == self.attempt:
                if isinstance(event, TaskFailed):
                    evidence.reports.append(event)
                elif isinstance(event, SlotDisconnected):
                    evidence.disconnected_slots.append(event.slot)
                elif isinstance(event, StageFailed):
                    evidence.stage_error = event.error
            if evidence.has_operator_error:
                return evidence
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return evidence
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                return evidence

    # -- endings --------------------------------------------------------------------------------------

    def _stop_everything(self, reason: str) -> None:
        self.control.broadcast(Cancel(self.attempt, reason))
        self.stage.cancel()
        if not self.stage.join(STAGE_STOP_TIMEOUT_S):
            log.warning("Spark stage of job %s did not stop within %s s", self.job_id, STAGE_STOP_TIMEOUT_S)
        if not self.control.wait_until_all_disconnected(STAGE_STOP_TIMEOUT_S):
            log.warning("Some tasks of job %s still hold their control connection", self.job_id)
        self._remember_tasks()
        self.control.close()

    def _remember_tasks(self) -> None:
        registrations = self.control.registrations
        self.registered_pids = [r.pid for r in registrations.values()]
        self.data_addresses = [(r.host, r.port) for r in registrations.values()]

    def _fail(self, error: JobFailedError) -> JobFailedError:
        log.error("%s", error)
        self._stop_everything("the job attempt failed")
        return error

    def _finish(self, blobs: list) -> JobResult:
        self._remember_tasks()
        self.control.close()
        per_uid: dict[str, list] = {}
        for blob in blobs:
            for uid, value in pickle.loads(blob).items():
                per_uid.setdefault(uid, []).append(value)
        results = {uid: self.sinks[uid].merge_results(values) for uid, values in per_uid.items()}
        collect_sinks = {sink.name: uid for uid, sink in self.sinks.items() if isinstance(sink, CollectSink)}
        self.status = JobStatus.FINISHED
        runtime_ms = int((time.monotonic() - self._started) * 1000)
        checkpoints = []
        if self.coordinator is not None:
            self.coordinator.finish()
            checkpoints = list(self.coordinator.stats)
        return JobResult(self.job_id, self.graph.job_name, runtime_ms, results, collect_sinks,
                         checkpoints=checkpoints, restarts=self.restarts, restored_from=list(self.restored_from))
