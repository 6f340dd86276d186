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

from runtime.control_server import ControlServer, SlotDisconnected
from runtime.errors import JobCancelledError, JobFailedError
from runtime.graph import JobGraph
from runtime.launcher import BarrierStage, StageCompleted, StageFailed
from runtime.messages import Cancel, TaskFailed, TaskFinished
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
            if isinstance(event, TaskFailed):
                return self._fail(self._error_from_reports(event))
            if isinstance(event, StageFailed):
                report = self._await_report()
                return self._fail(self._error_from_reports(report) if report else self._error_from_spark(event))
            if isinstance(event, SlotDisconnected):
                report = self._await_report()
                if report is not None:
                    return self._fail(self._error_from_reports(report))
                return self._fail(JobFailedError(
                    f"Job '{self.graph.job_name}': the task in slot {event.slot} died without reporting an error "
                    "(its Python worker was killed, ran out of memory, or its executor was lost)."))
            if isinstance(event, _CancelRequested):
                self.status = JobStatus.CANCELLING
                self._stop_everything("cancelled by the user")
                self.status = JobStatus.CANCELED
                return JobCancelledError(f"Job '{self.graph.job_name}' ({self.job_id}) was cancelled")
            if isinstance(event, TaskFinished):
                continue

    def _await_report(self) -> TaskFailed | None:
        """A failure report that may still be on its way, if one comes within the grace period."""
        deadline = time.monotonic() + FAILURE_GRACE_S
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                return None
            if isinstance(event, TaskFailed) and event.attempt == self.attempt:
                return event
        return None

    def _error_from_reports(self, first: TaskFailed) -> JobFailedError:
        # Prefer an operator's own error over a consequential runtime error of a peer.
        reports = [first]
        deadline = time.monotonic() + (FAILURE_GRACE_S if first.operator_name is None else 0)
        while first.operator_name is None and (remaining := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                break
            if isinstance(event, TaskFailed) and event.attempt == self.attempt:
                reports.append(event)
                if event.operator_name is not None:
                    break
        report = next((r for r in reports if r.operator_name is not None), first)
        where = f"operator '{report.operator_name}'" if report.operator_name else "the Chandy runtime"
        error = JobFailedError(
            f"Job '{self.graph.job_name}' failed: {where} (subtask {report.subtask}) raised "
            f"{report.error_type}: {report.error_message}",
            operator_name=report.operator_name, subtask=report.subtask, user_traceback=report.traceback)
        if report.exception is not None:
            try:
                error.__cause__ = pickle.loads(report.exception)
            except Exception:  # the class may not exist on the driver
                pass
        return error

    def _error_from_spark(self, event: StageFailed) -> JobFailedError:
        text = str(event.error).strip().splitlines()
        summary = next((line for line in text if "Exception" in line or "Error" in line), text[0] if text else "")
        error = JobFailedError(f"Job '{self.graph.job_name}' failed in Spark before a task reported an error: "
                               f"{summary[:500]}")
        error.__cause__ = event.error
        return error

    # -- endings --------------------------------------------------------------------------------------

    def _stop_everything(self, reason: str) -> None:
        self.control.broadcast(Cancel(self.attempt, reason))
        self.stage.cancel()
        if not self.stage.join(STAGE_STOP_TIMEOUT_S):
            log.warning("Spark stage of job %s did not stop within %s s", self.job_id, STAGE_STOP_TIMEOUT_S)
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
        collect_ids: dict[str, str] = {}
        for uid, sink in self.sinks.items():
            if hasattr(sink, "id"):
                collect_ids[sink.id] = uid
                collect_ids[sink.name] = uid
        self.status = JobStatus.FINISHED
        runtime_ms = int((time.monotonic() - self._started) * 1000)
        return JobResult(self.job_id, self.graph.job_name, runtime_ms, results, collect_ids)
