"""The driver's side of one job: launch, watch, finish, fail or cancel.

Lifecycle: CREATED -> RUNNING -> FINISHED | FAILED | CANCELLING -> CANCELED. Everything that happens
(tasks' reports through the control server, the Spark stage's outcome, a cancel request) arrives on one
event queue and is handled by whichever thread waits for the result, so no state is shared between
threads but the queue.
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
from runtime.control_server import ControlServer, SlotDisconnected
from runtime.errors import JobCancelledError, JobFailedError
from runtime.failure_diagnosis import FailureEvidence, diagnose
from runtime.graph import JobGraph
from runtime.launcher import BarrierStage, StageCompleted, StageFailed
from runtime.messages import Cancel, TaskFailed
from runtime.result import JobResult, JobStatus
from runtime.task import barrier_task

__all__ = ["JobRun"]

log = logging.getLogger(__name__)

# After a first failure report, wait this long for others: a peer's "connection lost" can overtake the
# report of the operator that really failed.
FAILURE_GRACE_S = 1.0
# How long to wait for the Spark stage to end after cancelling it.
STAGE_STOP_TIMEOUT_S = 60.0


class _CancelRequested:
    pass


def _driver_host(spark) -> str:
    return spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")


class JobRun:
    def __init__(self, graph: JobGraph, spark, sinks: dict[str, Any]):
        self.graph = graph
        self.spark = spark
        self.sinks = sinks  # sink uid -> the user's Sink object (driver side)
        self.job_id = uuid.uuid4().hex
        self.status = JobStatus.CREATED
        self.events: queue.Queue = queue.Queue()
        self.attempt = 0
        self._outcome: JobResult | BaseException | None = None
        self._wait_lock = threading.Lock()
        self._started = 0.0
        self.registered_pids: list[int] = []
        self.data_addresses: list[tuple[str, int]] = []

    def start(self) -> None:
        graph = self.graph
        self._started = time.monotonic()
        self.control = ControlServer(_driver_host(self.spark), self.attempt, graph.slots, self.events)
        payload = cloudpickle.dumps(graph)
        task = barrier_task(payload, self.control.address, self.attempt)
        self.stage = BarrierStage(self.spark, f"chandy-{self.job_id}-{self.attempt}",
                                  f"Chandy job '{graph.job_name}' attempt {self.attempt}", graph.slots, task,
                                  self.attempt, self.events)
        self.status = JobStatus.RUNNING
        log.info("Launching %s", graph.describe())
        self.stage.start()

    def cancel(self) -> None:
        self.events.put(_CancelRequested())
        try:
            self.wait()
        except JobCancelledError:
            pass

    def wait(self, timeout: float | None = None) -> JobResult:
        with self._wait_lock:
            if self._outcome is None:
                self._outcome = self._drive(timeout)
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    # -- the event loop -------------------------------------------------------------------------------

    def _drive(self, timeout: float | None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                raise TimeoutError(f"Job '{self.graph.job_name}' still running after {timeout} s") from None
            if getattr(event, "attempt", self.attempt) != self.attempt:
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
        self._stop_everything("another task failed")
        self.status = JobStatus.FAILED
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
        return JobResult(self.job_id, self.graph.job_name, runtime_ms, results, collect_sinks)
