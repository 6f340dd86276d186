"""What a sink's writers hand its one committer, and how the committer knows a checkpoint's files are all in.

A writer subtask sends one :class:`Committable` ahead of every barrier (files written since the last one, maybe
none) and one more, ``final``, at the end of its input. The committer's :class:`CommittableCollector` holds them
and says which are ready to commit when checkpoint n completes: every checkpoint id up to n whose committables
from all writers have arrived, in ascending order, stopping at the first one still missing a writer's (with
unaligned checkpoints a committable can still be in flight when the checkpoint completes). So one commit takes
every checkpoint up to some id, never a later one before an earlier one, and "the table holds a commit for
checkpoint v" means every checkpoint up to v is in the table: a restore drops what is at or below it.

>>> collector = CommittableCollector()
>>> collector.add(Committable(checkpoint_id=1, subtask=0, parallelism=2, files=("a",)))
>>> collector.take_ready(1)  # subtask 1's committable of checkpoint 1 has not arrived
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

    ``final``: sent at the end of the writer's input, with the id of the first checkpoint that can include it;
    the writer sends nothing for later checkpoints. ``parallelism``: the writers' parallelism, so that the
    committer knows how many committables a checkpoint has (it changes when a job is rescaled).
    """

    checkpoint_id: int
    subtask: int
    parallelism: int
    files: tuple[Any, ...]
    final: bool = False


class CommittableCollector:
    """The committer's committables not yet committed, and the writers that have finished.

    >>> collector = CommittableCollector()
    >>> collector.add(Committable(1, 0, 2, ("a",), final=True))  # subtask 0 ended before checkpoint 2
    >>> collector.add(Committable(1, 1, 2, ()))
    >>> collector.add(Committable(2, 1, 2, ("c",)))
    >>> collector.take_ready(5)
    (2, ('a', 'c'))
    """

    def __init__(self):
        self.pending: dict[int, dict[int, Committable]] = {}  # checkpoint id -> subtask -> committable
        # (parallelism, subtask) -> the checkpoint id of its final committable: it sends none after that one
        self.finished: dict[tuple[int, int], int] = {}

    def add(self, committable: Committable) -> None:
        self.pending.setdefault(committable.checkpoint_id, {})[committable.subtask] = committable
        if committable.final:
            self.finished[(committable.parallelism, committable.subtask)] = committable.checkpoint_id

    def drop_through(self, checkpoint_id: int) -> None:
        """Forget committables of checkpoints up to ``checkpoint_id`` (the table holds them already)."""
        for done in [c for c in self.pending if c <= checkpoint_id]:
            del self.pending[done]

    def _ready(self, checkpoint_id: int) -> bool:
        arrived = self.pending[checkpoint_id]
        parallelism = next(iter(arrived.values())).parallelism
        return all(subtask in arrived or self.finished.get((parallelism, subtask), checkpoint_id) < checkpoint_id
                   for subtask in range(parallelism))

    def take_ready(self, completed_checkpoint_id: int) -> tuple[int | None, tuple]:
        """``(highest checkpoint id taken, files)`` of the checkpoints up to ``completed_checkpoint_id`` that are
        ready, taken in order up to the first that is not; ``(None, ())`` when none is. Files in checkpoint order,
        then subtask order."""
        taken = None
        files: list = []
        for checkpoint_id in sorted(self.pending):
            if checkpoint_id > completed_checkpoint_id or not self._ready(checkpoint_id):
                break
            for _, committable in sorted(self.pending.pop(checkpoint_id).items()):
                files.extend(committable.files)
            taken = checkpoint_id
        return taken, tuple(files)

    def newest(self) -> int | None:
        """The highest checkpoint id with a committable here."""
        return max(self.pending, default=None)

    def to_state(self) -> list:
        """Picklable items for operator list state; :meth:`from_state` reads them back."""
        items: list = [c for by_subtask in self.pending.values() for c in by_subtask.values()]
        items += [("finished", parallelism, subtask, checkpoint_id)
                  for (parallelism, subtask), checkpoint_id in self.finished.items()]
        return items

    @classmethod
    def from_state(cls, items: list) -> "CommittableCollector":
        """
        >>> before = CommittableCollector(); before.add(Committable(3, 0, 1, ("x",), final=True))
        >>> after = CommittableCollector.from_state(before.to_state())
        >>> after.finished, after.take_ready(3)
        ({(1, 0): 3}, (3, ('x',)))
        """
        collector = cls()
        for item in items:
            if isinstance(item, Committable):
                collector.add(item)
            else:
                _, parallelism, subtask, checkpoint_id = item
                collector.finished[(parallelism, subtask)] = checkpoint_id
        return collector
