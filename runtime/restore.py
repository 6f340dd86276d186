"""Restoring state from a checkpoint, possibly at another parallelism.

The driver plans (:func:`plan_restore`): for every operator subtask of the new job, which state files to
read and which key groups of them. Each task then reads its own share (:func:`restore_operator`) before
its operators open. Keyed state moves by key group: a subtask reads exactly the key groups the
key-group formula assigns it. Operator list state is dealt round-robin: the lists of all old subtasks,
concatenated in subtask order, item ``j`` going to new subtask ``j % parallelism`` (Flink's even split);
lists named ``union:...`` go whole to every subtask (Flink's union redistribution).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from runtime.errors import IncompatibleCheckpointError
from runtime.graph import JobGraph
from runtime.key_groups import key_group_range
from state_backends.storage import OPERATOR_STATE_GROUP

__all__ = ["RestoreSpec", "plan_restore", "restore_operator", "check_compatible", "UNION_PREFIX"]

UNION_PREFIX = "union:"  # operator list state every subtask receives whole (each keeps what it owns)


@dataclass(frozen=True)
class RestoreSpec:
    """What one operator subtask reads: files holding its key groups, and every operator-state file."""

    checkpoint_id: int
    keyed_files: tuple  # file entries of _metadata
    operator_files: tuple
    key_groups: tuple[int, int]  # inclusive range this subtask owns


def check_compatible(metadata: dict, graph: JobGraph) -> None:
    """Raise IncompatibleCheckpointError if ``metadata`` cannot be restored into ``graph``."""
    checkpoint_id = metadata["checkpoint_id"]
    if metadata["max_parallelism"] != graph.max_parallelism:
        raise IncompatibleCheckpointError(
            f"Checkpoint {checkpoint_id} was taken with max parallelism {metadata['max_parallelism']}, but the job "
            f"now has {graph.max_parallelism}. Key groups cannot be remapped: leave set_max_parallelism() unset "
            f"(the checkpoint's value is then used) or set it to {metadata['max_parallelism']}.")
    uids = {op.uid for op in graph.operators}
    orphaned = sorted(uid for uid, op in metadata["operators"].items() if op.get("files") and uid not in uids)
    if orphaned:
        names = [metadata["operators"][uid].get("name", "?") for uid in orphaned]
        raise IncompatibleCheckpointError(
            f"Checkpoint {checkpoint_id} has state for operators the job no longer has: "
            f"{', '.join(f'{u} ({n})' for u, n in zip(orphaned, names))}. If you changed the job, give its "
            "stateful operators the same .uid(...) as before (derived uids change when the graph changes).")


def plan_restore(metadata: dict, graph: JobGraph) -> dict[str, dict[int, RestoreSpec]]:
    """``{operator uid: {subtask: RestoreSpec}}`` for every operator with state in the checkpoint."""
    check_compatible(metadata, graph)
    checkpoint_id = metadata["checkpoint_id"]
    plan: dict[str, dict[int, RestoreSpec]] = {}
    for node in graph.operators:
        files = metadata["operators"].get(node.uid, {}).get("files", [])
        if not files:
            continue
        files = sorted(files, key=lambda f: f["subtask"])
        operator_files = tuple(f for f in files if OPERATOR_STATE_GROUP in f["key_groups"])
        specs = {}
        for subtask in range(node.parallelism):
            owned = key_group_range(graph.max_parallelism, node.parallelism, subtask)
            keyed = tuple(f for f in files if any(g in owned for g in f["key_groups"] if g != OPERATOR_STATE_GROUP))
            specs[subtask] = RestoreSpec(checkpoint_id, keyed, operator_files, (owned.start, owned.end))
        plan[node.uid] = specs
    return plan


def restore_operator(storage, spec: RestoreSpec, operator, backend, subtask: int, parallelism: int) -> None:
    """Load one operator subtask's state (runs on the executor, before the operator opens)."""
    if backend is not None:
        start, end = spec.key_groups
        wanted = set(range(start, end + 1))
        for file in spec.keyed_files:
            for group, payload in storage.read_state_rows(spec.checkpoint_id, file, wanted):
                backend.restore_key_group(group, payload)
    if spec.operator_files:
        combined: dict[str, list] = {}
        for file in spec.operator_files:
            for _, payload in storage.read_state_rows(spec.checkpoint_id, file, {OPERATOR_STATE_GROUP}):
                for name, items in pickle.loads(payload).items():
                    combined.setdefault(name, []).extend(items)
        share = {name: items if name.startswith(UNION_PREFIX) else items[subtask::parallelism]
                 for name, items in combined.items()}
        operator.restore_operator_state(share)
