"""What ``execute`` returns (``JobResult``) and what ``execute_async`` returns (``JobClient``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from runtime.errors import UnknownNameError

__all__ = ["JobStatus", "JobResult", "JobClient"]


class JobStatus(Enum):
    """A job's lifecycle, as PyFlink names it (see :mod:`runtime.driver.lifecycle` for the transitions).

    >>> JobStatus.RUNNING.is_globally_terminal_state(), JobStatus.CANCELED.is_globally_terminal_state()
    (False, True)
    """

    CREATED = "CREATED"
    INITIALIZING = "INITIALIZING"  # an attempt's slots start and restore their state: no record flows yet
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"

    def is_globally_terminal_state(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)


@dataclass
class JobResult:
    """The outcome of a finished job.

    ``sink_results`` maps each sink operator's uid to its merged result; ``collected(sink)`` reads a
    ``CollectSink``'s records by the sink object or its name. ``checkpoints`` holds the statistics of every
    checkpoint the job completed (duration, sync and async parts, alignment, bytes).

    >>> result = JobResult("id", "job", 1200, {"sink-uid": [1, 2]}, {"numbers": "sink-uid"}, restarts=1)
    >>> result.collected("numbers"), result.get_net_runtime(), result.restarts
    ([1, 2], 1200, 1)
    """

    job_id: str
    job_name: str
    net_runtime_ms: int
    sink_results: dict[str, Any] = field(default_factory=dict)
    collect_sinks: dict[str, str] = field(default_factory=dict, repr=False)  # CollectSink name -> sink uid
    checkpoints: list = field(default_factory=list)  # runtime.protocol.checkpoints.CheckpointStats, oldest first
    restarts: int = 0
    restored_from: list = field(default_factory=list)  # checkpoint id (or None) each attempt started from

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        """Milliseconds from launch to the end of the job."""
        return self.net_runtime_ms

    def collected(self, sink) -> list:
        """Records gathered by ``sink`` (a CollectSink, or its name)."""
        name = getattr(sink, "name", sink)
        uid = self.collect_sinks.get(name)
        if uid is None:
            raise UnknownNameError(f"Job '{self.job_name}' has no CollectSink named {name!r}; "
                           f"it has {sorted(self.collect_sinks)}")
        return self.sink_results[uid]


class JobClient:
    """A handle on a job started with ``execute_async``: its status, its result, and a way to cancel it.

    >>> class Finished:  # what execute_async hands the client: the job's master
    ...     job_id, status = "42", JobStatus.FINISHED
    >>> client = JobClient(Finished())
    >>> client.get_job_id(), client.get_job_status()
    ('42', <JobStatus.FINISHED: 'FINISHED'>)
    """

    def __init__(self, run):
        self._run = run

    def get_job_id(self) -> str:
        return self._run.job_id

    def get_job_status(self) -> JobStatus:
        return self._run.status

    def cancel(self) -> None:
        """Stop the job: every slot and the Spark stage end; waits until they have."""
        self._run.cancel()

    def trigger_savepoint(self, savepoint_directory: str | None = None, timeout: float | None = None) -> str:
        """Take a savepoint now and return its directory's URL: aligned, self-contained (it can be moved),
        never deleted by checkpoint retention, and restorable with ``execute(restore_from=<that URL>)``, also
        at another parallelism. It goes into a new ``savepoint-<id>-<hex>`` directory under
        ``savepoint_directory`` (default: ``env.set_default_savepoint_directory``, else the job's
        ``savepoints`` directory in its checkpoint storage). Raises SavepointError when none was taken; the
        job runs on either way."""
        return self._run.trigger_savepoint(savepoint_directory, timeout)

    def stop_with_savepoint(self, savepoint_directory: str | None = None, drain: bool = False,
                            timeout: float | None = None) -> str:
        """Stop the job with a final savepoint: sources read no more, in-flight records are processed, every
        subtask's final state makes the savepoint, sinks commit, and the job ends FINISHED. Returns the
        savepoint's URL once the job has ended. ``drain=True`` (Flink's ``--drain``,
        ``advance_to_end_of_event_time``) ends the input as if it were exhausted: the final watermark fires
        every timer and window; without it they stay in the savepoint for the restored job.

        PyFlink's argument order ``stop_with_savepoint(advance_to_end_of_event_time, savepoint_directory)``
        works too (a bool first)."""
        if isinstance(savepoint_directory, bool):  # PyFlink: (advance_to_end_of_event_time, savepoint_directory)
            savepoint_directory, drain = (drain if isinstance(drain, str) else None), savepoint_directory
        return self._run.stop_with_savepoint(savepoint_directory, drain, timeout)

    def trigger_checkpoint(self, timeout: float | None = None) -> int:
        """Take a checkpoint now, whatever the interval, and return its id once it completed (the REST API's
        ``POST /jobs/<id>/checkpoints``). Raises CheckpointError when it failed or the job has no checkpointing."""
        return self._run.trigger_checkpoint().result(timeout)

    def get_dashboard_url(self, with_token: bool = False) -> str | None:
        """Where the driver's web dashboard shows this job (its REST API is under the same address), or None
        when the dashboard is off (``spark.chandy.ui.enabled=false``) or could not start. ``with_token``: with the
        token its actions need (``?token=``), for a browser of someone who may act on the job."""
        return self._run.dashboard_url_with_token if with_token else self._run.dashboard_url

    def get_job_execution_result(self, timeout: float | None = None) -> JobResult:
        """Wait for the job to end; returns its result or raises why it failed or was cancelled."""
        return self._run.wait(timeout)
