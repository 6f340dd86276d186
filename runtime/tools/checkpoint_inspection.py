"""Human-readable views of a job's checkpoints, for the ``chandy`` command.

Both take the job's directory, ``<checkpoint storage>/<job name>``, as a path or any fsspec URL. The job's
folder is its name made safe for every filesystem (:func:`~state_backends.storage.job_directory_name`:
``"count per key"`` is ``count-per-key``):

>>> from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState
>>> storage = CheckpointStorage("memory://inspection-doc/checkpoints", "my job")
>>> handle = storage.write_state_file(1, "count", 0, [(5, b"state of key group 5")])
>>> storage.write_metadata(CompletedCheckpoint(1, "my job", 1_700_000_000_000, 0, 1, 128,
...                                            (OperatorState("count", "Count", 1, (handle,)),)))
>>> print(list_checkpoints("memory://inspection-doc/checkpoints/my-job"))
    id  completed                       bytes  duration ms  restorable
     1  2023-11-14 22:13:20 UTC  ...            0  yes

Given the storage itself, the listing names its jobs instead; a directory that does not exist is an error:

>>> print(list_checkpoints("memory://inspection-doc/checkpoints"))
memory://inspection-doc/checkpoints is a checkpoint storage, not a job's directory. Its jobs:
job     completed checkpoints  newest
my-job                      1       1
Pass one of them: chandy checkpoints memory://inspection-doc/checkpoints/my-job
>>> list_checkpoints("memory://inspection-doc/checkpoints/no-such-job")
Traceback (most recent call last):
...
runtime.errors.CheckpointNotFoundError: memory://inspection-doc/checkpoints/no-such-job does not exist. ...
"""

from __future__ import annotations

import datetime
import os
import posixpath
import re
from dataclasses import dataclass

from runtime.driver.restore_plan import resolve_restore
from runtime.errors import CheckpointNotFoundError, StorageUnreachableError
from runtime.filesystems import filesystem_for
from runtime.ids import CheckpointId
from runtime.protocol.checkpoints import CompletedCheckpoint
from state_backends.storage import CheckpointStorage, SavepointStorage, job_directory_name

__all__ = ["list_checkpoints", "describe_checkpoint", "open_checkpoint"]

_CHK = re.compile(r"^chk-\d+$")

_WHAT_DIR_IS = ("DIR must be the job's checkpoint directory, <checkpoint storage>/<job name>: for "
                "set_checkpoint_storage(\"./chandy-checkpoints\") and execute(\"my job\") it is "
                "./chandy-checkpoints/my-job (the job name as a folder name: characters other than letters, "
                "digits, '.', '_' and '-' become '-'). Given the storage itself, `chandy checkpoints` lists its jobs.")


@dataclass(frozen=True)
class _Job:
    """A job directory found in a checkpoint storage: its folder name and its completed checkpoints."""

    name: str
    completed: list[CompletedCheckpoint]


def _url(directory: str) -> str:
    return directory if "://" in directory else "file://" + os.path.abspath(directory)


def _entries(fs, path: str, url: str) -> list[dict] | None:
    """The entries of directory ``path`` (fsspec's ``ls`` details); None when it does not exist."""
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return None
    except Exception as exc:  # anything but absence: the storage cannot be used right now
        raise StorageUnreachableError(url, exc) from exc
    if any(e["name"].rstrip("/") == path.rstrip("/") and e.get("type") == "file" for e in entries):
        raise CheckpointNotFoundError(f"{url} is a file, not a directory. {_WHAT_DIR_IS}")
    return entries


def _open(directory: str) -> CheckpointStorage | list[_Job]:
    """The storage of the job directory ``directory``; or, when ``directory`` is a checkpoint storage (no
    ``chk-*`` of its own, but folders that have some), its jobs. Raises CheckpointNotFoundError when
    ``directory`` does not exist."""
    url = _url(directory)
    fs, path = filesystem_for(url, "checkpoint directory")
    entries = _entries(fs, path, url)
    if entries is None:
        raise CheckpointNotFoundError(f"{directory} does not exist. {_WHAT_DIR_IS}")
    names = sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "directory")
    if any(_CHK.match(name) for name in names):
        return CheckpointStorage.for_job_directory(url)
    jobs = []
    for name in names:
        if job_directory_name(name) != name:  # not a folder Chandy names jobs with
            continue
        job = CheckpointStorage(url, name, filesystem=fs)
        if job.checkpoint_ids():
            jobs.append(_Job(name, job.completed()))
    return jobs if jobs else CheckpointStorage.for_job_directory(url)


def _jobs_table(jobs: list[_Job]) -> list[str]:
    width = max(len("job"), *(len(job.name) for job in jobs))
    rows = [f"{'job':<{width}}  completed checkpoints  newest"]
    for job in jobs:
        newest = job.completed[-1].checkpoint_id if job.completed else "-"
        rows.append(f"{job.name:<{width}}  {len(job.completed):>21}  {newest:>6}")
    return rows


def _storage_not_job(directory: str) -> str:
    return f"{directory} is a checkpoint storage, not a job's directory"


def _when(checkpoint: CompletedCheckpoint) -> str:
    stamp = datetime.datetime.fromtimestamp(checkpoint.timestamp_ms / 1000, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def list_checkpoints(directory: str) -> str:
    """One line per completed checkpoint: id, time, size, duration, and whether it can be restored. Given a
    checkpoint storage instead of a job's directory, one line per job: its folder, how many completed
    checkpoints it has and the newest one's id."""
    storage = _open(directory)
    if isinstance(storage, list):
        example = posixpath.join(directory.rstrip("/"), storage[0].name)
        return "\n".join([f"{_storage_not_job(directory)}. Its jobs:", *_jobs_table(storage),
                          f"Pass one of them: chandy checkpoints {example}"])
    rows = [f"{'id':>6}  {'completed':23}  {'bytes':>12}  {'duration ms':>11}  restorable"]
    for checkpoint in storage.completed():
        duration = checkpoint.stats.duration_ms if checkpoint.stats is not None else 0
        problems = storage.problems(checkpoint)
        rows.append(f"{checkpoint.checkpoint_id:>6}  {_when(checkpoint):23}  {checkpoint.bytes:>12,}  "
                    f"{duration:>11,.0f}  {'yes' if not problems else 'NO: ' + problems[0]}")
    if len(rows) == 1:
        return f"No completed checkpoint in {storage.job_dir}"
    return "\n".join(rows)


def _one_checkpoint(directory: str) -> tuple[CheckpointStorage, CompletedCheckpoint]:
    """The checkpoint that ``directory`` is: a savepoint's directory, or a job's ``chk-<n>``."""
    url = _url(directory).rstrip("/")
    parent, _, name = url.rpartition("/")
    match = _CHK.match(name)
    if match:
        storage = CheckpointStorage.for_job_directory(parent)
        return storage, storage.read_checkpoint(CheckpointId(int(name.split("-", 1)[1])))
    savepoint = SavepointStorage(url)
    try:
        return savepoint, savepoint.read()
    except CheckpointNotFoundError:
        raise CheckpointNotFoundError(
            f"{directory} is neither a savepoint (a directory with a _metadata file) nor a chk-<n> directory: give "
            f"the checkpoint to show too (chandy checkpoint {directory} latest), or pass a savepoint.") from None


def open_checkpoint(directory: str, checkpoint_id: int | str | None = None) -> tuple[CheckpointStorage,
                                                                                   CompletedCheckpoint]:
    """The storage and the checkpoint of ``directory``: a savepoint's or a ``chk-<n>`` directory, or, with
    ``checkpoint_id`` (an id or ``"latest"``: the newest restorable one), a job's directory."""
    if checkpoint_id is None:
        return _one_checkpoint(directory)
    storage = _open(directory)
    if isinstance(storage, list):
        table = "\n".join(_jobs_table(storage))
        raise CheckpointNotFoundError(
            f"{_storage_not_job(directory)}: pass one of its jobs' directories, e.g. "
            f"{posixpath.join(directory.rstrip('/'), storage[0].name)}. Its jobs:\n{table}")
    if str(checkpoint_id).strip().isdecimal():  # also an unrestorable one: a description says what is wrong
        return storage, storage.read_checkpoint(CheckpointId(int(checkpoint_id)))
    return storage, resolve_restore(storage, checkpoint_id).checkpoint


def describe_checkpoint(directory: str, checkpoint_id: int | str | None = None) -> str:
    """Operators, subtasks, key-group ranges, files and source positions of one checkpoint (an id, or
    ``"latest"``: the newest restorable one), or, without ``checkpoint_id``, of the savepoint or ``chk-<n>``
    directory ``directory``."""
    return _description(*open_checkpoint(directory, checkpoint_id))


def _description(storage: CheckpointStorage, checkpoint: CompletedCheckpoint) -> str:
    stats = checkpoint.stats
    timings = (f"duration {stats.duration_ms:.0f} ms (sync {stats.sync_ms:.1f}, async {stats.async_ms:.1f}, "
               f"alignment {stats.alignment_ms:.1f})") if stats is not None else "no timings recorded"
    if stats is not None and stats.unaligned:
        timings += f"; unaligned, {stats.persisted_bytes:,} bytes of records in flight stored"
    what = f"savepoint {storage.url} (of checkpoint" if checkpoint.savepoint else "checkpoint"
    lines = [
        f"{what} {checkpoint.checkpoint_id}{')' if checkpoint.savepoint else ''} of job '{checkpoint.job_name}' "
        f"(attempt {checkpoint.attempt}), completed {_when(checkpoint)}",
        f"parallelism {checkpoint.parallelism}, max parallelism {checkpoint.max_parallelism}; "
        f"{checkpoint.bytes:,} bytes; {timings}",
    ]
    for operator in sorted(checkpoint.operators, key=lambda op: op.uid):
        lines.append(f"operator {operator.name!r} uid={operator.uid} parallelism={operator.parallelism}")
        for handle in sorted(operator.handles, key=lambda h: h.subtask):
            groups = handle.keyed_groups
            keyed = f"key groups {min(groups)}..{max(groups)} ({len(groups)} with state)" if groups else "no keyed state"
            extra = ", operator state" if handle.has_operator_state else ""
            if handle.has_channel_state:
                extra += ", records in flight (channel state)"
            lines.append(f"  subtask {handle.subtask}: {handle.path} {handle.size:,} bytes, {keyed}{extra}")
        for subtask, position in sorted(operator.source_positions.items()):
            lines.append(f"  subtask {subtask} source position: {position}")
    problems = storage.problems(checkpoint)
    lines.append("restorable: yes" if not problems else "restorable: NO: " + "; ".join(problems))
    return "\n".join(lines)
