"""Planning a restore on the driver: which checkpoint, whether it fits the job, which key groups go where.

:func:`resolve_restore` makes what the user asked for (an id, ``"latest"``, or a ``chk-<n>`` path)
concrete: every answer is a checkpoint whose ``_metadata`` reads and whose state files are all present;
anything else raises an error that names the problem and lists the usable checkpoints.
:func:`check_compatible` refuses checkpoints the job cannot take; :func:`plan_restore` decides, for every
operator subtask of the new job, which state files it reads and which key groups of them (the executor
reads them: :mod:`runtime.executor.restore`).

>>> from runtime import StreamExecutionEnvironment
>>> from operators import DiscardingSink
>>> from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState, StateHandle
>>> env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
>>> _ = env.from_sequence(0, 9).key_by(lambda x: x).reduce(max).uid("max").sink_to(DiscardingSink())
>>> handles = tuple(StateHandle("max", s, f"max/{s}.arrow", 100, tuple(range(64 * s, 64 * s + 64)))
...                 for s in (0, 1))  # taken at parallelism 2: subtask s held key groups 64s..64s+63
>>> checkpoint = CompletedCheckpoint(5, "job", 0, 0, 2, 128, (OperatorState("max", "Keyed Reduce", 2, handles),))
>>> plan = plan_restore(checkpoint, env.get_job_graph("job"))["max"]
>>> [(plan[s].key_groups, [h.subtask for h in plan[s].keyed]) for s in range(3)]
[((0, 42), [0]), ((43, 85), [0, 1]), ((86, 127), [1])]
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from runtime.errors import ApiUsageError, CheckpointNotFoundError, CorruptCheckpointError, IncompatibleCheckpointError
from runtime.graph.job_graph import JobGraph
from runtime.ids import CheckpointId, SubtaskIndex
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import (
    CHANNEL_STATE_GROUP,
    PINNED_CHANNEL_STATE_GROUP,
    CompletedCheckpoint,
    RestoreSpec,
)
from runtime.settings.options import option_named
from state_backends.storage import CheckpointStatus, CheckpointStorage

__all__ = ["RESTORE_CONF", "ALLOW_NON_RESTORED_CONF", "RESTORE_ENV", "RESTORE_JOB_ENV", "RestorePoint",
           "resolve_restore", "newest_restorable", "check_compatible", "plan_restore"]

log = logging.getLogger(__name__)

RESTORE_CONF = option_named("restore_from").spark_key
ALLOW_NON_RESTORED_CONF = option_named("allow_non_restored_state").spark_key
RESTORE_ENV = "CHANDY_RESTORE_FROM"  # the same for a program started with python (the conf wins) ...
RESTORE_JOB_ENV = "CHANDY_RESTORE_JOB"  # ... for the job of this name only, when set
_CHK_PATH = re.compile(r"^(?P<parent>.*)/chk-(?P<id>\d+)/?(_metadata)?$")


@dataclass(frozen=True)
class RestorePoint:
    """A checkpoint to restore, and the storage to read its files from."""

    storage: CheckpointStorage
    checkpoint: CompletedCheckpoint
    fallback: bool = False  # may an older checkpoint of the same storage replace it if it cannot be restored?
    allow_non_restored_state: bool = False  # drop the state of operators the job no longer has


def newest_restorable(storage: CheckpointStorage, below: CheckpointId | None = None,
                      excluded=frozenset()) -> RestorePoint | None:
    """The newest checkpoint (older than ``below`` when given) whose ``_metadata`` reads and whose state files
    are all present, skipping ``excluded`` ids; each checkpoint passed over gets a WARNING saying why. None
    when there is none; StorageUnreachableError when the storage cannot be read right now."""
    for stored in reversed(storage.survey()):
        checkpoint_id = stored.checkpoint_id
        if (below is not None and checkpoint_id >= below) or stored.status is CheckpointStatus.INCOMPLETE:
            continue
        if checkpoint_id in excluded:
            why = "its state could not be restored earlier in this run"
        elif stored.status is CheckpointStatus.UNREADABLE:
            why = stored.problem
        else:
            problems = storage.problems(stored.checkpoint)
            if not problems:
                return RestorePoint(storage, stored.checkpoint, fallback=True)
            why = "; ".join(problems)
        log.warning("Passing over checkpoint %d of job '%s' for an older one: %s", checkpoint_id, storage.job_name,
                    why)
    return None


def resolve_restore(storage: CheckpointStorage, restore_from) -> RestorePoint:
    """The restore point ``restore_from`` names: a checkpoint id, ``"latest"``, a ``chk-<n>`` path/URL, or a
    savepoint's directory."""
    if isinstance(restore_from, bool):
        raise ApiUsageError(f"restore_from must be a checkpoint id, 'latest' or a path, not {restore_from!r}")
    if isinstance(restore_from, int) or (isinstance(restore_from, str) and restore_from.strip().isdecimal()):
        return RestorePoint(storage, storage.validated_checkpoint(CheckpointId(int(restore_from))))
    if isinstance(restore_from, str) and restore_from.strip().lower() == "latest":
        point = newest_restorable(storage)
        if point is not None:
            return point
        raise CheckpointNotFoundError(f"restore_from='latest': job directory {storage.job_dir} holds no usable "
                                      "checkpoint.")
    if isinstance(restore_from, str):
        text = restore_from.strip()
        if "://" not in text:
            text = "file://" + os.path.abspath(text)
        match = _CHK_PATH.match(text.rstrip("/"))
        if match:
            other = CheckpointStorage.for_job_directory(match.group("parent"))
            return RestorePoint(other, other.validated_checkpoint(CheckpointId(int(match.group("id")))))
        savepoint = storage.savepoint_storage(re.sub(r"/_metadata$", "", text.rstrip("/")))
        try:
            return RestorePoint(savepoint, savepoint.validated())
        except CheckpointNotFoundError:
            pass
        raise CorruptCheckpointError(f"restore_from={restore_from!r} is neither a checkpoint id, 'latest', the path "
                                     f"of a chk-<n> directory, nor a savepoint (a directory with a _metadata file). "
                                     f"{storage.usable_hint()}")
    raise ApiUsageError(f"restore_from must be a checkpoint id, 'latest' or a path, not {type(restore_from).__name__}")


def check_compatible(checkpoint: CompletedCheckpoint, graph: JobGraph, allow_non_restored_state: bool = False) -> None:
    """Raise IncompatibleCheckpointError if ``checkpoint`` cannot be restored into ``graph``. State of operators
    ``graph`` no longer has is refused, unless ``allow_non_restored_state`` (then it is dropped, with a WARNING)."""
    checkpoint_id = checkpoint.checkpoint_id
    if checkpoint.max_parallelism != graph.max_parallelism:
        raise IncompatibleCheckpointError(
            f"Checkpoint {checkpoint_id} was taken with max parallelism {checkpoint.max_parallelism}, but the job "
            f"now has {graph.max_parallelism}. Key groups cannot be remapped: leave set_max_parallelism() unset "
            f"(the checkpoint's value is then used) or set it to {checkpoint.max_parallelism}.")
    uids = {op.uid for op in graph.operators}
    orphaned = sorted((op for op in checkpoint.operators if op.handles and op.uid not in uids), key=lambda o: o.uid)
    what = "Savepoint" if checkpoint.savepoint else "Checkpoint"
    named = ', '.join(f'uid {op.uid} ({op.name})' for op in orphaned)
    _check_channel_state(checkpoint, graph, what)
    if orphaned and allow_non_restored_state:
        log.warning("%s %d has state for operators the job no longer has, dropped (allow_non_restored_state): %s",
                    what, checkpoint_id, named)
    elif orphaned:
        raise IncompatibleCheckpointError(
            f"{what} {checkpoint_id} has state for operators the job no longer has: {named}. If you changed the job, "
            "give its stateful operators the same .uid(...) as before (derived uids change when the graph "
            "changes); if you removed them on purpose, pass allow_non_restored_state=True (Flink's "
            "--allowNonRestoredState) to drop their state.")


def _check_channel_state(checkpoint: CompletedCheckpoint, graph: JobGraph, what: str) -> None:
    """Records in flight (an unaligned checkpoint's channel state) can be replayed only into the head of a chain,
    and those of forward, broadcast and custom edges only at the parallelism they were taken at."""
    heads = {chain.operators[0].uid: chain for chain in graph.chains}
    for state in checkpoint.operators:
        handles = [h for h in state.handles if h.has_channel_state]
        if not handles or state.uid not in {op.uid for op in graph.operators}:
            continue
        chain = heads.get(state.uid)
        if chain is None:
            raise IncompatibleCheckpointError(
                f"{what} {checkpoint.checkpoint_id} holds records in flight into operator uid {state.uid} "
                f"({state.name}), which is no longer the first operator of its chain (the job's chaining changed). "
                "Restore the job with its old chaining, or restore from an aligned checkpoint or a savepoint.")
        pinned = any(PINNED_CHANNEL_STATE_GROUP in h.key_groups for h in handles)
        if pinned and chain.parallelism != state.parallelism:
            raise IncompatibleCheckpointError(
                f"{what} {checkpoint.checkpoint_id} is unaligned and holds records in flight on forward, broadcast or "
                f"custom-partitioned edges into uid {state.uid} ({state.name}), taken at parallelism "
                f"{state.parallelism}: they cannot be rescaled to {chain.parallelism} (which subtask a record "
                f"belongs to depends on the parallelism; Flink refuses this too). Restore at parallelism "
                f"{state.parallelism}, or from an aligned checkpoint or a savepoint (always aligned).")


def plan_restore(checkpoint: CompletedCheckpoint, graph: JobGraph,
                 allow_non_restored_state: bool = False) -> dict[str, dict[SubtaskIndex, RestoreSpec]]:
    """``{operator uid: {subtask: RestoreSpec}}`` for every operator with state in the checkpoint.

    Each subtask of the new job reads the files that hold key groups it owns (only those groups), and every
    file with operator state (it takes its share of the lists, see :mod:`runtime.executor.restore`).
    """
    check_compatible(checkpoint, graph, allow_non_restored_state)
    plan: dict[str, dict[SubtaskIndex, RestoreSpec]] = {}
    for node in graph.operators:
        state = checkpoint.operator(node.uid)
        if state is None or not state.handles:
            continue
        handles = sorted(state.handles, key=lambda h: h.subtask)
        operator_handles = tuple(h for h in handles if h.has_operator_state)
        specs = {}
        for subtask in range(node.parallelism):
            owned = key_group_range(graph.max_parallelism, node.parallelism, subtask)
            keyed = tuple(h for h in handles if any(g in owned for g in h.keyed_groups))
            channel = tuple(h for h in handles if any(g in owned for g in h.channel_key_groups)
                            or (CHANNEL_STATE_GROUP in h.key_groups and h.subtask % node.parallelism == subtask)
                            or (PINNED_CHANNEL_STATE_GROUP in h.key_groups and h.subtask == subtask))
            specs[SubtaskIndex(subtask)] = RestoreSpec(checkpoint.checkpoint_id, keyed, operator_handles,
                                                       (owned.start, owned.end), channel)
        plan[node.uid] = specs
    return plan
