"""Planning a restore on the driver: which checkpoint, whether it fits the job, which key groups go where.

:func:`resolve_restore` makes what the user asked for (an id, ``"latest"``, or a ``chk-<n>`` path)
concrete: every answer is a checkpoint whose ``_metadata`` reads and whose state files are all present;
anything else raises an error that names the problem and lists the usable checkpoints.
:func:`check_compatible` refuses checkpoints the job cannot take; :func:`plan_restore` decides, for every
operator subtask of the new job, which state files it reads and which key groups of them (the executor
reads them: :mod:`runtime.executor.restore`).
"""

from __future__ import annotations

import os
import re

from runtime.errors import CheckpointNotFoundError, CorruptCheckpointError, IncompatibleCheckpointError
from runtime.graph.job_graph import JobGraph
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import RestoreSpec
from state_backends.storage import OPERATOR_STATE_GROUP, CheckpointStorage

__all__ = ["RESTORE_CONF", "resolve_restore", "check_compatible", "plan_restore"]

RESTORE_CONF = "spark.chandy.restoreFrom"
_CHK_PATH = re.compile(r"^(?P<parent>.*)/chk-(?P<id>\d+)/?(_metadata)?$")


def resolve_restore(storage: CheckpointStorage, restore_from) -> tuple[CheckpointStorage, dict]:
    """``(storage to read from, validated metadata)`` for ``restore_from``."""
    if isinstance(restore_from, bool):
        raise TypeError(f"restore_from must be a checkpoint id, 'latest' or a path, not {restore_from!r}")
    if isinstance(restore_from, int) or (isinstance(restore_from, str) and restore_from.strip().isdigit()):
        return storage, storage.validated_metadata(int(restore_from))
    if isinstance(restore_from, str) and restore_from.strip().lower() == "latest":
        for metadata in reversed(storage.completed()):
            if not storage.problems(metadata):
                return storage, metadata
        raise CheckpointNotFoundError(f"restore_from='latest': job directory {storage.job_dir} holds no usable "
                                      "checkpoint.")
    if isinstance(restore_from, str):
        text = restore_from.strip()
        if "://" not in text:
            text = "file://" + os.path.abspath(text)
        match = _CHK_PATH.match(text.rstrip("/"))
        if match:
            other = CheckpointStorage.for_job_directory(match.group("parent"))
            return other, other.validated_metadata(int(match.group("id")))
        raise CorruptCheckpointError(f"restore_from={restore_from!r} is neither a checkpoint id, 'latest', nor the "
                                     f"path of a chk-<n> directory. {storage.usable_hint()}")
    raise TypeError(f"restore_from must be a checkpoint id, 'latest' or a path, not {type(restore_from).__name__}")


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
