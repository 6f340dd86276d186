"""A checkpoint's life as small values, and the protocol's decisions as pure functions (no I/O, no clock).

- :class:`PendingCheckpoint` collects one acknowledgement per chain subtask; :meth:`~PendingCheckpoint.acknowledge`
  says what an ack did (:class:`AckResult`).
- :class:`CompletedCheckpoint` is what ``_metadata`` describes: frozen, passed between the coordinator,
  restore planning, inspection and storage, converted to and from ``_metadata`` in one place
  (:meth:`~CompletedCheckpoint.to_metadata`, :meth:`~CompletedCheckpoint.from_metadata`).
- :class:`StateHandle` is one state file of one operator subtask, with the key groups it holds;
  :class:`RestoreSpec` is what one operator subtask reads on a restore.

The coordinator reads the facts (time, pending checkpoints, acks), asks these functions and objects what to
do, and carries it out. Tested without Spark.

>>> pending = PendingCheckpoint(CheckpointId(1), 0.0, frozenset({SubtaskId(0, 0), SubtaskId(0, 1)}))
>>> pending.acknowledge(SubtaskAck(SubtaskId(0, 0)))
<AckResult.SUCCESS: 'success'>
>>> pending.acknowledge(SubtaskAck(SubtaskId(0, 0)))
<AckResult.DUPLICATE: 'duplicate'>
>>> pending.is_complete
False
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping

from runtime.ids import ChainIndex, CheckpointId, KeyGroup, SubtaskIndex

__all__ = ["UNION_PREFIX", 
    "OPERATOR_STATE_GROUP",
    "NATIVE_STATE_GROUP",
    "HEAP_GROUPS_STATE_GROUP",
    "SharedFile",
    "StateTableFile",
    "CHANNEL_KEY_GROUP_BASE",
    "CHANNEL_STATE_GROUP",
    "PINNED_CHANNEL_STATE_GROUP",
    "METADATA_FORMAT",
    "SubtaskId",
    "StateHandle",
    "SubtaskAck",
    "AckResult",
    "CheckpointStats",
    "should_trigger",
    "PendingCheckpoint",
    "OperatorState",
    "CompletedCheckpoint",
    "RestoreSpec",
]

# The "key group" under which an operator subtask's non-keyed (operator list) state is stored.
OPERATOR_STATE_GROUP = KeyGroup(-1)
# Channel state (the records in flight at an unaligned checkpoint) is stored in the file of the chain's head
# operator under groups of its own: records of a keyed edge by their key group (the group plus this base, so a
# rescaled restore routes them); records of rebalance/shuffle/rescale edges, which any subtask may take, under
# CHANNEL_STATE_GROUP; records of forward, broadcast and custom edges, which belong to this subtask only,
# under PINNED_CHANNEL_STATE_GROUP.
CHANNEL_KEY_GROUP_BASE = 1 << 16  # above any key group (max parallelism is at most 32,768)
CHANNEL_STATE_GROUP = KeyGroup(-2)
PINNED_CHANNEL_STATE_GROUP = KeyGroup(-3)
# The row holding the manifest of a keyed backend's native incremental snapshot (RocksDB's files, listed in
# state_backends.rocksdb.incremental), in place of one row per key group.
NATIVE_STATE_GROUP = KeyGroup(-4)
# The row holding the manifest of an incremental heap snapshot (which shared rows file holds each key group:
# state_backends.heap.incremental).
HEAP_GROUPS_STATE_GROUP = KeyGroup(-5)
UNION_PREFIX = "union:"  # operator list state every subtask receives whole on a restore (Flink's union state)
METADATA_FORMAT = 2  # 2: a savepoint's keyed state as typed tables (StateTableFile); 1 reads as before


@dataclass(frozen=True, order=True)
class SubtaskId:
    """One chain subtask: the unit that acknowledges a checkpoint."""

    chain: ChainIndex
    subtask: SubtaskIndex


@dataclass(frozen=True)
class SharedFile:
    """A file stored once and referenced by every checkpoint that needs it (an SST file of an incremental
    RocksDB checkpoint, the rows file of an incremental heap checkpoint): its path relative to the job's
    directory, size, checksum (of its bytes; of its rows for a rows file), and the checkpoint that uploaded it.

    >>> f = SharedFile("shared/count/ab12-000009.sst", 4096, "crc32:0badf00d", 7)
    >>> SharedFile.from_metadata(f.to_metadata()) == f
    True
    """

    path: str
    size: int
    checksum: str
    uploaded_in: CheckpointId

    def to_metadata(self) -> dict:
        return {"path": self.path, "size": self.size, "checksum": self.checksum, "uploaded_in": self.uploaded_in}

    @classmethod
    def from_metadata(cls, entry: Mapping) -> "SharedFile":
        return cls(str(entry["path"]), int(entry["size"]), str(entry["checksum"]),
                   CheckpointId(int(entry["uploaded_in"])))


@dataclass(frozen=True)
class StateTableFile:
    """One keyed state of one operator subtask as an Arrow table of typed columns (:mod:`state_backends.
    state_columns`): how a savepoint stores keyed state. Its path is relative to the checkpoint's directory, its
    checksum is of its bytes, and ``key_groups`` are those it holds rows of.

    >>> f = StateTableFile("count", "count/count-1a2b3c4d/0.arrow", 4096, "crc32:0badf00d", (3, 9))
    >>> StateTableFile.from_metadata(f.to_metadata()) == f
    True
    """

    state: str
    path: str
    size: int
    checksum: str
    key_groups: tuple[KeyGroup, ...]

    def to_metadata(self) -> dict:
        return {"state": self.state, "path": self.path, "size": self.size, "checksum": self.checksum,
                "key_groups": list(self.key_groups)}

    @classmethod
    def from_metadata(cls, entry: Mapping) -> "StateTableFile":
        return cls(str(entry["state"]), str(entry["path"]), int(entry["size"]), str(entry["checksum"]),
                   tuple(KeyGroup(int(g)) for g in entry["key_groups"]))


@dataclass(frozen=True)
class StateHandle:
    """One state file: whose it is, where (relative to its checkpoint's directory), and what it holds.

    >>> handle = StateHandle("count", 1, "count/1.arrow", 512, (64, 70, OPERATOR_STATE_GROUP))
    >>> handle.keyed_groups, handle.has_operator_state, handle.has_channel_state
    ((64, 70), True, False)
    >>> StateHandle("count", 1, "count/1.arrow", 512, (64, CHANNEL_KEY_GROUP_BASE + 64)).channel_key_groups
    (64,)
    >>> StateHandle.from_metadata(handle.to_metadata()) == handle
    True
    """

    uid: str
    subtask: SubtaskIndex
    path: str
    size: int
    key_groups: tuple[KeyGroup, ...]  # in the file's batch order
    checksum: str | None = None  # '<algorithm>:<hex>' of its rows (storage.checksum); None before checksums
    # An incremental snapshot (RocksDB's files, or heap rows files): the key groups it covers (inclusive), and the
    # shared files it uses; its state file holds a manifest row (NATIVE_STATE_GROUP or HEAP_GROUPS_STATE_GROUP).
    native_range: tuple[KeyGroup, KeyGroup] | None = None
    shared: tuple[SharedFile, ...] = ()
    # A savepoint's keyed state (format 2): a table per state, beside the state file (which keeps the rest).
    tables: tuple[StateTableFile, ...] = ()

    @property
    def keyed_groups(self) -> tuple[KeyGroup, ...]:
        groups = tuple(g for g in self.key_groups if 0 <= g < CHANNEL_KEY_GROUP_BASE)
        if self.native_range is not None:
            groups += tuple(KeyGroup(g) for g in range(self.native_range[0], self.native_range[1] + 1))
        if self.tables:
            groups += tuple(sorted({g for table in self.tables for g in table.key_groups} - set(groups)))
        return groups

    @property
    def is_native(self) -> bool:
        return self.native_range is not None

    def uploaded_bytes(self, checkpoint_id: CheckpointId) -> int:
        """What checkpoint ``checkpoint_id`` stored for this handle: its file and the shared files it uploaded."""
        return (self.size + sum(f.size for f in self.shared if f.uploaded_in == checkpoint_id)
                + sum(t.size for t in self.tables))

    @property
    def full_bytes(self) -> int:
        """Its file and every shared file it references: what a restore reads."""
        return self.size + sum(f.size for f in self.shared) + sum(t.size for t in self.tables)

    @property
    def has_operator_state(self) -> bool:
        return OPERATOR_STATE_GROUP in self.key_groups

    @property
    def channel_key_groups(self) -> tuple[KeyGroup, ...]:
        """The key groups of the in-flight records of keyed edges it holds (channel state)."""
        return tuple(KeyGroup(g - CHANNEL_KEY_GROUP_BASE) for g in self.key_groups if g >= CHANNEL_KEY_GROUP_BASE)

    @property
    def has_channel_state(self) -> bool:
        return any(g >= CHANNEL_KEY_GROUP_BASE or g in (CHANNEL_STATE_GROUP, PINNED_CHANNEL_STATE_GROUP)
                   for g in self.key_groups)

    def to_metadata(self) -> dict:
        entry = {"uid": self.uid, "subtask": self.subtask, "path": self.path, "size": self.size,
                 "key_groups": list(self.key_groups)}
        if self.checksum is not None:
            entry["checksum"] = self.checksum
        if self.native_range is not None:
            entry["native_range"] = list(self.native_range)
            entry["shared"] = [f.to_metadata() for f in self.shared]
        if self.tables:
            entry["tables"] = [t.to_metadata() for t in self.tables]
        return entry

    @classmethod
    def from_metadata(cls, entry: Mapping) -> "StateHandle":
        native = entry.get("native_range")
        return cls(str(entry["uid"]), SubtaskIndex(int(entry["subtask"])), str(entry["path"]), int(entry["size"]),
                   tuple(KeyGroup(int(g)) for g in entry["key_groups"]), entry.get("checksum"),
                   None if native is None else (KeyGroup(int(native[0])), KeyGroup(int(native[1]))),
                   tuple(SharedFile.from_metadata(f) for f in entry.get("shared", ())),
                   tuple(StateTableFile.from_metadata(t) for t in entry.get("tables", ())))


@dataclass(frozen=True)
class SubtaskAck:
    """What one chain subtask contributed to a checkpoint: its state files, timings, source positions."""

    subtask: SubtaskId
    state: tuple[StateHandle, ...] = ()
    sync_ms: float = 0.0
    async_ms: float = 0.0
    alignment_ms: float = 0.0
    source_positions: Mapping[str, str] = field(default_factory=dict)  # operator uid -> repr of position
    start_delay_ms: float = 0.0
    persisted_bytes: int = 0  # records in flight stored as channel state (an unaligned checkpoint), pickled
    unaligned: bool = False


class AckResult(Enum):
    """What an acknowledgement did to a pending checkpoint (Flink's ``TaskAcknowledgeResult``).

    Only SUCCESS keeps the ack's state files; the coordinator discards those of UNKNOWN and DISCARDED acks
    (a subtask the checkpoint did not expect, or a checkpoint aborted meanwhile) and ignores a DUPLICATE.
    """

    SUCCESS = "success"
    DUPLICATE = "duplicate"
    UNKNOWN = "unknown"
    DISCARDED = "discarded"


@dataclass(frozen=True)
class CheckpointStats:
    """Timings and size of one completed checkpoint (the worst subtask's sync, async and alignment, and its
    start delay: from the trigger to the subtask's first barrier, which shows barriers queued behind data)."""

    checkpoint_id: CheckpointId
    duration_ms: float
    sync_ms: float
    async_ms: float
    alignment_ms: float
    bytes: int
    completed_at: float = 0.0  # wall clock, epoch seconds: with duration_ms, when the checkpoint ran
    start_delay_ms: float = 0.0
    persisted_bytes: int = 0  # in-flight records stored as channel state (Flink's "persisted data")
    unaligned: bool = False  # some subtask took it unaligned (from the start, or after the aligned timeout)

    def to_metadata(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_metadata(cls, entry: Mapping) -> "CheckpointStats":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in entry.items() if k in names})


def should_trigger(now_ms: float, interval_ms: float | None, last_trigger_ms: float | None,
                   last_completion_ms: float | None, min_pause_ms: float, pending: int, max_concurrent: int,
                   all_subtasks_running: bool) -> bool:
    """Whether to start a checkpoint now.

    >>> should_trigger(1000, 100, 850, None, 0, pending=0, max_concurrent=1, all_subtasks_running=True)
    True
    >>> should_trigger(1000, 100, 950, None, 0, pending=0, max_concurrent=1, all_subtasks_running=True)
    False
    """
    if interval_ms is None or not all_subtasks_running or pending >= max_concurrent:
        return False
    if last_trigger_ms is not None and now_ms - last_trigger_ms < interval_ms:
        return False
    if last_completion_ms is not None and now_ms - last_completion_ms < min_pause_ms:
        return False
    return True


class PendingState(Enum):
    COLLECTING = "collecting"
    DISCARDED = "discarded"


@dataclass
class PendingCheckpoint:
    """A triggered checkpoint collecting acknowledgements from every expected chain subtask."""

    checkpoint_id: CheckpointId
    triggered_ms: float
    expected: frozenset[SubtaskId]
    acks: dict[SubtaskId, SubtaskAck] = field(default_factory=dict)
    state: PendingState = PendingState.COLLECTING

    def acknowledge(self, ack: SubtaskAck) -> AckResult:
        """Record ``ack`` if it is the first from an expected subtask of a checkpoint still collecting."""
        if self.state is PendingState.DISCARDED:
            return AckResult.DISCARDED
        if ack.subtask not in self.expected:
            return AckResult.UNKNOWN
        if ack.subtask in self.acks:
            return AckResult.DUPLICATE
        self.acks[ack.subtask] = ack
        return AckResult.SUCCESS

    def discard(self) -> None:
        """The checkpoint was aborted: acks arriving from now on are DISCARDED."""
        self.state = PendingState.DISCARDED

    @property
    def is_complete(self) -> bool:
        return self.state is PendingState.COLLECTING and len(self.acks) == len(self.expected)

    def timed_out(self, now_ms: float, timeout_ms: float) -> bool:
        return now_ms - self.triggered_ms > timeout_ms

    def stats(self, now_ms: float, completed_at: float = 0.0) -> CheckpointStats:
        acks = list(self.acks.values())
        return CheckpointStats(self.checkpoint_id, round(now_ms - self.triggered_ms, 2),
                               round(max((a.sync_ms for a in acks), default=0.0), 3),
                               round(max((a.async_ms for a in acks), default=0.0), 3),
                               round(max((a.alignment_ms for a in acks), default=0.0), 3),
                               sum(h.uploaded_bytes(self.checkpoint_id) for a in acks for h in a.state), completed_at,
                               round(max((a.start_delay_ms for a in acks), default=0.0), 3),
                               sum(a.persisted_bytes for a in acks), any(a.unaligned for a in acks))


@dataclass(frozen=True)
class OperatorState:
    """One operator's part of a completed checkpoint: its state files and its sources' positions.

    ``source_positions`` maps a subtask index to the repr of that source subtask's position (for people and
    the CLI; the position itself is in the operator state files).
    """

    uid: str
    name: str
    parallelism: int
    handles: tuple[StateHandle, ...] = ()
    source_positions: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletedCheckpoint:
    """A committed checkpoint: what its ``_metadata`` says.

    >>> checkpoint = CompletedCheckpoint(CheckpointId(3), "job", 0, 0, 2, 128, (
    ...     OperatorState("count", "count", 2, (StateHandle("count", 0, "count/0.arrow", 10, (5,)),)),))
    >>> CompletedCheckpoint.from_metadata(checkpoint.to_metadata()) == checkpoint
    True
    >>> checkpoint.operator("count").handles[0].path, checkpoint.bytes
    ('count/0.arrow', 10)
    """

    checkpoint_id: CheckpointId
    job_name: str
    timestamp_ms: int
    attempt: int
    parallelism: int  # the job's: its highest operator parallelism (slots)
    max_parallelism: int
    operators: tuple[OperatorState, ...]
    stats: CheckpointStats | None = None
    savepoint: bool = False  # taken by hand (trigger_savepoint, stop_with_savepoint), in a directory of its own

    def operator(self, uid: str) -> OperatorState | None:
        return next((op for op in self.operators if op.uid == uid), None)

    @property
    def state_handles(self) -> tuple[StateHandle, ...]:
        return tuple(h for op in self.operators for h in op.handles)

    @property
    def bytes(self) -> int:
        return sum(h.size for h in self.state_handles)

    def shared_paths(self) -> set[str]:
        """The shared files (of incremental checkpoints) this checkpoint's state refers to, stored by it or earlier.

        >>> CompletedCheckpoint(CheckpointId(1), "job", 0, 0, 1, 128, ()).shared_paths()
        set()
        """
        return {f.path for h in self.state_handles for f in h.shared}

    @classmethod
    def from_acks(cls, pending: PendingCheckpoint, job_name: str, operators: Iterable[tuple[str, str, int]],
                  max_parallelism: int, attempt: int, timestamp_ms: int,
                  stats: CheckpointStats) -> "CompletedCheckpoint":
        """Assemble a completed checkpoint from a pending one's acks; ``operators`` are the job's
        ``(uid, name, parallelism)`` in graph order."""
        handles: dict[str, list[StateHandle]] = {}
        positions: dict[str, dict[int, str]] = {}
        for ack in sorted(pending.acks.values(), key=lambda a: a.subtask):
            for handle in ack.state:
                handles.setdefault(handle.uid, []).append(handle)
            for uid, position in ack.source_positions.items():
                positions.setdefault(uid, {})[int(ack.subtask.subtask)] = position
        states = tuple(OperatorState(uid, name, parallelism, tuple(handles.get(uid, ())), positions.get(uid, {}))
                       for uid, name, parallelism in operators)
        return cls(pending.checkpoint_id, job_name, timestamp_ms, attempt,
                   max((op.parallelism for op in states), default=1), max_parallelism, states, stats)

    def to_metadata(self) -> dict:
        """The JSON-able content of ``_metadata``."""
        return {
            "format": METADATA_FORMAT,
            "type": "savepoint" if self.savepoint else "checkpoint",
            "checkpoint_id": self.checkpoint_id,
            "job_name": self.job_name,
            "timestamp_ms": self.timestamp_ms,
            "attempt": self.attempt,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "operators": {op.uid: {"name": op.name, "parallelism": op.parallelism,
                                   "files": [h.to_metadata() for h in op.handles]} for op in self.operators},
            "source_offsets": {op.uid: {str(s): p for s, p in sorted(op.source_positions.items())}
                               for op in self.operators if op.source_positions},
            "stats": self.stats.to_metadata() if self.stats is not None else None,
        }

    @classmethod
    def from_metadata(cls, data: Mapping[str, Any]) -> "CompletedCheckpoint":
        """Parse ``_metadata``; raises ``ValueError`` (or ``KeyError``/``TypeError``) when it is malformed."""
        if data.get("format", METADATA_FORMAT) > METADATA_FORMAT:
            raise ValueError(f"metadata format {data['format']} is newer than this Chandy reads "
                             f"({METADATA_FORMAT}): restore it with a newer Chandy")
        positions = data.get("source_offsets") or {}
        operators = tuple(
            OperatorState(uid, str(op.get("name", uid)), int(op.get("parallelism", 1)),
                          tuple(StateHandle.from_metadata(f) for f in op.get("files", [])),
                          {int(s): str(p) for s, p in positions.get(uid, {}).items()})
            for uid, op in data["operators"].items())
        stats = data.get("stats")
        parallelism = data.get("parallelism") or max((op.parallelism for op in operators), default=1)
        return cls(CheckpointId(int(data["checkpoint_id"])), str(data.get("job_name", "")),
                   int(data.get("timestamp_ms", 0)), int(data.get("attempt", 0)), int(parallelism),
                   int(data["max_parallelism"]), operators,
                   CheckpointStats.from_metadata(stats) if stats else None, data.get("type") == "savepoint")


@dataclass(frozen=True)
class RestoreSpec:
    """What one operator subtask reads: files holding its key groups, and every operator-state file; for the
    head of a chain, the files with channel state it takes (records in flight at an unaligned checkpoint)."""

    checkpoint_id: CheckpointId
    keyed: tuple[StateHandle, ...]
    operator: tuple[StateHandle, ...]
    key_groups: tuple[KeyGroup, KeyGroup]  # inclusive range this subtask owns
    channel: tuple[StateHandle, ...] = ()
