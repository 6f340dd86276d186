"""Fault injection for chaos tests: each planned fault is a token file that one process consumes.

``os.remove`` succeeds for exactly one caller, so a fault fires once however many subtasks and attempts
reach its point. Everything here is picklable and importable on the executors (tests/ is on their path).
"""

from __future__ import annotations

import os
import signal

from fsspec.implementations.local import LocalFileSystem

from operators import FileSink, MapFunction


def plan(directory: str, *faults: str) -> str:
    os.makedirs(directory, exist_ok=True)
    for fault in faults:
        open(os.path.join(directory, fault), "w").close()
    return directory


def consume(directory: str, fault: str) -> bool:
    try:
        os.remove(os.path.join(directory, fault))
        return True
    except FileNotFoundError:
        return False


def remaining(directory: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if not name.startswith("stopped-"))


def fire(how: str, where: str, directory: str | None = None) -> None:
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "stop":  # hang: the process stops until SIGCONT or SIGKILL; the test finds it by its pid file
        with open(os.path.join(directory, f"stopped-{os.getpid()}"), "w"):
            pass
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    raise RuntimeError(f"chaos: injected failure {where}")


def stopped_pids(directory: str) -> list[int]:
    """Processes a ``stop`` fault stopped (SIGKILL them when the test ends, whatever it found)."""
    return [int(name.split("-", 1)[1]) for name in os.listdir(directory) if name.startswith("stopped-")]


class ChaosMap(MapFunction):
    """Passes records through; once it has seen ``after`` records and a completed checkpoint, fires a planned
    fault (checked on every record and every checkpoint notification, so it fires even when the input ran out
    first: pair it with a source that holds its end until the faults fired, see tests/integration/paced.py).
    ``fresh_checkpoints``: that many checkpoints must complete after the ``after`` records, so that the checkpoint a
    restore goes back to was taken in the middle of the input, not at its start."""

    def __init__(self, directory: str, fault: str, how: str, after: int, needs_checkpoint: bool = True,
                 fresh_checkpoints: int = 0):
        self.directory, self.fault, self.how, self.after = directory, fault, how, after
        self.needs_checkpoint = needs_checkpoint  # False for jobs without checkpoints (batch mode)
        self.fresh_checkpoints = fresh_checkpoints

    def open(self, runtime_context):
        self.seen = 0
        self.checkpoints = 0
        self.fresh = 0  # checkpoints completed once `after` records were seen
        self.tried = False  # a fault is planned once: after one try (this subtask's or another's) it is gone

    def _maybe_fire(self, where: str) -> None:
        if self.tried or self.seen < self.after or (self.needs_checkpoint and not self.checkpoints) \
                or self.fresh < self.fresh_checkpoints:
            return
        self.tried = True
        if consume(self.directory, self.fault):
            fire(self.how, where, self.directory)

    def notify_checkpoint_complete(self, checkpoint_id):
        self.checkpoints += 1
        self.fresh += self.seen >= self.after
        self._maybe_fire(f"after checkpoint {checkpoint_id} and {self.seen} records")

    def map(self, value):
        self.seen += 1
        self._maybe_fire(f"after {self.seen} records")
        return value


class ChaosFileSink(FileSink):
    """A FileSink that dies between pre-commit and commit when its fault is planned (raise or SIGKILL)."""

    def __init__(self, path: str, directory: str, **kwargs):
        super().__init__(path, **kwargs)
        self.directory = directory

    def commit(self, transaction):
        for how in ("raise", "kill"):
            if consume(self.directory, f"{how}-before-commit"):
                fire(how, "between pre-commit and commit")
        super().commit(transaction)


class KillsMidUpload:
    """Mixed into an fsspec filesystem: it SIGKILLs the writer halfway through a state file, when
    ``kill-during-upload`` is planned in ``chaos_directory``."""

    chaos_directory = None  # set per test; travels with the pickled filesystem instance

    def __init__(self, *args, chaos_directory=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.chaos_directory = chaos_directory

    def _open(self, path, mode="rb", **kwargs):
        handle = super()._open(path, mode, **kwargs)
        if "w" in mode and path.endswith(".arrow") and self.chaos_directory \
                and consume(self.chaos_directory, "kill-during-upload"):
            handle.write(b"half a state file")
            handle.flush()
            fire("kill", "during a checkpoint upload")
        return handle


class ChaosUploadFileSystem(KillsMidUpload, LocalFileSystem):
    """Local checkpoint storage that SIGKILLs the writer halfway through a state file, when planned."""


def dying_before_commit(sink, directory: str, prefix: str = ""):
    """``sink`` (a two-phase-commit sink, or a sink with one committer), made to die once around a commit: between
    pre-commit and commit when ``raise-before-commit`` or ``kill-before-commit`` is planned in ``directory`` (for a
    database sink, between PREPARE and COMMIT PREPARED; for a table, between the files' upload and the table's
    commit), right after the commit when ``kill-after-commit`` is (before the checkpoint that follows records it).
    ``prefix``: of the fault names, to plan faults for two sinks of one job apart."""
    sink.__class__ = type(f"Dying{type(sink).__name__}", (_DyingBeforeCommit, type(sink)), {})
    sink.chaos_directory = directory
    sink.chaos_prefix = prefix
    return sink


class _DyingBeforeCommit:
    chaos_directory: str
    chaos_prefix = ""

    def commit(self, *transaction):
        for how in ("raise", "kill"):
            if consume(self.chaos_directory, f"{self.chaos_prefix}{how}-before-commit"):
                fire(how, "between pre-commit and commit")
        super().commit(*transaction)
        if consume(self.chaos_directory, f"{self.chaos_prefix}kill-after-commit"):
            fire("kill", "right after a commit")
