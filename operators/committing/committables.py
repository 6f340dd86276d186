"""What a sink's writers hand its one committer, and how the committer knows a checkpoint's files are all in.

A writer subtask sends a :class:`Committable` ahead of each barrier it passes (the files written since its last
one, maybe none) and one more, ``final``, at the end of its input or when the job stops with a savepoint (the
writers stop between different barriers then: a final committable is not waited past, whatever its id). A writer's committables travel one channel in
order, so a committable for checkpoint c proves that the writer sends nothing more for any checkpoint before c:
its files of a checkpoint whose barrier it never saw (an aborted one, or one overtaken by a newer barrier) ride
in the next committable. The committer's :class:`CommittableCollector` holds them and says which are ready when
checkpoint n completes: every checkpoint id up to n that every writer has passed (sent a committable for it or a
later one, or finished), in ascending order, stopping at the first that is not (with unaligned checkpoints a
committable can still be in flight when its checkpoint completes). So one commit takes every checkpoint up to some
id, never a later one before an earlier one, and "the table holds a commit for checkpoint v" means every
checkpoint up to v is in the table: a restore drops what is at or below it.

Writers are counted per **epoch**: the checkpoint the writers' run restored (0 for a fresh start). A restore at
another parallelism starts a new epoch with its own writers; committables of the old epoch (restored, or replayed
from channel state) are complete when the old epoch's writers have passed them.

>>> collector = CommittableCollector()
>>> collector.add(Committable(checkpoint_id=1, subtask=0, parallelism=2, files=("a",)))
>>> collector.take_ready(1)  # subtask 1 has not passed checkpoint 1 yet
(None, ())
>>> collector.add(Committable(checkpoint_id=1, subtask=1, parallelism=2, files=("b",)))
>>> collector.take_ready(1)
(1, ('a', 'b'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Committable", "CommittableCollector"]


@dataclass(frozen=True)
class Committable:
    """Files one writer subtask wrote (durable, not yet visible) before barrier ``checkpoint_id``.

    ``final``: sent at the end of the writer's input (or as its input stopped: stop_with_savepoint), with the id of
    the first checkpoint that can include it; the writer sends nothing after it. ``parallelism`` and ``epoch`` (the checkpoint the writers' run restored)
    name the writers it is one of, so that the committer knows whom a checkpoint waits for.
    """

    checkpoint_id: int
    subtask: int
    parallelism: int
    files: tuple[Any, ...]
    final: bool = False
    epoch: int = 0

    @property
    def writer(self) -> tuple[int, int, int]:
        return self.epoch, self.parallelism, self.subtask


class CommittableCollector:
    """The committer's committables not yet committed, and how far each writer has got.

    >>> collector = CommittableCollector()
    >>> collector.add(Committable(1, 0, 2, ("a",), final=True))  # subtask 0 ended before checkpoint 2
    >>> collector.add(Committable(1, 1, 2, ()))
    >>> collector.add(Committable(3, 1, 2, ("c",)))              # subtask 1 never saw barrier 2
    >>> collector.take_ready(5)
    (3, ('a', 'c'))
    """

    def __init__(self):
        self.pending: dict[int, list[Committable]] = {}  # checkpoint id -> committables, in arrival order
        self.passed: dict[tuple[int, int, int], int] = {}  # writer -> the newest checkpoint id it sent
        self.finished: set[tuple[int, int, int]] = set()  # writers that sent their final committable

    def add(self, committable: Committable) -> None:
        self.pending.setdefault(committable.checkpoint_id, []).append(committable)
        writer = committable.writer
        self.passed[writer] = max(self.passed.get(writer, 0), committable.checkpoint_id)
        if committable.final:
            self.finished.add(writer)

    def drop_through(self, checkpoint_id: int) -> None:
        """Forget committables of checkpoints up to ``checkpoint_id`` (the table holds them already)."""
        for done in [c for c in self.pending if c <= checkpoint_id]:
            del self.pending[done]
        self._forget_drained_epochs()

    def _passed_by_all(self, checkpoint_id: int) -> bool:
        epochs = {(c.epoch, c.parallelism) for c in self.pending[checkpoint_id]}
        return all(self.passed.get((epoch, parallelism, subtask), 0) >= checkpoint_id
                   or (epoch, parallelism, subtask) in self.finished
                   for epoch, parallelism in epochs for subtask in range(parallelism))

    def take_ready(self, completed_checkpoint_id: int) -> tuple[int | None, tuple]:
        """``(highest checkpoint id taken, files)`` of the checkpoints up to ``completed_checkpoint_id`` that are
        ready, taken in order up to the first that is not; ``(None, ())`` when none is. Files in checkpoint order,
        then subtask order."""
        taken = None
        files: list = []
        for checkpoint_id in sorted(self.pending):
            if checkpoint_id > completed_checkpoint_id or not self._passed_by_all(checkpoint_id):
                break
            for committable in sorted(self.pending.pop(checkpoint_id), key=lambda c: c.subtask):
                files.extend(committable.files)
            taken = checkpoint_id
        if taken is not None:
            self._forget_drained_epochs()
        return taken, tuple(files)

    def _forget_drained_epochs(self) -> None:
        """Writers of epochs older than the newest one, once none of their committables waits here: they send
        nothing more, and a later run with the same parallelism must not be mistaken for them."""
        if not self.passed:
            return
        newest = max(epoch for epoch, _, _ in self.passed)
        waiting = {c.epoch for committables in self.pending.values() for c in committables}
        stale = {writer for writer in self.passed if writer[0] < newest and writer[0] not in waiting}
        for writer in stale:
            del self.passed[writer]
            self.finished.discard(writer)

    def newest(self) -> int | None:
        """The highest checkpoint id with a committable here."""
        return max(self.pending, default=None)

    def to_state(self) -> list:
        """Picklable items for operator list state; :meth:`from_state` reads them back."""
        items: list = [c for committables in self.pending.values() for c in committables]
        items += [("passed", writer, checkpoint_id, writer in self.finished)
                  for writer, checkpoint_id in self.passed.items()]
        return items

    @classmethod
    def from_state(cls, items: list) -> "CommittableCollector":
        """
        >>> before = CommittableCollector(); before.add(Committable(3, 0, 1, ("x",), final=True))
        >>> after = CommittableCollector.from_state(before.to_state())
        >>> after.finished, after.take_ready(3)
        ({(0, 1, 0)}, (3, ('x',)))
        """
        collector = cls()
        for item in items:
            if isinstance(item, Committable):
                collector.add(item)
            else:
                _, writer, checkpoint_id, finished = item
                collector.passed[writer] = max(collector.passed.get(writer, 0), checkpoint_id)
                if finished:
                    collector.finished.add(writer)
        return collector
