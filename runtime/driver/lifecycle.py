"""A job's lifecycle as explicit states with checked transitions, each logged with how long the job spent in
the state it leaves.

::

    CREATED -> RUNNING -> FINISHED
                  |  \\-> FAILED
                  |  \\-> CANCELLING -> CANCELED
                  v
              RESTARTING -> RUNNING | FAILED | CANCELLING

>>> lifecycle = JobLifecycle("demo", clock=iter([0.0, 1.5, 2.0]).__next__)
>>> lifecycle.transition(JobStatus.RUNNING)
>>> lifecycle.transition(JobStatus.FINISHED)
>>> lifecycle.status, [status.name for status, _ in lifecycle.history]
(<JobStatus.FINISHED: 'FINISHED'>, ['CREATED', 'RUNNING', 'FINISHED'])
>>> lifecycle.transition(JobStatus.RUNNING)
Traceback (most recent call last):
...
runtime.errors.ProtocolError: Job 'demo' cannot go from FINISHED to RUNNING
"""

from __future__ import annotations

import logging
import threading
import time

from runtime.driver.result import JobStatus
from runtime.errors import ProtocolError

__all__ = ["JobLifecycle", "TRANSITIONS"]

log = logging.getLogger(__name__)

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.CREATED: frozenset({JobStatus.RUNNING, JobStatus.FAILED, JobStatus.CANCELLING}),
    JobStatus.RUNNING: frozenset({JobStatus.RESTARTING, JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLING}),
    JobStatus.RESTARTING: frozenset({JobStatus.RUNNING, JobStatus.FAILED, JobStatus.CANCELLING}),
    JobStatus.CANCELLING: frozenset({JobStatus.CANCELED}),
    JobStatus.FINISHED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
}


class JobLifecycle:
    """The current status of one job, changed only through :meth:`transition` (from the job master's thread;
    read from any thread)."""

    def __init__(self, job_name: str, clock=time.monotonic):
        self.job_name = job_name
        self.clock = clock
        self._lock = threading.Lock()
        self.history: list[tuple[JobStatus, float]] = [(JobStatus.CREATED, clock())]

    @property
    def status(self) -> JobStatus:
        return self.history[-1][0]

    def transition(self, target: JobStatus, reason: str = "") -> None:
        with self._lock:
            current, since = self.history[-1]
            if target not in TRANSITIONS[current]:
                raise ProtocolError(f"Job '{self.job_name}' cannot go from {current.name} to {target.name}")
            now = self.clock()
            self.history.append((target, now))
        log.info("Job '%s': %s -> %s after %.3f s%s", self.job_name, current.name, target.name, now - since,
                 f" ({reason})" if reason else "")
