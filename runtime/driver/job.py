"""The job master: the driver's side of one job's attempts, restarts and ending.

One thread owns the job. It launches an attempt (one barrier stage), then handles the events of one queue,
each by the handler its type names: what slots report through the control server (a failure, a lost
connection), the stage's outcome, a cancel request, and a checkpoint failure the coordinator could not
tolerate. Checkpoint messages never pass through here: the control server hands them to the checkpoint
coordinator's own thread. The job's status changes only through :class:`~runtime.driver.lifecycle.JobLifecycle`.

When an attempt fails, :func:`~runtime.driver.failure_diagnosis.decide_restart` says whether a restart can
help; the next attempt restores the newest checkpoint of this execution whose files are all present (else an
older one, else the checkpoint the job was started from, else nothing).
"""

from __future__ import annotations

import logging
import pickle
import queue
import re
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable


from operators.sinks import CollectSink
from runtime.checkpoint_config import RestartStrategy
from runtime.driver import recovery_timeline as recovery
from runtime.driver.control_server import ControlServer, SlotDisconnected, SlotUnresponsive
from runtime.driver.coordinator import CheckpointCoordinator, CheckpointRequest
from runtime.driver.coordinator_loop import CoordinatorLoop
from runtime.driver.savepoints import SavepointRequest
from runtime.driver.failure_diagnosis import Diagnosis, FailureEvidence, decide_restart, diagnose
from runtime.driver.launcher import BarrierStage, StageCompleted, StageFailed, require_slots
from runtime.driver.lifecycle import JobLifecycle
from runtime.driver.metrics import JobMetrics
from runtime.driver.progress import ProgressLine
from runtime.driver.queryable_state import QueryableStateRouter
from runtime.driver.restore_plan import RestorePoint, newest_restorable, plan_restore
from runtime.driver.result import JobResult, JobStatus
from runtime.driver.web import DashboardSettings, dashboard_for
from runtime.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    InsufficientSlotsError,
    JobCancelledError,
    JobFailedError,
    ProtocolError,
    SavepointError,
    StorageUnreachableError,
)
from runtime.executor.entry import barrier_task
from runtime.graph import pickling
from runtime.graph.job_graph import JobGraph
from runtime.ids import Attempt
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsMaterial
from runtime.protocol import startup as marks
from runtime.protocol.messages import Cancel, FailurePhase, SlotFailed, StopSources

__all__ = ["JobMaster", "CancelRequested", "CheckpointFailure"]

log = logging.getLogger(__name__)

# After a first failure report, wait up to this long for others: a peer's "connection lost" can overtake the
# report of the operator that really failed (JobMaster._gather_evidence says when the wait ends sooner).
FAILURE_GRACE_S = 1.0
# How long to wait for the Spark stage to end after cancelling it.
STAGE_STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CancelRequested:
    """The user called ``JobClient.cancel()``."""


@dataclass(frozen=True)
class CheckpointFailure:
    """The coordinator gave up: more checkpoint failures in a row than tolerated, or one that would repeat."""

    attempt: Attempt
    error: JobFailedError


def _driver_host(spark) -> str:
    context = spark.sparkContext
    # The context's own conf answers in one py4j call; getConf() copies every entry first (~13 ms a call).
    conf = getattr(context, "_conf", None) or context.getConf()
    return conf.get("spark.driver.host", "127.0.0.1")


class JobMaster:
    def __init__(self, graph: JobGraph, spark, sinks: dict[str, Any], restart: RestartStrategy,
                 coordinator: CheckpointCoordinator | None = None, restore: RestorePoint | None = None,
                 dashboard: DashboardSettings | None = None, progress: bool = False, tls: TlsMaterial | None = None,
                 restart_chosen: bool = False, startup: dict[str, float] | None = None):
        self.graph = graph
        # The driver's start-up marks (runtime.protocol.startup): execute()'s call and compile, given; then ours.
        self.startup: dict[str, float] = dict(startup or {})
        self.tls = tls  # None: internal connections are authenticated, not encrypted
        self.dashboard = dashboard  # None: no web server for this job
        self.web_server = None  # the driver's REST server that serves this job, once started
        self.progress: ProgressLine | None = ProgressLine(self) if progress else None
        self.spark = spark
        self.sinks = sinks  # sink uid -> the user's Sink object (driver side)
        self.restart = restart
        self.restart_chosen = restart_chosen  # the user set the strategy: it alone limits retries of a repeat
        self.coordinator = coordinator
        self.initial_restore = restore
        if coordinator is not None and restore is not None:
            coordinator.continue_after(restore.checkpoint.checkpoint_id)
        self.job_id = uuid.uuid4().hex
        self.lifecycle = JobLifecycle(graph.job_name)
        self.events: queue.Queue = queue.Queue()
        self.attempt = Attempt(0)
        self.restarts = 0
        self.failure_times: list[float] = []  # monotonic seconds of the failures the restart strategy judged
        self.restored_from: list[int | None] = []
        # Each failed attempt's handling on the wall clock (runtime.driver.recovery_timeline), oldest first.
        self.recovery_marks: list[dict[str, float]] = []
        self.unrestorable: set[int] = set()  # checkpoints whose state an executor found corrupt while restoring
        self.queryable_state = QueryableStateRouter(
            {node.uid: chain.parallelism for chain in graph.chains for node in chain.operators}, graph.max_parallelism)
        self._outcome: JobResult | BaseException | None = None
        self._done = threading.Event()
        self._started = 0.0
        self._payload = pickling.dumps(graph)  # user code keeps its file names for executors' tracebacks
        self.startup[marks.PICKLED] = time.time()
        self.registered_pids: list[int] = []
        self.data_addresses: list[tuple[str, int]] = []
        self.coordinator_loop: CoordinatorLoop | None = None
        self.metrics = JobMetrics(graph)
        self.exceptions: list[dict] = []  # each failed attempt: its cause, with the user's traceback (newest last)
        self.started_ms: int | None = None  # wall clock, epoch ms
        self.ended_ms: int | None = None
        self.dashboard_url: str | None = None  # where the driver's web server shows this job, if it runs
        self.dashboard_url_with_token: str | None = None  # the same, for a browser that may act on the job
        self._cancel_requested = False  # a cancel that arrived while the master was busy with something else
        self._handlers: dict[type, Callable[[Any], Any]] = {
            StageCompleted: lambda event: self._finish(event.results),
            SlotFailed: self._attempt_failed,
            StageFailed: self._attempt_failed,
            SlotDisconnected: self._attempt_failed,
            SlotUnresponsive: self._attempt_failed,
            CheckpointFailure: self._checkpoint_failed,
            CancelRequested: lambda event: self._cancel(),
        }

    @property
    def status(self) -> JobStatus:
        return self.lifecycle.status

    @property
    def job_name(self) -> str:
        return self.graph.job_name

    # -- the user's side -----------------------------------------------------------------------------

    def start(self) -> None:
        self._started = time.monotonic()
        self.started_ms = int(time.time() * 1000)
        graph = self.graph
        parallelism = max(chain.parallelism for chain in graph.chains)
        if self.coordinator is not None:
            config, settings = self.coordinator.config, graph.checkpointing
            mode = "at-least-once" if not settings.exactly_once else (
                "exactly-once, unaligned" if settings.unaligned else "exactly-once, aligned")
            checkpoints = (f"checkpoints every {config.interval_ms:.0f} ms to {self.coordinator.storage.url} "
                           f"(job directory {self.coordinator.storage.job_dir}; {mode})")
        else:
            checkpoints = "no checkpoints"
        checkpoints += f", state in {graph.state_backend!r}"  # what was configured: a typo shows here
        server = None
        if self.dashboard is not None:  # with checkpointing, the REST API is the job's control plane too
            server = dashboard_for(_driver_host(self.spark), self.dashboard, control=self.coordinator is not None)
        self.web_server = server
        if server is not None:
            server.register(self, private=not self.dashboard.enabled)
            if self.dashboard.enabled and server.serves_dashboard:
                self.dashboard_url = f"{server.url}/#/jobs/{self.job_id}"
                self.dashboard_url_with_token = f"{server.url}/?token={server.guard.token}#/jobs/{self.job_id}"
        log.info("Job '%s' (%s) starting: parallelism %d, %d slots, %s%s", graph.job_name, self.job_id[:8],
                 parallelism, graph.slots, checkpoints, f"; dashboard {self.dashboard_url}" if self.dashboard_url
                 else "")
        log.debug("%s", graph.describe())
        if self.coordinator is not None:  # chandy savepoint / stop find the job through its storage
            self._publish_control(server)
        self._master = threading.Thread(target=self._run_master, name=f"chandy-master-{self.job_id[:8]}",
                                        daemon=True)
        self._master.start()
        if self.progress is not None:
            self.progress.start()

    def cancel(self) -> None:
        self.events.put(CancelRequested())
        self._done.wait()

    def request_cancel(self) -> None:
        """Cancel without waiting for the job to end (the REST API's ``PATCH /jobs/<id>``)."""
        self.events.put(CancelRequested())

    @property
    def ended(self) -> bool:
        return self._done.is_set()

    def trigger_checkpoint(self) -> Future:
        """Take a checkpoint now, whatever the interval; the future's result is its id once it completed.
        Raises CheckpointError when the job has no checkpointing."""
        if self.coordinator is None:
            raise CheckpointError(f"Job '{self.graph.job_name}' runs without checkpointing: enable it with "
                                  "env.enable_checkpointing(interval) to take checkpoints.")
        future: Future = Future()

        def done(checkpoint_id, error):
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(checkpoint_id)

        self.coordinator.request_checkpoint(CheckpointRequest(done))
        if self.coordinator_loop is not None:
            self.coordinator_loop.wake()
        return future

    def newest_checkpoint(self) -> tuple[int, str] | None:
        """The newest checkpoint this job could resume from: ``(id, its URL)``, or None."""
        own = self.coordinator.completed_checkpoints() if self.coordinator is not None else []
        if own:
            return own[-1], self.coordinator.storage.checkpoint_url(own[-1])
        if self.initial_restore is not None:
            checkpoint_id = self.initial_restore.checkpoint.checkpoint_id
            return checkpoint_id, self.initial_restore.storage.checkpoint_url(checkpoint_id)
        return None

    def trigger_savepoint(self, path: str | None = None, timeout: float | None = None) -> str:
        """Take a savepoint into a new directory under ``path`` (default: the job's ``savepoints`` directory
        in its checkpoint storage) and return its URL; raises SavepointError when none could be taken."""
        return self._savepoint(path, None, timeout)

    def stop_with_savepoint(self, path: str | None = None, drain: bool = False, timeout: float | None = None) -> str:
        """Stop the sources, take a final savepoint, let the sinks commit and end the job FINISHED; returns the
        savepoint's URL once the job has ended."""
        url = self._savepoint(path, bool(drain), timeout)
        self.wait(timeout)
        return url

    def _savepoint(self, path: str | None, drain: bool | None, timeout: float | None) -> str:
        what = "stop_with_savepoint()" if drain is not None else "trigger_savepoint()"
        if self.coordinator is None:
            raise SavepointError(f"{what}: job '{self.graph.job_name}' runs without checkpointing, and a savepoint is "
                                 "a checkpoint taken by hand. Call env.enable_checkpointing(interval_ms) first.")
        if self._done.is_set() or self.status.is_globally_terminal_state():
            raise SavepointError(f"{what}: job '{self.graph.job_name}' is {self.status.value}: no savepoint can be "
                                 "taken of a job that has ended.")
        config, storage = self.coordinator.config, self.coordinator.storage
        directory = path or config.savepoint_directory or storage.default_savepoint_url()
        try:  # a directory no filesystem can take fails here, in the caller's thread, not in the job
            storage.savepoint_storage(str(directory))
        except Exception as exc:
            raise SavepointError(f"{what}: cannot write a savepoint to {directory}: {exc}") from exc
        outcome: queue.Queue = queue.Queue(maxsize=1)
        self.coordinator.request_savepoint(SavepointRequest(str(directory),
                                                            lambda url, error: outcome.put((url, error)), drain))
        if self.coordinator_loop is not None:
            self.coordinator_loop.wake()
        try:
            url, error = outcome.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{what}: no savepoint of job '{self.graph.job_name}' within {timeout} s") from None
        if error is not None:
            raise error
        return url

    def startup_phases(self, first_sink_record: float | None = None) -> dict[str, float | None]:
        """Milliseconds of each start-up phase of the current attempt, from execute()'s call (attempt 0: later ones
        count from it too) to the first record at a sink, ``first_sink_record`` if a sink noted it itself
        (:func:`runtime.protocol.startup.startup_phases`); the slots' marks come with their metrics reports."""
        driver = dict(self.startup)
        stage = getattr(self, "stage", None)
        if stage is not None and stage.submitted_at is not None:
            driver[marks.SUBMITTED] = stage.submitted_at
        return marks.startup_phases(driver, self.metrics.slot_startup(), first_sink_record)

    def recovery_phases(self, failed_at: float | None = None,
                        first_sink_record: float | None = None) -> dict[str, float | None] | None:
        """Milliseconds of each phase of the last restart, from the failure (``failed_at`` if the caller knows when
        it happened, else when the driver noticed it) to the restarted attempt's first record at a sink
        (:func:`runtime.driver.recovery_timeline.recovery_phases`); None before any failure."""
        if not self.recovery_marks:
            return None
        driver = dict(self.recovery_marks[-1])
        stage = getattr(self, "stage", None)
        if stage is not None and stage.submitted_at is not None and recovery.RELAUNCHED in driver:
            driver[marks.SUBMITTED] = stage.submitted_at
        return recovery.recovery_phases(driver, self.metrics.slot_startup(), failed_at, first_sink_record)

    def wait(self, timeout: float | None = None) -> JobResult:
        if not self._done.wait(timeout):
            raise TimeoutError(f"Job '{self.graph.job_name}' still running after {timeout} s")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    # -- the master thread ---------------------------------------------------------------------------

    def _run_master(self) -> None:
        if self.coordinator is not None:
            self.coordinator_loop = CoordinatorLoop(
                self.coordinator, lambda attempt, error: self.events.put(CheckpointFailure(attempt, error)))
        try:
            self._outcome = self._run_attempts()
        except BaseException as exc:  # a bug of ours must still end the job visibly
            log.exception("job master failed")
            try:
                self.lifecycle.transition(JobStatus.FAILED, f"{type(exc).__name__}: {exc}")
            except ProtocolError:
                pass
            self._outcome = exc
        finally:
            self.queryable_state.end(f"the job is {self.lifecycle.status.value}")
            if self.coordinator_loop is not None:
                self.coordinator_loop.stop()
            if self.coordinator is not None:
                self.coordinator.give_up_requests(f"the job is {self.lifecycle.status.value}")
                # Whatever the ending (a cancelled or failed job too): files of checkpoints that never completed
                # go, now that the slots have stopped writing.
                self.coordinator.finish()
                self.coordinator.discard_at_end(self.lifecycle.status.name)
            if self.coordinator is not None:
                self._withdraw_control()
            self.metrics.end()
            self.ended_ms = int(time.time() * 1000)
            if self.progress is not None:  # its last line before execute() returns and the program prints
                self.progress.close()
            self._done.set()

    def _publish_control(self, server) -> None:
        """Say in ``<job directory>/_job.json`` where the job's control plane, the driver's REST API, answers and
        with which token (and certificate, in HTTPS): ``chandy savepoint`` and ``chandy stop`` read it there."""
        storage, name = self.coordinator.storage, self.graph.job_name
        if server is None:
            log.warning("Job '%s': the driver's REST server is not running, so `chandy savepoint` and `chandy stop` "
                        "cannot reach this job (the program's JobClient still can)", name)
            return
        described = server.describe_for(self)
        if self.tls is not None and server.certificate is None:
            # The token would cross the network in clear text, which a job that encrypts did not agree to.
            del described["token"]
            described["unencrypted"] = ("the job encrypts its connections, but this driver's REST server (started "
                                        "by an earlier job of the process) speaks plain HTTP")
            log.warning("Job '%s' encrypts its connections, but this driver's REST server, started by an earlier job "
                        "of the process, speaks plain HTTP: its token is not published in _job.json, so `chandy "
                        "savepoint` and `chandy stop` cannot reach this job; the REST API at %s can, with the token "
                        "from the driver's log (in clear text)", name, server.url)
        try:
            storage.publish_job_control(described)
        except Exception as exc:  # the job runs without it: only the CLI cannot reach it
            log.warning("Job '%s': the chandy CLI will not find it (writing %s failed: %s)", name, storage.job_dir,
                        exc)

    def _withdraw_control(self) -> None:
        """Remove ``_job.json``, unless another run of the job has replaced it since (it names that run's id)."""
        try:
            if self.coordinator.storage.read_job_control().get("job_id") == self.job_id:
                self.coordinator.storage.remove_job_control()
        except CheckpointNotFoundError:
            pass
        except Exception:  # a file left behind names a job that no longer answers: the CLI says so
            log.debug("could not remove _job.json", exc_info=True)

    def _run_attempts(self):
        restore = self.initial_restore
        previous: Diagnosis | None = None
        while True:
            outcome = self._run_attempt(restore)
            if not isinstance(outcome, Diagnosis):
                return outcome
            if restore is not None and isinstance(outcome.error.__cause__, CorruptCheckpointError):
                # Its files passed the driver's checks but not the executor's (a checksum): never retried.
                self.unrestorable.add(restore.checkpoint.checkpoint_id)
                log.warning("Checkpoint %d cannot be restored: %s", restore.checkpoint.checkpoint_id,
                            outcome.error.__cause__)
            while True:  # a restart, once a restore point could be chosen
                if self._cancel_requested:  # e.g. Ctrl-C: Spark's stage was cancelled first, then the job
                    return self._cancel()
                falling_back = restore is not None and restore.checkpoint.checkpoint_id in self.unrestorable
                delay_ms = 0.0
                if not falling_back:
                    self.failure_times.append(time.monotonic())
                    failures = tuple(self.failure_times)
                    delay_ms = self.restart.delay_after(failures)
                    decision = decide_restart(outcome, previous,
                                              self.restart.refusal(failures) if delay_ms is None else None,
                                              strategy_chosen=self.restart_chosen)
                    if not decision.restart:
                        error = outcome.error.with_note(decision.reason) if decision.reason else outcome.error
                        self.lifecycle.transition(JobStatus.FAILED, str(error.message).splitlines()[0])
                        return error
                    previous = outcome
                    self.restarts += 1  # a fallback to an older checkpoint is no restart of the user's job
                    if self.exceptions:
                        self.exceptions[-1]["restarted"] = True
                if self.lifecycle.status is not JobStatus.RESTARTING:
                    self.lifecycle.transition(JobStatus.RESTARTING, f"attempt {self.attempt} failed")
                if falling_back:
                    log.warning("Job '%s' attempt %d could not restore checkpoint %d, trying an older one",
                                self.graph.job_name, self.attempt, restore.checkpoint.checkpoint_id)
                else:
                    log.warning("Job '%s' attempt %d failed, restarting in %.0f ms (restart %d, %s): %s",
                                self.graph.job_name, self.attempt, delay_ms, self.restarts, self.restart,
                                outcome.error)
                    if self._cancel_requested or self._cancel_requested_within(delay_ms / 1000.0):
                        return self._cancel()
                try:
                    restore = self._choose_restore()
                    self._mark_recovery(recovery.RELAUNCHED)
                    break
                except StorageUnreachableError as exc:  # it may come back: counts as a failed restart
                    outcome = Diagnosis(JobFailedError(
                        f"Job '{self.graph.job_name}' could not choose a checkpoint to restore: {exc}"))
                    restore = None
                except CorruptCheckpointError as exc:  # nothing left to fall back to
                    error = outcome.error.with_note(str(exc))
                    self.lifecycle.transition(JobStatus.FAILED, str(exc).splitlines()[0])
                    return error
            self.attempt = Attempt(self.attempt + 1)

    def _cancel_requested_within(self, seconds: float) -> bool:
        """Whether a cancel arrives within ``seconds``; one already waiting counts even when ``seconds`` is 0
        (a Ctrl-C cancels the Spark stage first: its failure must not start another attempt)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if isinstance(self.events.get(timeout=max(0.0, deadline - time.monotonic())), CancelRequested):
                    return True
            except queue.Empty:
                return False

    def _choose_restore(self) -> RestorePoint | None:
        """Newest usable checkpoint of this execution, else the one the job started from (or, when that one
        cannot be restored and came from ``"latest"``, an older one), else None: from scratch only when this
        execution completed no checkpoint, since starting over would write again what its sinks committed.
        Raises CorruptCheckpointError when no checkpoint is left to restore."""
        own: list = []
        if self.coordinator is not None:
            storage = self.coordinator.storage
            own = self.coordinator.completed_checkpoints()
            if own:  # retention deleted most of them: ask the storage once rather than each in turn
                own = sorted(set(own) & set(storage.checkpoint_ids()))
            for checkpoint_id in reversed(own):
                if checkpoint_id in self.unrestorable:
                    continue
                try:
                    return RestorePoint(storage, storage.validated_checkpoint(checkpoint_id), fallback=True)
                except (CorruptCheckpointError, CheckpointNotFoundError) as exc:
                    log.warning("Not restoring checkpoint %d: %s", checkpoint_id, exc)
        initial = self.initial_restore
        if initial is not None and initial.checkpoint.checkpoint_id in self.unrestorable:
            older = None
            if initial.fallback:
                older = newest_restorable(initial.storage, initial.checkpoint.checkpoint_id, self.unrestorable)
            if older is None:
                raise CorruptCheckpointError(
                    f"No checkpoint of job '{self.graph.job_name}' can be restored (checkpoint "
                    f"{initial.checkpoint.checkpoint_id} is damaged, and no older one is usable). Restore another "
                    "checkpoint by id or path, or start the job without restore_from.")
            self.initial_restore = initial = older
        if initial is None and own:
            raise CorruptCheckpointError(
                f"None of the retained checkpoints {own[-5:]} of job '{self.graph.job_name}' can be restored, and "
                "starting from scratch would write again the output its sinks committed. Restore an older checkpoint "
                "by id or path, or start the job again without restore_from.")
        return initial

    def _run_attempt(self, restore: RestorePoint | None):
        graph = self.graph
        if self.attempt > 0:
            # A lost executor takes its slots along until Spark replaces it. A barrier stage submitted before
            # then fails Spark's slot check and waits out its retry interval (15 s by default): wait here.
            waited = time.monotonic()
            try:
                if not require_slots(self.spark, graph.slots, stop=lambda: self._cancel_requested_within(0)):
                    self._cancel_requested = True
                    return Diagnosis(JobFailedError(f"Job '{graph.job_name}' was cancelled waiting for slots"))
            except InsufficientSlotsError as exc:  # executors may still come back: a failed restart
                return Diagnosis(JobFailedError(f"Job '{graph.job_name}' cannot restart: {exc}", retryable=True))
            if time.monotonic() - waited > 0.5:
                log.info("Job '%s' waited %.1f s for %d free Spark task slots before attempt %d", graph.job_name,
                         time.monotonic() - waited, graph.slots, self.attempt)
        restore_payload = None
        if restore is not None:
            plan = plan_restore(restore.checkpoint, graph, restore.allow_non_restored_state)
            restore_payload = pickle.dumps((restore.storage, plan))
            checkpoint = restore.checkpoint
            taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(checkpoint.timestamp_ms / 1000))
            log.info("Job '%s' attempt %d restores checkpoint %d of %s (taken %s at parallelism %d; now %d)",
                     graph.job_name, self.attempt, checkpoint.checkpoint_id, restore.storage.job_dir, taken,
                     checkpoint.parallelism, graph.slots)
        self.restored_from.append(restore.checkpoint.checkpoint_id if restore else None)
        if restore is not None and self.coordinator is not None:
            self.coordinator.history.restored_from(restore.checkpoint.checkpoint_id,
                                                   restore.storage.checkpoint_url(restore.checkpoint.checkpoint_id),
                                                   restore.checkpoint.savepoint)
        inbox = self.coordinator_loop.inbox if self.coordinator_loop is not None else None
        self.metrics.start_attempt(self.attempt)
        security = ConnectionSecurity.new(self.tls)  # a new secret per attempt: an old attempt's is worth nothing
        self.control = ControlServer(_driver_host(self.spark), self.attempt, graph.slots, self.events, security, inbox,
                                     self.metrics.on_report, self._slots_running, self.queryable_state.on_message)
        self.queryable_state.attach(self.attempt, self.control.send_to)
        if self.coordinator is not None:
            self.coordinator.start_attempt(self.attempt, self.control)
            self.coordinator_loop.wake()
        stop = self.coordinator.stop_sources if self.coordinator is not None else None
        if stop is not None:
            stop = StopSources(self.attempt, stop.drain)
        task = barrier_task(self._payload, self.control.address, security, self.attempt, restore_payload, stop)
        description = f"Chandy job '{graph.job_name}' ({self.job_id[:8]}) attempt {self.attempt}"
        if self.dashboard_url:
            description += f": {self.dashboard_url}"
        self.stage = BarrierStage(self.spark, f"chandy-{self.job_id}-{self.attempt}", description, graph.slots, task,
                                  self.attempt, self.events)
        self.lifecycle.transition(JobStatus.INITIALIZING, f"attempt {self.attempt}: {graph.slots} slots start and "
                                                          "restore their state")
        self.stage.start()
        timeout_s = graph.heartbeat_timeout_ms / 1000.0
        while True:
            try:
                event = self.events.get(timeout=graph.heartbeat_interval_ms / 1000.0)
            except queue.Empty:
                hung = self.control.unresponsive(timeout_s)
                if not hung:
                    continue
                event = hung[0]
            if getattr(event, "attempt", self.attempt) != self.attempt:
                continue  # a straggler of an earlier attempt
            handler = self._handlers.get(type(event))
            outcome = handler(event) if handler is not None else None
            if outcome is not None:
                return outcome

    # -- events ---------------------------------------------------------------------------------------

    def _mark_recovery(self, mark: str) -> None:
        if self.recovery_marks:  # the first time only: a cancel after the restart stops another attempt
            self.recovery_marks[-1].setdefault(mark, time.time())

    def _attempt_failed(self, first) -> Diagnosis:
        self.recovery_marks.append({recovery.NOTICED: time.time()})
        diagnosis = diagnose(self.graph.job_name, self._gather_evidence(first))
        self._mark_recovery(recovery.DIAGNOSED)
        # The message only: the traceback follows once, in the restart's line or in the error execute() raises.
        log.error("%s", diagnosis.error.message)
        self._remember_exception(diagnosis.error)
        self._stop_everything("the job attempt failed")
        return diagnosis

    def _slots_running(self) -> None:
        """The control server's thread: every slot of the attempt registered, records flow from now on."""
        self.lifecycle.transition_from(JobStatus.INITIALIZING, JobStatus.RUNNING,
                                       f"attempt {self.attempt}: every slot runs, records flow")
        self.queryable_state.running(self.attempt)

    def _checkpoint_failed(self, event: CheckpointFailure) -> Diagnosis:
        self.recovery_marks.append({recovery.NOTICED: time.time()})
        self._mark_recovery(recovery.DIAGNOSED)
        log.error("%s", event.error)
        self._remember_exception(event.error)
        self._stop_everything("a checkpoint failure the job does not tolerate")
        return Diagnosis(event.error, FailurePhase.RUNTIME)

    def _remember_exception(self, error: JobFailedError) -> None:
        """For ``/jobs/<id>/exceptions``: what failed the attempt, with the user's own traceback."""
        trace = error.user_traceback or ""
        last = trace.strip().splitlines()[-1] if trace.strip() else ""
        named = re.match(r"([A-Za-z_][\w.]*)(?::|$)", last)  # "ValueError: ...", or "ValueError" alone
        name = named.group(1) if named else type(error).__name__
        self.exceptions.append({"timestamp": int(time.time() * 1000), "attempt": int(self.attempt),
                                "exceptionName": name, "message": error.message,
                                "stacktrace": trace or str(error), "taskName": error.operator_name,
                                "operatorUid": error.operator_uid, "subtask": error.subtask, "restarted": False})

    def _cancel(self) -> JobCancelledError:
        was_running = self.lifecycle.status in (JobStatus.INITIALIZING, JobStatus.RUNNING)
        self.lifecycle.transition(JobStatus.CANCELLING, "cancelled by the user")
        if was_running:  # else (restarting) nothing runs
            self._stop_everything("cancelled by the user")
        self.lifecycle.transition(JobStatus.CANCELED)
        return JobCancelledError(f"Job '{self.graph.job_name}' ({self.job_id}) was cancelled")

    def _gather_evidence(self, first) -> FailureEvidence:
        """The first failure event plus whatever else arrives within the grace period.

        The grace ends early once nothing still on its way could change the diagnosis: when an operator's own error
        arrived, or when a slot died without a word (SIGKILL, a crash, a lost executor) and every other slot, told
        to cancel at once, has closed its control connection too. A slot sends its report before it closes that
        connection, and the connection's thread queues the report before the disconnection, so once every slot's
        connection has closed, every report is in the queue. A report that could outrank a silent death (an
        operator's error, a failure that would repeat) comes from a slot that is still connected, or one that has
        not registered (then not every slot disconnects, and the grace runs out as before). Slots that close after
        the cancel are no evidence: they did what they were told."""
        evidence = FailureEvidence()
        deadline = time.monotonic() + FAILURE_GRACE_S
        told_to_cancel: set[int] | None = None  # once the other slots were told to cancel: those gone since
        every_slot = set(range(self.graph.slots))
        event = first
        while True:
            if isinstance(event, CancelRequested):
                self._cancel_requested = True  # honoured once the attempt is stopped: no restart follows
            elif getattr(event, "attempt", self.attempt) == self.attempt:
                if isinstance(event, SlotFailed):
                    evidence.reports.append(event)
                elif isinstance(event, SlotDisconnected):
                    if told_to_cancel is None:
                        evidence.disconnected_slots.append(event.slot)
                    else:
                        told_to_cancel.add(event.slot)
                elif isinstance(event, SlotUnresponsive):
                    evidence.unresponsive.append(event)
                elif isinstance(event, StageFailed):
                    evidence.stage_error = event.error
            if evidence.has_operator_error:
                return evidence
            if told_to_cancel is None:
                silent = [slot for slot in evidence.disconnected_slots
                          if slot not in {report.slot for report in evidence.reports}]
                if silent:
                    self.control.cancel(Cancel(self.attempt, f"slot {silent[0]} was lost"))
                    told_to_cancel = set()
            if told_to_cancel is not None and every_slot <= (set(evidence.disconnected_slots) | told_to_cancel
                                                             | self.control.finished_slots()):
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
        self.control.cancel(Cancel(self.attempt, reason))  # first: the coordinator may wait on storage
        self.queryable_state.detach(reason)
        self.stage.cancel()
        if self.coordinator is not None:
            self.coordinator.end_attempt(reason)
        if not self.stage.join(STAGE_STOP_TIMEOUT_S):
            log.warning("Spark stage of job %s did not stop within %s s", self.job_id, STAGE_STOP_TIMEOUT_S)
        self._mark_recovery(recovery.STAGE_ENDED)
        if not self.control.wait_until_all_disconnected(STAGE_STOP_TIMEOUT_S):
            log.warning("Some slots of job %s still hold their control connection", self.job_id)
        self._mark_recovery(recovery.DISCONNECTED)
        self._remember_slots()
        self.control.close()

    def _remember_slots(self) -> None:
        registrations = self.control.registrations
        self.registered_pids = [r.pid for r in registrations.values()]
        self.data_addresses = [(r.host, r.port) for r in registrations.values()]

    def _finish(self, blobs: list) -> JobResult:
        self.queryable_state.end("the job has finished")
        # Every slot sent its last acks before returning; they are handled once its control connection has
        # been read to the end and the coordinator's inbox drained.
        if not self.control.wait_until_all_disconnected(STAGE_STOP_TIMEOUT_S):
            log.warning("Some slots of job %s still hold their control connection", self.job_id)
        if self.coordinator_loop is not None and not self.coordinator_loop.flush(STAGE_STOP_TIMEOUT_S):
            log.warning("The checkpoint coordinator of job %s did not catch up with its messages", self.job_id)
        self._remember_slots()
        self.control.close()
        per_uid: dict[str, list] = {}
        for blob in blobs:
            for uid, value in pickle.loads(blob).items():
                per_uid.setdefault(uid, []).append(value)
        results = {uid: self.sinks[uid].merge_results(values) for uid, values in per_uid.items()}
        collect_sinks = {sink.name: uid for uid, sink in self.sinks.items() if isinstance(sink, CollectSink)}
        runtime_ms = int((time.monotonic() - self._started) * 1000)
        checkpoints = []
        if self.coordinator is not None:
            self.coordinator.finish()
            checkpoints = self.coordinator.checkpoint_stats()
        self.lifecycle.transition(JobStatus.FINISHED)
        if log.isEnabledFor(logging.DEBUG) and marks.CALLED in self.startup:
            log.debug("Job '%s' start-up (ms): %s", self.graph.job_name, self.startup_phases())
            if self.recovery_marks:
                log.debug("Job '%s' last restart (ms): %s", self.graph.job_name, self.recovery_phases())
        log.info("Job '%s' finished in %.1f s: %d checkpoints, %d restarts", self.graph.job_name, runtime_ms / 1000,
                 len(checkpoints), self.restarts)
        return JobResult(self.job_id, self.graph.job_name, runtime_ms, results, collect_sinks,
                         checkpoints=checkpoints, restarts=self.restarts, restored_from=list(self.restored_from))
