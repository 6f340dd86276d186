"""The checkpoints a job retains, held in memory: Flink's ``CompletedCheckpointStore``.

The store is read from storage once per attempt (a listing and one ``_metadata`` read per checkpoint there);
after that each completed checkpoint is added in memory, and the ones it subsumes, beyond the retained number, are
deleted with the shared files no retained checkpoint refers to any more. On an object store that is one delete per
superseded checkpoint, instead of a listing and N reads after every checkpoint.

Shared files (the state of incremental checkpoints) are counted by reference: a file is deleted when the last
retained checkpoint that refers to it goes. A checkpoint whose ``_metadata`` could not be read when the store was
filled may refer to any of them, so while one is there no shared file is deleted.

>>> from runtime.protocol.checkpoints import CompletedCheckpoint
>>> from state_backends.storage import CheckpointStorage
>>> store = CompletedCheckpointStore(CheckpointStorage("memory://store-doc", "job"), retained=1)
>>> store.load()
>>> for checkpoint_id in (1, 2):
...     store.add(CompletedCheckpoint(checkpoint_id, "job", 0, 0, 1, 128, ()))
>>> [c.checkpoint_id for c in store.retained]
[2]
"""

from __future__ import annotations

import bisect
import collections
import logging
from typing import Callable

from runtime.errors import StorageUnreachableError
from runtime.ids import CheckpointId
from runtime.protocol.checkpoints import CompletedCheckpoint
from state_backends.storage import CheckpointStatus, CheckpointStorage

__all__ = ["CompletedCheckpointStore"]

log = logging.getLogger(__name__)


class CompletedCheckpointStore:
    """The retained checkpoints of ``storage``'s job: ``retained`` of them (a number, or a function that gives the
    number when retention runs: a job's checkpoint config)."""

    def __init__(self, storage: CheckpointStorage, retained: int | Callable[[], int]):
        self.storage = storage
        self._retained = retained if callable(retained) else (lambda: retained)
        self.retained: list[CompletedCheckpoint] = []  # ascending by id
        self.references: collections.Counter = collections.Counter()  # shared file -> retained checkpoints using it
        self.incomplete: list[CheckpointId] = []  # directories without _metadata found by the load
        self.unreadable = False  # a checkpoint's metadata could not be read: shared files are not deleted
        self.loaded = False

    def load(self) -> None:
        """Fill the store from storage. Nothing is deleted before this run completes a checkpoint of its own: the
        one it restored from may be the only one there is. A storage that cannot be read leaves the store not
        loaded: the next add tries again."""
        try:
            stored = self.storage.survey()
        except StorageUnreachableError as exc:
            log.warning("could not read the retained checkpoints now: %s", exc)
            self.loaded = False
            return
        self.retained = [s.checkpoint for s in stored if s.status is CheckpointStatus.COMPLETED]
        self.incomplete = [s.checkpoint_id for s in stored if s.status is CheckpointStatus.INCOMPLETE]
        self.unreadable = any(s.status is CheckpointStatus.UNREADABLE for s in stored)
        self.references = collections.Counter(path for c in self.retained for path in c.shared_paths())
        self.loaded = True

    def add(self, checkpoint: CompletedCheckpoint, pending: frozenset = frozenset()) -> None:
        """``checkpoint`` completed (its ``_metadata`` is written): retain it, and let go of the oldest ones beyond
        the retained number, and of directories without ``_metadata`` (abandoned by a failed attempt or an earlier
        run) older than the newest, unless ``pending``."""
        if not self.loaded:
            self.load()
        if not any(c.checkpoint_id == checkpoint.checkpoint_id for c in self.retained):
            # by id, not by completion: a checkpoint that completes after a newer one is already superseded by it
            bisect.insort(self.retained, checkpoint, key=lambda c: c.checkpoint_id)
            self.references.update(checkpoint.shared_paths())
        if not self.loaded:
            return  # what else is there is unknown: delete nothing until a load succeeds
        self._subsume()
        newest = self.retained[-1].checkpoint_id
        for checkpoint_id in [i for i in self.incomplete if i < newest and i not in pending]:
            try:
                self.storage.delete_checkpoint(checkpoint_id)
                self.incomplete.remove(checkpoint_id)
            except StorageUnreachableError as exc:
                log.warning("could not delete the abandoned checkpoint %d: %s", checkpoint_id, exc)

    def shared_paths(self) -> set[str]:
        """The shared files the retained checkpoints refer to."""
        return {path for path, count in self.references.items() if count > 0}

    def ids(self) -> list[CheckpointId]:
        return [c.checkpoint_id for c in self.retained]

    def forget_all(self) -> None:
        """Every retained checkpoint was deleted (the job's retention mode at its end)."""
        self.retained, self.references = [], collections.Counter()

    def _subsume(self) -> None:
        while len(self.retained) > max(1, self._retained()):
            oldest = self.retained[0]
            try:
                self.storage.delete_checkpoint(oldest.checkpoint_id)
            except StorageUnreachableError as exc:  # cleanup is best effort; the next add tries again
                log.warning("could not delete checkpoint %d: %s", oldest.checkpoint_id, exc)
                return
            self.retained.pop(0)
            released = []
            for path in oldest.shared_paths():
                self.references[path] -= 1
                if self.references[path] <= 0:
                    del self.references[path]
                    released.append(path)
            if released and not self.unreadable:
                try:
                    self.storage.delete_shared(sorted(released))
                except StorageUnreachableError as exc:
                    log.warning("could not delete files of old checkpoints: %s", exc)
