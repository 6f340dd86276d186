"""Every error Chandy raises, under one root.

Each class has one meaning, and each message names the thing at fault (operator, subtask, checkpoint)
and the fix, so that a user reading only the message knows what to do next.
"""

from __future__ import annotations

__all__ = [
    "ChandyError",
    "JobGraphError",
    "UnpicklableFunctionError",
    "UnsupportedKeyError",
    "InsufficientSlotsError",
    "JobFailedError",
    "JobCancelledError",
    "RecordEncodingError",
    "CheckpointError",
    "StorageUnreachableError",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "IncompatibleCheckpointError",
]


class ChandyError(Exception):
    """Root of every error raised by Chandy."""


class JobGraphError(ChandyError, ValueError):
    """The job as written cannot run (no sink, duplicate uid, bad parallelism ...). Raised before launch."""


class UnpicklableFunctionError(JobGraphError):
    """A user function cannot be shipped to the executors."""

    def __init__(self, operator_name: str, cause: BaseException):
        self.operator_name = operator_name
        super().__init__(
            f"The function of operator '{operator_name}' cannot be pickled: "
            f"{type(cause).__name__}: {cause}. Functions run on Spark executors, so everything they "
            "capture must be picklable: create locks, sockets, clients, open files and SparkSessions "
            "inside open() instead of capturing them."
        )


class UnsupportedKeyError(ChandyError, TypeError):
    """A key of a type that has no stable, cross-process hash."""


class InsufficientSlotsError(ChandyError):
    """The Spark cluster cannot run every subtask of the job at once."""

    def __init__(self, needed: int, available: int, master: str):
        self.needed = needed
        self.available = available
        super().__init__(
            f"The job needs {needed} Spark task slots (its highest parallelism; all subtasks run at once "
            f"in one barrier stage) but the cluster ({master}) offers {available}. Lower the job's "
            f"parallelism to {available} or less, or give Spark more executor cores "
            f"(e.g. --master local[{needed}] or more --executor-cores / --num-executors)."
        )


class JobFailedError(ChandyError):
    """A job failed on the executors. ``user_traceback`` is the traceback from the failing task."""

    def __init__(self, message: str, operator_name: str | None = None, subtask: int | None = None,
                 user_traceback: str | None = None):
        self.operator_name = operator_name
        self.subtask = subtask
        self.user_traceback = user_traceback
        text = message
        if user_traceback:
            text += "\n\nTraceback from the executor:\n" + user_traceback.rstrip()
        super().__init__(text)


class JobCancelledError(ChandyError):
    """The job was cancelled through its JobClient before it finished."""


class RecordEncodingError(ChandyError, TypeError):
    """A record does not match the output type its operator declared."""


class CheckpointError(ChandyError):
    """Root of errors about checkpoints and their storage."""


class StorageUnreachableError(CheckpointError):
    """The checkpoint storage cannot be listed or written."""

    def __init__(self, url: str, cause: BaseException):
        super().__init__(
            f"Checkpoint storage {url} is not usable: {type(cause).__name__}: {cause}. Check the URL, its "
            "credentials and that the directory can be created and written from the driver and executors."
        )


class CheckpointNotFoundError(CheckpointError):
    """The checkpoint to restore does not exist (or was never completed)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's ``_metadata`` or one of its state files is missing or unreadable."""


class IncompatibleCheckpointError(CheckpointError):
    """The checkpoint cannot be restored into this job (max parallelism, unknown operators)."""
