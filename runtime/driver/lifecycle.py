"""A job's lifecycle as explicit states with checked transitions, each logged with how long the job spent in
the state it leaves.

::

    CREATED -> INITIALIZING -> RUNNING -> FINISHED
                    ^    |         |  \\-> FAILED
                    |    |         |  \\-> CANCELLING -> CANCELED
                    |    v         v
                    RESTARTING <---'   (and INITIALIZING -> FAILED | CANCELLING)

INITIALIZING: an attempt was launched and its slots start, restore their state and connect; RUNNING: every
slot runs, so records flow (Flink shows its tasks INITIALIZING for the same time).

>>> lifecycle = JobLifecycle("demo", clock=iter([0.0, 1.5, 2.0, 2.5]).__next__)
>>> lifecycle.transition(JobStatus.INITIALIZING)
>>> lifecycle.transition(JobStatus.RUNNING)
>>> lifecycle.transition(JobStatus.FINISHED)
>>> lifecycle.status, [status.name for status, _ in lifecycle.history]
(<JobStatus.FINISHED: 'FINISHED'>, ['CREATED', 'INITIALIZING', 'RUNNING', 'FINISHED'])
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
    JobStatus.CREATED: frozenset({JobStatus.INITIALIZING, JobStatus.FAILED, JobStatus.CANCELLING}),
    JobStatus.INITIALIZING: frozenset({JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.FAILED,
                                       JobStatus.CANCELLING}),
    JobStatus.RUNNING: frozenset({JobStatus.RESTARTING, JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLING}),
    JobStatus.RESTARTING: frozenset({JobStatus.INITIALIZING, JobStatus.FAILED, JobStatus.CANCELLING}),
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
        self._log(current, target, now - since, reason)

    def transition_from(self, expected: JobStatus, target: JobStatus, reason: str = "") -> bool:
        """Go to ``target`` if the status is ``expected`` (checked and changed at once, from any thread); False when
        the job has moved on meanwhile (an attempt that failed while its slots registered).

        >>> lifecycle = JobLifecycle("demo", clock=iter([0.0, 1.0]).__next__)
        >>> lifecycle.transition_from(JobStatus.INITIALIZING, JobStatus.RUNNING), lifecycle.status.name
        (False, 'CREATED')
        """
        with self._lock:
            current, since = self.history[-1]
            if current is not expected:
                return False
            if target not in TRANSITIONS[current]:
                raise ProtocolError(f"Job '{self.job_name}' cannot go from {current.name} to {target.name}")
            now = self.clock()
            self.history.append((target, now))
        self._log(current, target, now - since, reason)
        return True

    def _log(self, current: JobStatus, target: JobStatus, seconds: float, reason: str) -> None:
        log.info("Job '%s': %s -> %s after %.3f s%s", self.job_name, current.name, target.name, seconds,
                 f" ({reason})" if reason else "")
