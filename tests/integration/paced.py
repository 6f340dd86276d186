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
                 end_after_checkpoints: int = 0, together: str | None = None):
        if per_checkpoint is not None and together is None and inner.parallel:
            raise ValueError("a paced parallel source needs a `together` directory: see the module docstring")
        # one meeting place per job execution (its attempts are told apart by their number)
        self.together = os.path.join(together, uuid.uuid4().hex) if together else None
        self.inner = inner
        self.per_checkpoint = per_checkpoint
        self.end_when = end_when
        self.end_after_checkpoints = end_after_checkpoints
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
        self.inner.snapshot_taken(checkpoint_id, splits)

    def assigned_splits(self):
        return self.inner.assigned_splits()

    def backlogged_splits(self):
        return self.inner.backlogged_splits()

    def restore_state(self, splits: list) -> None:
        self.inner.restore_state(splits)

    def close(self) -> None:
        self.inner.close()


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
