"""The control protocol between the driver and the slots: typed, immutable messages.

Every message carries the job ``attempt`` it belongs to; a receiver ignores messages of other attempts, so a
slow slot of a cancelled attempt can never confuse a newer one. Messages about checkpoints derive from
:class:`CheckpointMessage`: the driver's control server hands them straight to the checkpoint coordinator;
everything else a slot says goes to the job master.

>>> TriggerCheckpoint(attempt=0, checkpoint_id=3)
TriggerCheckpoint(attempt=0, checkpoint_id=3, savepoint=None)
>>> isinstance(DeclineCheckpoint(0, 3, 1, 0, "disk full", DeclineKind.FAILED), CheckpointMessage)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from runtime.ids import Attempt, ChainIndex, CheckpointId, SlotIndex, SubtaskIndex

__all__ = [
    "Message",
    "Register",
    "Addresses",
    "FailurePhase",
    "SlotFailed",
    "SlotFinished",
    "Heartbeat",
    "Cancel",
    "SubtaskMetrics",
    "MetricsReport",
    "CheckpointMessage",
    "SubtaskFinished",
    "TriggerCheckpoint",
    "StopSources",
    "AcknowledgeCheckpoint",
    "DeclineKind",
    "DeclineCheckpoint",
    "NotifyCheckpointComplete",
    "NotifyCheckpointAborted",
    "QueryableStateMessage",
    "QueryableStateRegistered",
    "QueryState",
    "StateAnswer",
]


@dataclass(frozen=True)
class Message:
    attempt: Attempt


# -- slot lifecycle ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Register(Message):
    """Slot -> driver: slot ``slot`` is up and its data server listens on ``host:port``."""

    slot: SlotIndex
    host: str
    port: int
    pid: int


@dataclass(frozen=True)
class Addresses(Message):
    """Driver -> slots: every slot's data server address, indexed by slot; sent once all registered."""

    addresses: tuple[tuple[str, int], ...]


class FailurePhase(Enum):
    """Where a failure happened; a failure while loading the job or in ``open()`` may repeat on a restart."""

    LOAD = "loading the job"
    OPEN = "open()"
    RUN = "processing"
    RUNTIME = "the Chandy runtime"


@dataclass(frozen=True)
class SlotFailed(Message):
    """Slot -> driver: an operator (or the runtime) raised. ``traceback`` is the formatted original.

    ``retryable`` is False when the error would repeat on a restart (see :mod:`runtime.errors`).
    """

    slot: SlotIndex
    operator_name: str | None
    operator_uid: str | None
    subtask: SubtaskIndex
    error_type: str
    error_message: str
    traceback: str
    exception: bytes | None = None  # the pickled exception, when it pickles
    retryable: bool = True
    phase: FailurePhase = FailurePhase.RUN
    record: str | None = None  # the repr of the record whose processing raised, when known


@dataclass(frozen=True)
class SlotFinished(Message):
    """Slot -> driver: every chain subtask in the slot consumed all its input and finished."""

    slot: SlotIndex


@dataclass(frozen=True)
class Heartbeat(Message):
    """Slot -> driver, every heartbeat interval: the slot's process runs. A slot silent for longer than the
    heartbeat timeout is taken for hung (a stopped or deadlocked process, an executor whose sockets stay
    half-open), and the attempt fails."""

    slot: SlotIndex


@dataclass(frozen=True)
class Cancel(Message):
    """Driver -> slots: stop now; the job is cancelled or another slot failed."""

    reason: str


# -- metrics -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubtaskMetrics:
    """One chain subtask's counters since its attempt started (cumulative: rates are differences of two reports).

    ``records[i]``: records into the chain's operator ``i``; ``records[-1]``: records out of the chain (so operator
    ``i`` sent ``records[i + 1]``). Per input channel ``(edge id, producer, records, bytes)`` and output channel
    ``(edge id, consumer, records, bytes, seconds blocked)``; bytes count remote channels only (records between
    subtasks of one slot are never serialised). ``idle_s``: waiting for input; ``backpressured_s``: waiting for
    an output channel's credit or room. Usage of the input queues and output credits (0..1), sampled when the
    report was made. ``watermark``: the newest one the chain's operators saw (None before the first).
    ``late_dropped[i]`` and ``state[i]`` (``(entries, bytes or None)``, None without keyed state) per operator;
    ``connectors[i]``: what operator ``i``'s connector counts (a dict, e.g. a Kafka source's ``split-lag`` per
    partition), None for other operators."""

    chain: ChainIndex
    subtask: SubtaskIndex
    status: str
    records: tuple[int, ...]
    idle_s: float
    backpressured_s: float
    input_usage: float
    output_usage: float
    inputs: tuple[tuple[int, int, int, int], ...] = ()
    outputs: tuple[tuple[int, int, int, int, float], ...] = ()
    watermark: int | None = None
    late_dropped: tuple[int, ...] = ()
    state: tuple = ()
    connectors: tuple = ()


@dataclass(frozen=True)
class MetricsReport(Message):
    """Slot -> driver, every metrics interval and once more before SlotFinished: its subtasks' counters.
    ``clock_s`` is the slot's monotonic clock, so rates come from the slot's own time between two reports.
    ``startup``: the slot's start-up marks so far, ``(name, wall-clock seconds)`` (:mod:`runtime.protocol.startup`)."""

    slot: SlotIndex
    clock_s: float
    subtasks: tuple[SubtaskMetrics, ...]
    startup: tuple[tuple[str, float], ...] = ()


# -- checkpoints ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointMessage(Message):
    """A message of the checkpoint protocol (routed to and from the checkpoint coordinator)."""


@dataclass(frozen=True)
class SubtaskFinished(CheckpointMessage):
    """Slot -> coordinator: one chain subtask consumed all its input. ``state``: its final state files (Flink's
    checkpoints after tasks finish: every later checkpoint of the attempt includes them); None when it has
    none (no checkpointing). A subtask that stored one waits for a checkpoint that includes it to complete
    (its sinks commit their last transactions then); when every subtask has finished, the coordinator completes
    the job's final checkpoint from their final states alone."""

    chain: ChainIndex
    subtask: SubtaskIndex
    state: tuple | None = None  # of runtime.protocol.checkpoints.StateHandle
    source_positions: dict = field(default_factory=dict)  # operator uid -> repr of the source's final position


@dataclass(frozen=True)
class TriggerCheckpoint(CheckpointMessage):
    """Coordinator -> slots: sources, record your position and emit barrier ``checkpoint_id``. ``savepoint``:
    it is a savepoint, whose files go to that directory."""

    checkpoint_id: CheckpointId
    savepoint: str | None = None
    # The coordinator's wall clock when it triggered: barriers carry it, to measure their delay on the way.
    triggered_at_ms: int = field(default=0, repr=False, compare=False)


@dataclass(frozen=True)
class StopSources(CheckpointMessage):
    """Coordinator -> slots: the job stops with a savepoint (``stop_with_savepoint``). Source subtasks read no
    more and finish; every subtask stores its final state, and the job's final checkpoint, made of them, is
    the savepoint. ``drain``: as at the end of input (the final watermark fires every timer, operators
    finish); otherwise the input only stops, and the state keeps everything pending for a restore."""

    drain: bool = False


@dataclass(frozen=True)
class AcknowledgeCheckpoint(CheckpointMessage):
    """Slot -> coordinator: one chain subtask's state for ``checkpoint_id`` is durably stored."""

    checkpoint_id: CheckpointId
    chain: ChainIndex
    subtask: SubtaskIndex
    state: tuple = ()  # of runtime.protocol.checkpoints.StateHandle
    sync_ms: float = 0.0
    async_ms: float = 0.0
    alignment_ms: float = 0.0
    source_positions: dict = field(default_factory=dict)  # operator uid -> repr of the source's position
    start_delay_ms: float = 0.0  # from the trigger to the subtask's first barrier (its wait in queues)
    persisted_bytes: int = 0  # in-flight records it stored as channel state (unaligned), pickled
    unaligned: bool = False  # it took the checkpoint unaligned


class DeclineKind(Enum):
    """Why a subtask declines: an expected end (not a failure), a failure a later checkpoint may not
    repeat, or a failure every later checkpoint will repeat (the job fails at once)."""

    FINISHED = "finished"
    FAILED = "failed"
    FATAL = "fatal"


@dataclass(frozen=True)
class DeclineCheckpoint(CheckpointMessage):
    """Slot -> coordinator: the chain subtask cannot take part in ``checkpoint_id``."""

    checkpoint_id: CheckpointId
    chain: ChainIndex
    subtask: SubtaskIndex
    reason: str
    kind: DeclineKind = DeclineKind.FAILED


@dataclass(frozen=True)
class NotifyCheckpointComplete(CheckpointMessage):
    """Coordinator -> slots: ``checkpoint_id`` is committed (and with it every earlier one)."""

    checkpoint_id: CheckpointId


@dataclass(frozen=True)
class NotifyCheckpointAborted(CheckpointMessage):
    """Coordinator -> slots: ``checkpoint_id`` will never complete; drop what was kept for it."""

    checkpoint_id: CheckpointId


# -- queryable state ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryableStateMessage(Message):
    """A message about queryable state (routed to and from the driver's queryable-state router)."""


@dataclass(frozen=True)
class QueryableStateRegistered(QueryableStateMessage):
    """Slot -> driver: operator ``uid`` declared keyed state ``state`` queryable as ``name`` (once per slot)."""

    slot: SlotIndex
    uid: str
    state: str
    name: str
    kind: str


@dataclass(frozen=True)
class QueryState(QueryableStateMessage):
    """Driver -> the slot whose subtask owns ``key``: the value of queryable state ``name`` for ``key``."""

    request: int
    uid: str
    name: str
    key: object


@dataclass(frozen=True)
class StateAnswer(QueryableStateMessage):
    """Slot -> driver: the answer to ``request``: the value as JSON text (``null`` when the key has none), or
    ``error``, a sentence for the user; ``not_yet``: the error passes (the subtask's function has not taken the
    state since the attempt started), so the lookup may be asked again. ``waited_ms``: from the slot reading the
    query to its subtask taking it up (between two batches); ``read_ms``: reading the state and encoding it."""

    request: int
    value_json: str | None = None
    error: str | None = None
    not_yet: bool = False
    waited_ms: float = 0.0
    read_ms: float = 0.0
