"""Sources whose progress follows the job's checkpoints, so that tests do not depend on the machine's speed.

A test that needs "a failure after at least one completed checkpoint" or "a job still running after two
checkpoints" must not throttle its source by time: it would fail whenever the machine is slower or faster
than expected. :class:`PacedSource` wraps any source and makes progress an event instead:

- ``per_checkpoint``: each subtask emits at most that many records (rows, for a columnar source) until the
  next checkpoint completes, then that many more;
- ``end_when`` / ``end_after_checkpoints``: after the wrapped source is exhausted, the reader holds its end
  (keeps the job running, so checkpoints go on) until the picklable callable ``end_when()`` is true and the
  reader has seen that many checkpoints complete in this attempt.

Paced readers finish together: an exhausted reader marks itself in the ``together`` directory and holds its
end until every reader of its attempt has, so that every checkpoint of a test covers the whole input.

A :class:`Hold` stops one subtask's reader in its poll while a file exists, so that a test can have the other
subtasks take a checkpoint that this one has not (and a stop reach the subtasks between different barriers).

Everything here is picklable and importable on the executors (tests/ is on their path).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Callable

from operators import Source, SourceReader

IDLE_S = 0.002  # a held reader's poll waits this long, so that it does not spin on a core


class PacedSource(Source):
    def __init__(self, inner: Source, per_checkpoint: int | None = None, end_when: Callable[[], bool] | None = None,
                 end_after_checkpoints: int = 0, together: str | None = None, hold: "Hold | None" = None):
        if per_checkpoint is not None and together is None and inner.parallel:
            raise ValueError("a paced parallel source needs a `together` directory: see the module docstring")
        # one meeting place per job execution (its attempts are told apart by their number)
        self.together = os.path.join(together, uuid.uuid4().hex) if together else None
        self.inner = inner
        self.per_checkpoint = per_checkpoint
        self.end_when = end_when
        self.end_after_checkpoints = end_after_checkpoints
        self.hold = hold
        self.parallel = inner.parallel
        self.bounded = inner.bounded
        self.schema = inner.schema
        self.emits_side_outputs = getattr(inner, "emits_side_outputs", False)

    def validate(self) -> None:
        validate = getattr(self.inner, "validate", None)
        if callable(validate):
            validate()

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        reader = _PacedReader(self.inner.create_reader(subtask_index, parallelism), self.per_checkpoint,
                              self.end_when, self.end_after_checkpoints)
        reader.meeting = (self.together, subtask_index, parallelism) if self.together else None
        reader.hold, reader.subtask = self.hold, subtask_index
        return reader


def _size(batch: list) -> int:
    if batch and hasattr(batch[0], "num_rows"):  # columnar: Arrow record batches
        return sum(b.num_rows for b in batch)
    return len(batch)


class _PacedReader(SourceReader):
    def __init__(self, inner: SourceReader, per_checkpoint: int | None, end_when: Callable[[], bool] | None,
                 end_after_checkpoints: int):
        self.inner = inner
        self.per_checkpoint = per_checkpoint
        self.budget = per_checkpoint
        self.end_when = end_when
        self.end_after_checkpoints = end_after_checkpoints
        self.completed = 0  # checkpoints completed in this attempt
        self.exhausted = False
        self.union_state = inner.union_state
        self.meeting: tuple[str, int, int] | None = None  # (directory, subtask, parallelism)
        self.attempt = 0
        self.hold: Hold | None = None
        self.subtask = 0
        self.newest_checkpoint = 0  # the newest checkpoint this reader took part in

    def open(self, runtime_context) -> None:
        self.attempt = runtime_context.get_attempt_number()
        self.inner.open(runtime_context)

    def _everyone_exhausted(self) -> bool:
        if self.meeting is None:
            return True
        directory, subtask, parallelism = self.meeting
        mark = os.path.join(directory, f"a{self.attempt}-s{subtask}")
        if not os.path.exists(mark):
            os.makedirs(directory, exist_ok=True)
            open(mark, "a").close()
        return sum(name.startswith(f"a{self.attempt}-") for name in os.listdir(directory)) >= parallelism

    def poll(self, max_records: int):
        if self.hold is not None and self.hold.subtask == self.subtask:
            self.hold.wait(self.newest_checkpoint)
        if self.exhausted:
            if (self.completed >= self.end_after_checkpoints and (self.end_when is None or self.end_when())
                    and self._everyone_exhausted()):
                return None
            time.sleep(IDLE_S)
            return []
        if self.budget is not None:
            if self.budget <= 0:
                time.sleep(IDLE_S)
                return []
            max_records = min(max_records, self.budget)
        batch = self.inner.poll(max_records)
        if batch is None:
            self.exhausted = True
            return []
        if self.budget is not None:
            self.budget -= _size(batch)
        return batch

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.completed += 1
        self.budget = self.per_checkpoint
        self.inner.notify_checkpoint_complete(checkpoint_id)

    def snapshot_state(self) -> list:
        return self.inner.snapshot_state()

    def snapshot_taken(self, checkpoint_id: int, splits: list) -> None:
        self.newest_checkpoint = checkpoint_id
        if self.hold is not None and self.hold.subtask != self.subtask:
            self.hold.note_checkpoint(checkpoint_id)
        self.inner.snapshot_taken(checkpoint_id, splits)

    def assigned_splits(self):
        return self.inner.assigned_splits()

    def backlogged_splits(self):
        return self.inner.backlogged_splits()

    def restore_state(self, splits: list) -> None:
        self.inner.restore_state(splits)

    def close(self) -> None:
        self.inner.close()


class Hold:
    """Holds subtask ``subtask``'s reader in its poll while the file ``path`` exists (at most ``limit_s``): the
    checkpoints triggered meanwhile wait for it, and a stop (stop_with_savepoint) that comes meanwhile reaches
    it before their barriers. As it starts to hold, the reader writes ``path + ".held"`` with the id of the newest
    checkpoint it took part in; another reader that takes a later checkpoint while it holds writes
    ``path + ".passed"``: that checkpoint's barrier passed the other subtasks, not this one."""

    def __init__(self, path: str, subtask: int = 1, limit_s: float = 120.0):
        self.path = path
        self.subtask = subtask
        self.limit_s = limit_s

    @property
    def held(self) -> str:
        return self.path + ".held"

    @property
    def passed(self) -> str:
        return self.path + ".passed"

    def wait(self, newest_checkpoint: int) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.held + ".tmp", "w") as out:
            out.write(str(newest_checkpoint))
        os.replace(self.held + ".tmp", self.held)
        deadline = time.monotonic() + self.limit_s
        while os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(IDLE_S)
        os.remove(self.held)

    def note_checkpoint(self, checkpoint_id: int) -> None:
        try:
            with open(self.held) as held:
                newest_held = int(held.read())
        except FileNotFoundError:  # not holding
            return
        if checkpoint_id > newest_held:
            open(self.passed, "a").close()


class FileExists:
    """``end_when`` condition: a file exists (the test or an operator creates it)."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self) -> bool:
        return os.path.exists(self.path)


class DirectoryEmpty:
    """``end_when`` condition: every planned fault of a chaos directory has fired."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self) -> bool:
        return not os.listdir(self.path)
