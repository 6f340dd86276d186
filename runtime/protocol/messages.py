"""The control protocol between the driver's coordinator and the tasks: typed, immutable messages.

Every message carries the job ``attempt`` it belongs to; a receiver ignores messages of other attempts,
so a slow task of a cancelled attempt can never confuse a newer one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Message",
    "Register",
    "Addresses",
    "TaskFailed",
    "TaskFinished",
    "Cancel",
    "SubtaskFinished",
    "TriggerCheckpoint",
    "AcknowledgeCheckpoint",
    "DeclineCheckpoint",
    "NotifyCheckpointComplete",
    "NotifyCheckpointAborted",
]


@dataclass(frozen=True)
class Message:
    attempt: int


@dataclass(frozen=True)
class Register(Message):
    """Task -> coordinator: slot ``slot`` is up and its data server listens on ``host:port``."""

    slot: int
    host: str
    port: int
    pid: int


@dataclass(frozen=True)
class Addresses(Message):
    """Coordinator -> tasks: every slot's data server address, indexed by slot; sent once all registered."""

    addresses: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TaskFailed(Message):
    """Task -> coordinator: an operator (or the runtime) raised. ``traceback`` is the formatted original."""

    slot: int
    operator_name: str | None
    subtask: int
    error_type: str
    error_message: str
    traceback: str
    exception: bytes | None = None  # the pickled exception, when it pickles


@dataclass(frozen=True)
class TaskFinished(Message):
    """Task -> coordinator: every chain in the slot consumed all its input and finished."""

    slot: int


@dataclass(frozen=True)
class Cancel(Message):
    """Coordinator -> tasks: stop now; the job is cancelled or another task failed."""

    reason: str


@dataclass(frozen=True)
class SubtaskFinished(Message):
    """Task -> coordinator: one chain subtask consumed all its input (no more checkpoints can include it)."""

    chain: int
    subtask: int


@dataclass(frozen=True)
class TriggerCheckpoint(Message):
    """Coordinator -> tasks: sources, record your position and emit barrier ``checkpoint_id``."""

    checkpoint_id: int


@dataclass(frozen=True)
class AcknowledgeCheckpoint(Message):
    """Task -> coordinator: one chain subtask's state for ``checkpoint_id`` is durably stored."""

    checkpoint_id: int
    chain: int
    subtask: int
    files: tuple  # of state_backends.storage.StateFileInfo
    sync_ms: float
    async_ms: float
    alignment_ms: float
    source_offsets: dict  # operator uid -> repr of the source's position


@dataclass(frozen=True)
class DeclineCheckpoint(Message):
    """Task -> coordinator: the task cannot take part in ``checkpoint_id``."""

    checkpoint_id: int
    chain: int
    subtask: int
    reason: str


@dataclass(frozen=True)
class NotifyCheckpointComplete(Message):
    """Coordinator -> tasks: ``checkpoint_id`` is committed (and with it every earlier one)."""

    checkpoint_id: int


@dataclass(frozen=True)
class NotifyCheckpointAborted(Message):
    """Coordinator -> tasks: ``checkpoint_id`` will never complete; drop what was kept for it."""

    checkpoint_id: int
