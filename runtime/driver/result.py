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

    def get_job_execution_result(self, timeout: float | None = None) -> JobResult:
        """Wait for the job to end; returns its result or raises why it failed or was cancelled."""
        return self._run.wait(timeout)
