"""Snapshots of an operator under test, and restoring them, through the runtime's own checkpoint code.

Taking one does what a subtask and its snapshotter do at a barrier: the keyed backend's ``snapshot()`` and the
operator's ``snapshot_operator_state``, then the rows a state file would hold (the operator lists pickled under
``OPERATOR_STATE_GROUP``, then the key groups). Restoring one does what a restarted job does: the driver's
:func:`~runtime.driver.restore_plan.plan_restore` decides which snapshots the subtask reads and which key
groups it owns, and the executor's :func:`~runtime.executor.restore.restore_operator` loads them, dealing
operator lists round-robin. Only the files are a stand-in: the rows stay in the snapshot, in memory.

>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.descriptors import ValueStateDescriptor
>>> from state_backends.heap import HeapKeyedStateBackend
>>> from runtime.testing.declared import declare_operator
>>> declared = declare_operator(lambda ds: ds.key_by(lambda w: w).reduce(max), parallelism=1, max_parallelism=128)
>>> backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> _ = backend.get_state(ValueStateDescriptor("reduce")); backend.put_many("reduce", ["a"], ["a"])
>>> snapshot = take_snapshot(declared, declared.node.operator, backend, checkpoint_id=3, subtask_index=0)
>>> snapshot.checkpoint_id, snapshot.operator_kind, len(snapshot.rows)
(3, 'KeyedReduceOperator', 1)
>>> restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
>>> restore_snapshots([snapshot], declared, declared.node.operator, restored, subtask_index=0)
>>> [key for _, key, _ in restored.entries("reduce")]
['a']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from runtime.driver.restore_plan import plan_restore
from runtime.errors import IncompatibleCheckpointError
from runtime.executor.restore import restore_operator
from runtime.ids import CheckpointId, KeyGroup, SubtaskIndex
from runtime.keys.key_groups import key_group_range, key_group_to_subtask
from runtime.protocol.checkpoints import OPERATOR_STATE_GROUP, CompletedCheckpoint, OperatorState, StateHandle
from runtime.testing.declared import HARNESS_JOB, DeclaredOperator
from runtime.testing.errors import HarnessError
from state_backends.pickling import pickle_state

__all__ = ["HarnessSnapshot", "take_snapshot", "restore_snapshots"]


@dataclass(frozen=True)
class HarnessSnapshot:
    """The state of one operator subtask at a checkpoint: what its state file would hold, and whose it is.
    Picklable; restore it with ``harness.restore(snapshot)``, or several at once (one per subtask of the harnesses
    that took them) into a harness of another parallelism.

    >>> import pickle
    >>> snapshot = HarnessSnapshot(CheckpointId(1), "MapOperator", "Map", "map-1", SubtaskIndex(0), 1, 128, ())
    >>> pickle.loads(pickle.dumps(snapshot)) == snapshot, snapshot.has_operator_state
    (True, False)
    """

    checkpoint_id: CheckpointId
    operator_kind: str  # the operator's class: a snapshot restores only into an operator of the same kind
    operator_name: str
    uid: str
    subtask_index: SubtaskIndex
    parallelism: int
    max_parallelism: int
    rows: tuple[tuple[KeyGroup, bytes], ...]  # (key group, payload), as a state file holds them

    @property
    def has_operator_state(self) -> bool:
        return any(group == OPERATOR_STATE_GROUP for group, _ in self.rows)

    def describe(self) -> str:
        return f"{self.operator_kind} '{self.operator_name}' (uid {self.uid})"

    def handle(self) -> StateHandle:
        """The state file this snapshot stands for, as a checkpoint's ``_metadata`` would list it."""
        return StateHandle(self.uid, self.subtask_index, f"{self.uid}/{self.subtask_index}",
                           sum(len(payload) for _, payload in self.rows), tuple(group for group, _ in self.rows))


def take_snapshot(declared: DeclaredOperator, operator, backend, checkpoint_id: int,
                  subtask_index: int) -> HarnessSnapshot:
    """The synchronous part (the backend's snapshot, copies of the operator lists) and, at once, the asynchronous
    part (the rows written), as a subtask's ``_snapshot`` and the snapshotter's ``_store`` do."""
    keyed = backend.snapshot(full=True) if backend is not None else None
    lists = operator.snapshot_operator_state(CheckpointId(checkpoint_id))
    rows: list[tuple[KeyGroup, bytes]] = []
    if lists:
        rows.append((OPERATOR_STATE_GROUP, pickle_state(lists, "operator list state")))
    if keyed is not None:
        rows.extend(keyed.serialized())
    node = declared.node
    return HarnessSnapshot(CheckpointId(checkpoint_id), type(operator).__name__, node.name, node.uid,
                           SubtaskIndex(subtask_index), node.parallelism, declared.graph.max_parallelism, tuple(rows))


class _SnapshotFiles:
    """The stand-in for checkpoint storage: the rows of each snapshot's state file, read as storage reads them."""

    def __init__(self, snapshots: Sequence[HarnessSnapshot]):
        self._rows = {snapshot.handle().path: snapshot.rows for snapshot in snapshots}

    def read_state_rows(self, checkpoint_id: CheckpointId, handle: StateHandle,
                        key_groups=None) -> Iterator[tuple[KeyGroup, bytes]]:
        for group, payload in self._rows[handle.path]:
            if key_groups is None or group in key_groups:
                yield group, payload


def restore_snapshots(snapshots: Iterable[HarnessSnapshot], declared: DeclaredOperator, operator, backend,
                      subtask_index: int) -> None:
    """Load this subtask's share of ``snapshots`` into ``operator`` and ``backend``, before the operator opens."""
    snapshots = list(snapshots)
    _check_compatible(snapshots, declared, type(operator).__name__)
    snapshots.sort(key=lambda s: s.subtask_index)
    _check_complete(snapshots, declared, subtask_index, keyed=backend is not None)
    first = snapshots[0]
    with_state = tuple(snapshot.handle() for snapshot in snapshots if snapshot.rows)
    checkpoint = CompletedCheckpoint(first.checkpoint_id, HARNESS_JOB, 0, 0, first.parallelism,
                                     first.max_parallelism,
                                     (OperatorState(first.uid, first.operator_name, first.parallelism, with_state),))
    spec = plan_restore(checkpoint, declared.graph).get(first.uid, {}).get(SubtaskIndex(subtask_index))
    if spec is not None:
        restore_operator(_SnapshotFiles(snapshots), spec, operator, backend, SubtaskIndex(subtask_index),
                         declared.node.parallelism)


def _check_compatible(snapshots: list[HarnessSnapshot], declared: DeclaredOperator, kind: str) -> None:
    if not snapshots:
        raise HarnessError("restore() needs at least one snapshot: pass what harness.snapshot(...) returned.")
    if not all(isinstance(snapshot, HarnessSnapshot) for snapshot in snapshots):
        given = ", ".join(sorted({type(s).__name__ for s in snapshots if not isinstance(s, HarnessSnapshot)}))
        raise HarnessError(f"restore() takes what harness.snapshot(...) returned, not a {given}.")
    first = snapshots[0]
    taken_together = {(s.checkpoint_id, s.uid, s.operator_kind, s.parallelism, s.max_parallelism) for s in snapshots}
    if len(taken_together) > 1:
        raise IncompatibleCheckpointError(
            "The snapshots were not taken together: restore the snapshots of one checkpoint (the same checkpoint_id) "
            "of one operator, one per subtask; got " + ", ".join(
                f"checkpoint {s.checkpoint_id} of {s.describe()} at parallelism {s.parallelism}" for s in snapshots))
    subtasks = [s.subtask_index for s in snapshots]
    if len(set(subtasks)) != len(subtasks):
        raise IncompatibleCheckpointError(f"Checkpoint {first.checkpoint_id}: the snapshots name subtasks {subtasks}, "
                                          "some twice: pass each subtask's snapshot once.")
    node = declared.node
    if first.operator_kind != kind or first.uid != node.uid:
        raise IncompatibleCheckpointError(
            f"Checkpoint {first.checkpoint_id} is a snapshot of {first.describe()}, but this harness runs {kind} "
            f"'{node.name}' (uid {node.uid}): restore it into a harness built the same way as the one that took it "
            "(the same factory, the same kind of function, the same name and uid).")
    max_parallelism = declared.graph.max_parallelism
    if first.max_parallelism != max_parallelism:
        raise IncompatibleCheckpointError(
            f"Checkpoint {first.checkpoint_id} was taken with max parallelism {first.max_parallelism}, but this "
            f"harness has {max_parallelism}. Key groups cannot be remapped: build the harness with "
            f"max_parallelism={first.max_parallelism}.")


def _check_complete(snapshots: list[HarnessSnapshot], declared: DeclaredOperator, subtask_index: int,
                    keyed: bool) -> None:
    """A job's restore reads every file it needs; a harness has only the snapshots it is given, so it asks for
    the ones whose state this subtask would read."""
    first = snapshots[0]
    old_parallelism, max_parallelism = first.parallelism, first.max_parallelism
    given = {s.subtask_index for s in snapshots}
    missing: set[int] = set()
    if keyed:
        owned = key_group_range(max_parallelism, declared.node.parallelism, subtask_index)
        missing = {key_group_to_subtask(group, max_parallelism, old_parallelism) for group in owned} - given
    if any(s.has_operator_state for s in snapshots):  # dealt round-robin over the lists of every old subtask
        missing |= set(range(old_parallelism)) - given
    if missing:
        raise HarnessError(
            f"Checkpoint {first.checkpoint_id} of {first.describe()} was taken at parallelism {old_parallelism}, "
            f"and subtask {subtask_index} of {declared.node.parallelism} also reads what its subtasks "
            f"{sorted(missing)} held: pass their snapshots as well, restore(*snapshots) (keyed state moves by key "
            "group; operator list state is dealt round-robin over every subtask's lists).")
