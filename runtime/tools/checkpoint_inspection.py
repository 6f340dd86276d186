"""Human-readable views of a job's checkpoints, for the ``chandy`` command."""

from __future__ import annotations

import datetime
import os

from state_backends.storage import OPERATOR_STATE_GROUP, CheckpointStorage

__all__ = ["list_checkpoints", "describe_checkpoint"]


def _storage(directory: str) -> CheckpointStorage:
    url = directory if "://" in directory else "file://" + os.path.abspath(directory)
    return CheckpointStorage.for_job_directory(url)


def _when(metadata: dict) -> str:
    stamp = datetime.datetime.fromtimestamp(metadata["timestamp_ms"] / 1000, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def list_checkpoints(directory: str) -> str:
    """One line per completed checkpoint: id, time, size, duration, and whether it can be restored."""
    storage = _storage(directory)
    rows = [f"{'id':>6}  {'completed':23}  {'bytes':>12}  {'duration ms':>11}  restorable"]
    for metadata in storage.completed():
        stats = metadata.get("stats", {})
        problems = storage.problems(metadata)
        rows.append(f"{metadata['checkpoint_id']:>6}  {_when(metadata):23}  {stats.get('bytes', 0):>12,}  "
                    f"{stats.get('duration_ms', 0):>11,.0f}  {'yes' if not problems else 'NO: ' + problems[0]}")
    if len(rows) == 1:
        return f"No completed checkpoint in {storage.job_dir}"
    return "\n".join(rows)


def describe_checkpoint(directory: str, checkpoint_id: int) -> str:
    """Operators, subtasks, key-group ranges, files and source offsets of one checkpoint."""
    storage = _storage(directory)
    metadata = storage.read_metadata(checkpoint_id)
    stats = metadata.get("stats", {})
    lines = [
        f"checkpoint {checkpoint_id} of job '{metadata.get('job_name')}' (attempt {metadata.get('attempt')}), "
        f"completed {_when(metadata)}",
        f"max parallelism {metadata['max_parallelism']}; {stats.get('bytes', 0):,} bytes; "
        f"duration {stats.get('duration_ms', 0):.0f} ms (sync {stats.get('sync_ms', 0):.1f}, "
        f"async {stats.get('async_ms', 0):.1f}, alignment {stats.get('alignment_ms', 0):.1f})",
    ]
    for uid, operator in sorted(metadata["operators"].items()):
        lines.append(f"operator {operator['name']!r} uid={uid} parallelism={operator['parallelism']}")
        for file in sorted(operator["files"], key=lambda f: f["subtask"]):
            groups = [g for g in file["key_groups"] if g != OPERATOR_STATE_GROUP]
            keyed = f"key groups {min(groups)}..{max(groups)} ({len(groups)} with state)" if groups else "no keyed state"
            extra = ", operator state" if OPERATOR_STATE_GROUP in file["key_groups"] else ""
            lines.append(f"  subtask {file['subtask']}: {file['path']} {file['size']:,} bytes, {keyed}{extra}")
        offsets = metadata.get("source_offsets", {}).get(uid)
        if offsets:
            for subtask, position in sorted(offsets.items(), key=lambda kv: int(kv[0])):
                lines.append(f"  subtask {subtask} source position: {position}")
    problems = storage.problems(metadata)
    lines.append("restorable: yes" if not problems else "restorable: NO: " + "; ".join(problems))
    return "\n".join(lines)
