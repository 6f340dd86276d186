"""The checkpoint coordinator's thread: its inbox receives checkpoint messages from the control server, and it wakes
when a checkpoint is due or overdue.

>>> from runtime import StreamExecutionEnvironment
>>> from runtime.checkpoint_config import CheckpointConfig
>>> from operators import DiscardingSink
>>> from state_backends.storage import CheckpointStorage
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> _ = env.from_sequence(0, 9).sink_to(DiscardingSink())
>>> coordinator = CheckpointCoordinator(CheckpointConfig(), CheckpointStorage("memory://loop-doc", "job"),
...                                     env.get_job_graph("job"))
>>> loop = CoordinatorLoop(coordinator, on_failure=lambda attempt, error: None)
>>> loop.flush(), loop.stop()
(True, None)
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable

from runtime.driver.coordinator import CheckpointCoordinator
from runtime.errors import JobFailedError
from runtime.ids import Attempt

__all__ = ["CoordinatorLoop"]

log = logging.getLogger(__name__)

_STOP = object()


class _Wake:
    """Wakes the loop: it recomputes its next wakeup (a new attempt began)."""


@dataclass(frozen=True)
class _Flush:
    """Set once every message put in the inbox before it has been handled."""

    done: threading.Event


class CoordinatorLoop:
    """The coordinator's thread: its inbox receives checkpoint messages from the control server; it also
    wakes when a checkpoint is due or overdue. ``on_failure(attempt, error)`` tells the job master about a
    checkpoint failure the job cannot tolerate."""

    def __init__(self, coordinator: CheckpointCoordinator,
                 on_failure: Callable[[Attempt, JobFailedError], None]):
        self.coordinator = coordinator
        self.on_failure = on_failure
        self.inbox: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="chandy-checkpoint-coordinator", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        coordinator = self.coordinator
        while True:
            try:
                message = self.inbox.get(timeout=coordinator.next_wakeup())
            except queue.Empty:
                message = None
            if message is _STOP:
                return
            if isinstance(message, _Flush):
                message.done.set()
                continue
            if isinstance(message, _Wake):
                message = None
            try:
                attempt, failure = coordinator.handle(message)
            except Exception as exc:  # a bug of ours must still end the job visibly
                log.exception("checkpoint coordinator failed")
                attempt, failure = coordinator.attempt, JobFailedError(
                    f"Job '{coordinator.graph.job_name}': the checkpoint coordinator failed: "
                    f"{type(exc).__name__}: {exc}")
            if failure is not None and attempt is not None:
                self.on_failure(attempt, failure)

    def wake(self) -> None:
        """Recompute when to wake next (a new attempt began: its first checkpoint is one interval away)."""
        self.inbox.put(_Wake())

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every message put in the inbox so far has been handled; False on timeout."""
        done = threading.Event()
        self.inbox.put(_Flush(done))
        return done.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self.inbox.put(_STOP)
        self._thread.join(timeout)
