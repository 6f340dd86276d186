"""A job's savepoints: those asked for, those being taken, those given up, and the stop with a savepoint.

The coordinator triggers a savepoint as a checkpoint (aligned, self-contained) and tells this part when it
completes or fails; what is special about savepoints lives here: each is written in a directory of its own with
copies of the files it shares with the job's checkpoints, is never retained or deleted by the job, and a failed one
leaves nothing behind and fails no job (Flink's rule too).

>>> outcomes = []
>>> savepoints = Savepoints("orders")
>>> savepoints.ask(SavepointRequest("/tmp/savepoints", lambda url, error: outcomes.append(error)), closed=True)
>>> print(outcomes[0])
No savepoint of job 'orders' was taken: the job has ended.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable

from runtime.errors import SavepointError
from runtime.ids import CheckpointId
from runtime.protocol.checkpoints import CompletedCheckpoint
from runtime.protocol.messages import StopSources
from state_backends.storage import CheckpointStorage, SavepointStorage

__all__ = ["SavepointRequest", "Savepoints"]

log = logging.getLogger(__name__)

# Given-up savepoints remembered so that their late acknowledgements' files go where they were written.
_GIVEN_UP_REMEMBERED = 64


@dataclass
class SavepointRequest:
    """A savepoint a user asked for. ``directory``: where its ``savepoint-<id>-<hex>`` directory goes.
    ``drain``: None for a savepoint of a job that runs on; else the job stops with it (``stop_with_savepoint``),
    draining its input or not. ``done(url, error)`` is called once, with the coordinator's lock held."""

    directory: str
    done: Callable[[str | None, BaseException | None], None]
    drain: bool | None = None
    url: str | None = None  # the stop's savepoint, once written (its job still has to commit and end)

    @property
    def stops(self) -> bool:
        return self.drain is not None


class Savepoints:
    def __init__(self, job_name: str):
        self.job_name = job_name
        self.waiting: list[SavepointRequest] = []  # waiting for their turn
        self.taking: dict[CheckpointId, tuple[SavepointRequest, SavepointStorage]] = {}  # triggered, not complete
        self.given_up: dict[CheckpointId, SavepointStorage] = {}  # their late acknowledgements' files go there
        self.stop_request: SavepointRequest | None = None  # outlives restarts: the job stops in the next attempt
        # Once the stop's savepoint is taken: every later attempt (a failure before the job ended) starts stopped,
        # so the job never runs past its savepoint.
        self.stopped_with: StopSources | None = None

    def ask(self, request: SavepointRequest, closed: bool) -> None:
        """Queue ``request`` (or refuse it: the job ended, or it is stopping already)."""
        if closed:
            request.done(None, SavepointError(f"No savepoint of job '{self.job_name}' was taken: the job has ended."))
            return
        if not request.stops:
            self.waiting.append(request)
            return
        if self.stop_request is not None or self.stopped_with is not None:
            request.done(None, SavepointError(f"Job '{self.job_name}' is already stopping with a savepoint."))
            return
        self.stop_request = request

    def stop_sources(self, attempt) -> StopSources | None:
        """What an attempt's slots start with when the job is stopping (their sources read nothing)."""
        if self.stopped_with is not None:
            return self.stopped_with
        if self.stop_request is None:
            return None
        return StopSources(attempt if attempt is not None else 0, bool(self.stop_request.drain))

    def give_up_waiting(self, why: str) -> None:
        """The job ended without taking them: every savepoint still asked for fails, saying ``why``."""
        waiting = self.waiting + ([self.stop_request] if self.stop_request is not None else [])
        self.waiting, self.stop_request = [], None
        for request in waiting:
            taken = f" (the stop's savepoint {request.url} was written, but its job did not commit it)" \
                if request.url else ""
            request.done(None, SavepointError(f"No savepoint of job '{self.job_name}' was taken: {why}{taken}."))

    def target(self, request: SavepointRequest, storage: CheckpointStorage,
               checkpoint_id: CheckpointId) -> SavepointStorage | None:
        """Where savepoint ``checkpoint_id`` goes, or None when that cannot be (``request`` is told why)."""
        try:
            return storage.savepoint_storage(request.directory, checkpoint_id)
        except Exception as exc:  # the directory's protocol is unknown, its package missing ...
            request.done(None, SavepointError(f"No savepoint of job '{self.job_name}' was taken: "
                                              f"{request.directory}: {type(exc).__name__}: {exc}"))
            return None

    @staticmethod
    def store(completed: CompletedCheckpoint, storage: CheckpointStorage,
              target: SavepointStorage) -> CompletedCheckpoint:
        """Write ``completed`` as the savepoint ``target``, with copies of the final states it shares with the
        job's checkpoints; on failure nothing of it is left (a directory without ``_metadata`` is no savepoint, but
        it would look like one)."""
        try:
            checkpoint = target.adopt(storage, replace(completed, savepoint=True))
            target.write_metadata(checkpoint)
        except Exception:
            Savepoints.delete(target)
            raise
        return checkpoint

    @staticmethod
    def delete(target: SavepointStorage) -> None:
        try:
            target.delete()
        except Exception:  # best effort: see store
            log.debug("could not delete the unfinished savepoint %s", target.url, exc_info=True)

    def give_up(self, checkpoint_id: CheckpointId, request: SavepointRequest, target: SavepointStorage,
                reason: str) -> None:
        """Savepoint ``checkpoint_id`` failed: its directory goes, and so do the files acknowledged late."""
        self.given_up[checkpoint_id] = target
        while len(self.given_up) > _GIVEN_UP_REMEMBERED:
            del self.given_up[min(self.given_up)]
        self.delete(target)
        log.warning("Savepoint %d of job '%s' failed: %s", checkpoint_id, self.job_name, reason)
        request.done(None, SavepointError(f"Savepoint {checkpoint_id} of job '{self.job_name}' failed: {reason}."))

    def stopped(self, stop: SavepointRequest, attempt) -> None:
        """The stop's savepoint committed with the job's final checkpoint."""
        self.stop_request = None
        self.stopped_with = StopSources(attempt, bool(stop.drain))
        stop.done(stop.url, None)
