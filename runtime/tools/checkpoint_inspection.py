"""Human-readable views of a job's checkpoints, for the ``chandy`` command.

Both take the job's directory, ``<checkpoint storage>/<job name>``, as a path or any fsspec URL:

>>> print(list_checkpoints("memory://inspection-doc/my-job"))
No completed checkpoint in .../my-job
"""

from __future__ import annotations

import datetime
import os

from runtime.driver.restore_plan import resolve_restore
from runtime.ids import CheckpointId
from runtime.protocol.checkpoints import CompletedCheckpoint
from state_backends.storage import CheckpointStorage

__all__ = ["list_checkpoints", "describe_checkpoint"]


def _storage(directory: str) -> CheckpointStorage:
    url = directory if "://" in directory else "file://" + os.path.abspath(directory)
    return CheckpointStorage.for_job_directory(url)


def _when(checkpoint: CompletedCheckpoint) -> str:
    stamp = datetime.datetime.fromtimestamp(checkpoint.timestamp_ms / 1000, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def list_checkpoints(directory: str) -> str:
    """One line per completed checkpoint: id, time, size, duration, and whether it can be restored."""
    storage = _storage(directory)
    rows = [f"{'id':>6}  {'completed':23}  {'bytes':>12}  {'duration ms':>11}  restorable"]
    for checkpoint in storage.completed():
        duration = checkpoint.stats.duration_ms if checkpoint.stats is not None else 0
        problems = storage.problems(checkpoint)
        rows.append(f"{checkpoint.checkpoint_id:>6}  {_when(checkpoint):23}  {checkpoint.bytes:>12,}  "
                    f"{duration:>11,.0f}  {'yes' if not problems else 'NO: ' + problems[0]}")
    if len(rows) == 1:
        return f"No completed checkpoint in {storage.job_dir}"
    return "\n".join(rows)


def describe_checkpoint(directory: str, checkpoint_id: int | str) -> str:
    """Operators, subtasks, key-group ranges, files and source positions of one checkpoint (an id, or
    ``"latest"``: the newest restorable one)."""
    storage = _storage(directory)
    if str(checkpoint_id).strip().isdecimal():  # also an unrestorable one: the description says what is wrong
        checkpoint = storage.read_checkpoint(CheckpointId(int(checkpoint_id)))
    else:
        checkpoint = resolve_restore(storage, checkpoint_id).checkpoint
    stats = checkpoint.stats
    timings = (f"duration {stats.duration_ms:.0f} ms (sync {stats.sync_ms:.1f}, async {stats.async_ms:.1f}, "
               f"alignment {stats.alignment_ms:.1f})") if stats is not None else "no timings recorded"
    lines = [
        f"checkpoint {checkpoint.checkpoint_id} of job '{checkpoint.job_name}' (attempt {checkpoint.attempt}), "
        f"completed {_when(checkpoint)}",
        f"parallelism {checkpoint.parallelism}, max parallelism {checkpoint.max_parallelism}; "
        f"{checkpoint.bytes:,} bytes; {timings}",
    ]
    for operator in sorted(checkpoint.operators, key=lambda op: op.uid):
        lines.append(f"operator {operator.name!r} uid={operator.uid} parallelism={operator.parallelism}")
        for handle in sorted(operator.handles, key=lambda h: h.subtask):
            groups = handle.keyed_groups
            keyed = f"key groups {min(groups)}..{max(groups)} ({len(groups)} with state)" if groups else "no keyed state"
            extra = ", operator state" if handle.has_operator_state else ""
            lines.append(f"  subtask {handle.subtask}: {handle.path} {handle.size:,} bytes, {keyed}{extra}")
        for subtask, position in sorted(operator.source_positions.items()):
            lines.append(f"  subtask {subtask} source position: {position}")
    problems = storage.problems(checkpoint)
    lines.append("restorable: yes" if not problems else "restorable: NO: " + "; ".join(problems))
    return "\n".join(lines)
