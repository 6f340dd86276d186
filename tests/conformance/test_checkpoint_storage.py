"""The checkpoint storage contract, run against every storage (as fsspec's abstract test suites).

Two layers are tested: :class:`CheckpointStore`, the narrow interface every byte goes through (absence is
``FileNotFoundError``, every other failure ``StorageUnreachableError``), and :class:`CheckpointStorage`, the
layout of checkpoints on top of it.

Storages are listed in ``STORAGES``, one :class:`Storage` each: the URL a test writes under (its own, fresh)
and the fsspec filesystem class behind it, which the tests subclass into filesystems that fail (no permission,
a dropped connection) the way a real outage does. Adding a storage is adding one entry.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import os
import pickle
import posixpath
import uuid
from pathlib import Path
from typing import Callable

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from runtime.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    StorageUnreachableError,
)
from runtime.protocol.checkpoints import (
    OPERATOR_STATE_GROUP,
    CheckpointStats,
    CompletedCheckpoint,
    OperatorState,
)
from state_backends.checkpoint_store import CheckpointStore
from state_backends.storage import CheckpointStatus, CheckpointStorage, checksum


@dataclasses.dataclass
class Storage:
    """One storage under test: a fresh ``url`` of its own and the fsspec filesystem class that serves it."""

    url: str
    filesystem_class: type
    cleanup: Callable[[], None] = lambda: None

    @property
    def is_local(self) -> bool:
        return issubclass(self.filesystem_class, LocalFileSystem)

    def storage(self, job: str = "job", filesystem=None) -> CheckpointStorage:
        return CheckpointStorage(self.url, job, filesystem=filesystem)

    def store(self, filesystem=None) -> tuple[CheckpointStore, str]:
        """A store over this storage, and the filesystem path of its root."""
        fs, root = fsspec.core.url_to_fs(self.url)
        return CheckpointStore(filesystem or fs, self.url), root.rstrip("/")

    def failing(self, error: BaseException, operations=("ls", "open", "size", "rm", "makedirs"), reads=False):
        """A filesystem over the same files whose ``operations`` raise ``error``; with ``reads``, files open but
        reading them raises ``error`` (a connection dropped mid-read)."""
        return failing_filesystem(self.filesystem_class, error, operations, reads)


def local(tmp_path: Path) -> Storage:
    return Storage(f"file://{tmp_path}/checkpoints", LocalFileSystem)


def memory(tmp_path: Path) -> Storage:  # memory:// is one store per process: a path of the test's own
    url = f"memory://chandy-conformance-{uuid.uuid4().hex}"

    def cleanup():
        fs, root = fsspec.core.url_to_fs(url)
        if fs.exists(root):
            fs.rm(root, recursive=True)

    return Storage(url, MemoryFileSystem, cleanup)


STORAGES = [
    pytest.param(local, id="local"),
    pytest.param(memory, id="memory"),
]


@pytest.fixture(params=STORAGES)
def storage_impl(request, tmp_path) -> Storage:
    impl = request.param(tmp_path)
    yield impl
    impl.cleanup()


class DroppedConnection(io.RawIOBase):
    """A file that opens, then fails every read: a connection reset half way through a download."""

    def __init__(self, error: BaseException, size: int):
        self.error, self.size, self.position = error, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        self.position = offset if whence == 0 else self.position + offset if whence == 1 else self.size + offset
        return self.position

    def tell(self):
        return self.position

    def readinto(self, buffer):
        raise self.error


def failing_filesystem(base: type, error: BaseException, operations, reads: bool):
    class Failing(base):
        cachable = False  # fsspec would otherwise hand this instance out for plain base-class requests

        def _fail(self, operation):
            if operation in operations:
                raise error

        def ls(self, path, detail=True, **kwargs):
            self._fail("ls")
            return super().ls(path, detail=detail, **kwargs)

        def info(self, path, **kwargs):
            self._fail("info")
            return super().info(path, **kwargs)

        def size(self, path):
            self._fail("size")
            return super().size(path)

        def open(self, path, mode="rb", **kwargs):
            self._fail("open")
            if reads and "r" in mode:
                return io.BufferedReader(DroppedConnection(error, super().size(path)))
            return super().open(path, mode, **kwargs)

        def rm(self, path, recursive=False, **kwargs):
            self._fail("rm")
            return super().rm(path, recursive=recursive, **kwargs)

        def makedirs(self, path, exist_ok=False):
            self._fail("makedirs")
            return super().makedirs(path, exist_ok=exist_ok)

    Failing.__name__ = f"Failing{base.__name__}"
    return Failing()


ERRORS = [
    pytest.param(lambda: PermissionError(13, "Permission denied"), id="permission"),
    pytest.param(lambda: ConnectionError("connection reset by peer"), id="connection"),
    pytest.param(lambda: TimeoutError("timed out"), id="timeout"),
]


# -- CheckpointStore --------------------------------------------------------------------------------------


def test_read_after_write(storage_impl):
    store, root = storage_impl.store()
    store.write(f"{root}/a/b/file", b"content")  # parents are created
    store.write(f"{root}/empty", b"")
    assert store.read(f"{root}/a/b/file") == b"content"
    assert store.read(f"{root}/empty") == b""
    assert store.size(f"{root}/a/b/file") == 7


def test_write_replaces(storage_impl):
    store, root = storage_impl.store()
    store.write(f"{root}/file", b"a much longer first content")
    store.write(f"{root}/file", b"second")
    assert store.read(f"{root}/file") == b"second" and store.size(f"{root}/file") == 6
    assert store.list(root) == ["file"], "nothing left beside it"


def test_create_if_absent_keeps_the_first_content(storage_impl):
    store, root = storage_impl.store()
    assert store.create_if_absent(f"{root}/d/marker", b"first") is True
    assert store.create_if_absent(f"{root}/d/marker", b"second") is False
    assert store.read(f"{root}/d/marker") == b"first"
    assert store.list(f"{root}/d") == ["marker"], "nothing left beside it"


def test_list_of_a_missing_directory_is_empty_and_of_a_directory_gives_sorted_names(storage_impl):
    store, root = storage_impl.store()
    assert store.list(f"{root}/missing") == []
    for name in ("b", "a", "c/nested", "chk-10", "chk-9"):
        store.write(f"{root}/dir/{name}", b"x")
    assert store.list(f"{root}/dir") == ["a", "b", "c", "chk-10", "chk-9"]
    assert store.list(f"{root}/dir/") == ["a", "b", "c", "chk-10", "chk-9"]
    store.makedirs(f"{root}/made")
    assert store.list(f"{root}/made") == []


def test_delete_is_recursive_and_a_no_op_when_absent(storage_impl):
    store, root = storage_impl.store()
    for name in ("gone/a", "gone/sub/b", "gone/sub/deeper/c", "kept/a", "gone-not/a"):
        store.write(f"{root}/{name}", b"x")
    store.delete(f"{root}/gone")
    assert store.list(root) == ["gone-not", "kept"]
    assert store.list(f"{root}/gone") == []
    with pytest.raises(FileNotFoundError):
        store.read(f"{root}/gone/sub/b")
    store.delete(f"{root}/gone")  # absent: nothing happens
    store.delete(f"{root}/never/existed")
    store.delete(f"{root}/kept/a")  # a single file
    assert store.list(f"{root}/kept") == [] and store.read(f"{root}/gone-not/a") == b"x"


def test_read_and_size_of_a_missing_path_raise_file_not_found(storage_impl):
    store, root = storage_impl.store()
    store.write(f"{root}/present", b"x")
    for path in (f"{root}/absent", f"{root}/no/such/dir/file"):
        with pytest.raises(FileNotFoundError):
            store.read(path)
        with pytest.raises(FileNotFoundError):
            store.size(path)
        with pytest.raises(FileNotFoundError):
            with store.open_input(path):
                pass


def test_open_output_and_open_input_round_trip(storage_impl):
    store, root = storage_impl.store()
    data = bytes(range(256)) * 8192  # 2 MiB: more than one write buffer
    with store.open_output(f"{root}/streams/big") as sink:
        sink.write(data[:1000])
        sink.write(data[1000:])
    assert store.size(f"{root}/streams/big") == len(data)
    with store.open_input(f"{root}/streams/big") as f:
        assert f.read() == data
    with store.open_output(f"{root}/streams/big") as sink:
        sink.write(b"short")
    assert store.read(f"{root}/streams/big") == b"short"


STORE_OPERATIONS = {
    "read": lambda store, root: store.read(f"{root}/file"),
    "size": lambda store, root: store.size(f"{root}/file"),
    "list": lambda store, root: store.list(root),
    "delete": lambda store, root: store.delete(f"{root}/file"),
    "write": lambda store, root: store.write(f"{root}/other", b"y"),
    "create_if_absent": lambda store, root: store.create_if_absent(f"{root}/other", b"y"),
    "makedirs": lambda store, root: store.makedirs(f"{root}/dir"),
    "open_input": lambda store, root: store.open_input(f"{root}/file").__enter__(),
    "open_output": lambda store, root: store.open_output(f"{root}/other").__enter__(),
}


@pytest.mark.parametrize("operation", STORE_OPERATIONS)
@pytest.mark.parametrize("error", ERRORS)
def test_failures_other_than_absence_are_storage_unreachable(storage_impl, error, operation):
    store, root = storage_impl.store()
    store.write(f"{root}/file", b"x")
    cause = error()
    failing, _ = storage_impl.store(storage_impl.failing(cause))
    with pytest.raises(StorageUnreachableError) as raised:
        STORE_OPERATIONS[operation](failing, root)
    assert raised.value.__cause__ is cause
    assert storage_impl.url in str(raised.value)
    assert store.read(f"{root}/file") == b"x", "nothing was lost"


@pytest.mark.parametrize("error", ERRORS)
def test_a_read_that_fails_half_way_is_storage_unreachable(storage_impl, error):
    store, root = storage_impl.store()
    store.write(f"{root}/file", b"x" * 100)
    failing, _ = storage_impl.store(storage_impl.failing(error(), operations=(), reads=True))
    with pytest.raises(StorageUnreachableError):
        failing.read(f"{root}/file")


def test_listing_a_regular_file_is_storage_unreachable(storage_impl):
    store, root = storage_impl.store()
    store.write(f"{root}/file", b"x")
    with pytest.raises(StorageUnreachableError):
        store.list(f"{root}/file")


# -- CheckpointStorage: writing and reading ------------------------------------------------------------------


def commit(storage: CheckpointStorage, checkpoint_id: int, subtasks: int = 2) -> CompletedCheckpoint:
    """A completed checkpoint: keyed state files of ``subtasks`` subtasks and an operator-state file."""
    handles = tuple(storage.write_state_file(checkpoint_id, "count", subtask,
                                             [(group, f"{checkpoint_id}:{group}".encode() * 10)
                                              for group in range(subtask * 64, subtask * 64 + 3)])
                    for subtask in range(subtasks))
    source = storage.write_state_file(checkpoint_id, "source", 0, [(OPERATOR_STATE_GROUP, b"position")])
    checkpoint = CompletedCheckpoint(
        checkpoint_id, storage.job_name, 1_700_000_000_000 + checkpoint_id, 1, subtasks, 128,
        (OperatorState("count", "Count", subtasks, handles), OperatorState("source", "Source", 1, (source,),
                                                                             {0: "offset 42"})),
        CheckpointStats(checkpoint_id, 12.5, 1.25, 10.0, 0.5, sum(h.size for h in handles) + source.size, 1.7e9))
    storage.write_metadata(checkpoint)
    return checkpoint


def test_state_file_round_trip_with_a_key_group_filter(storage_impl):
    storage = storage_impl.storage()
    big = b"\x00\xff" * (1 << 20)  # 2 MiB in one key group
    rows = [(5, b"five"), (9, b""), (64, big), (127, b"last"), (OPERATOR_STATE_GROUP, b"operator")]
    handle = storage.write_state_file(3, "op", 1, rows)
    assert (handle.uid, handle.subtask, handle.key_groups) == ("op", 1, (5, 9, 64, 127, OPERATOR_STATE_GROUP))
    assert handle.size == storage.store.size(storage.absolute(3, handle.path))
    assert list(storage.read_state_rows(3, handle)) == rows
    assert list(storage.read_state_rows(3, handle, {9, 64, 100})) == [(9, b""), (64, big)]
    assert list(storage.read_state_rows(3, handle, range(64))) == [(5, b"five"), (9, b"")]
    assert list(storage.read_state_rows(3, handle, {OPERATOR_STATE_GROUP})) == [(OPERATOR_STATE_GROUP, b"operator")]
    assert list(storage.read_state_rows(3, handle, set())) == []
    empty = storage.write_state_file(3, "op", 2, [])
    assert empty.key_groups == () and list(storage.read_state_rows(3, empty)) == []


def test_state_rows_of_a_missing_or_truncated_file_are_a_corrupt_checkpoint(storage_impl):
    storage = storage_impl.storage()
    handle = storage.write_state_file(1, "op", 0, [(1, b"x" * 1000), (2, b"y")])
    path = storage.absolute(1, handle.path)
    storage.store.write(path, storage.store.read(path)[:handle.size // 2])
    with pytest.raises(CorruptCheckpointError, match="op/0.arrow"):
        list(storage.read_state_rows(1, handle))
    storage.store.delete(path)
    with pytest.raises(CorruptCheckpointError, match="op/0.arrow"):
        list(storage.read_state_rows(1, handle))


def test_a_state_file_changed_in_place_fails_the_checksum_written_with_it(storage_impl):
    storage = storage_impl.storage()
    handle = storage.write_state_file(1, "op", 0, [(1, b"x" * 1000), (2, b"y")])
    path = storage.absolute(1, handle.path)
    data = storage.store.read(path)
    assert handle.checksum == checksum([(1, b"x" * 1000), (2, b"y")]), "computed while writing, over the rows"
    changed = bytearray(data)
    changed[500] ^= 0x01  # inside a payload: Arrow would read it without complaint
    storage.store.write(path, bytes(changed))
    with pytest.raises(CorruptCheckpointError, match="op/0.arrow.*does not match the checksum"):
        list(storage.read_state_rows(1, handle))
    unchecked = dataclasses.replace(handle, checksum=None)  # written before checksums existed: still readable
    assert [group for group, _ in storage.read_state_rows(1, unchecked)] == [1, 2]


def test_any_damaged_byte_of_a_state_file_is_a_corrupt_checkpoint_never_another_error(tmp_path):
    """Each byte of a real state file flipped in turn: the rows come back intact (a byte nobody reads) or the
    read raises CorruptCheckpointError; never another exception, never a crash of the process."""
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    rows = [(1, pickle.dumps({"a": 1, "b": [1.5, None]})), (7, b"x" * 40), (OPERATOR_STATE_GROUP, b"op")]
    handle = storage.write_state_file(1, "op", 0, rows)
    path = storage.absolute(1, handle.path)
    original = storage.store.read(path)
    outcomes = collections.Counter()
    for at in range(len(original)):
        damaged = bytearray(original)
        damaged[at] ^= 0x5A
        storage.store.write(path, bytes(damaged))
        try:
            assert list(storage.read_state_rows(1, handle)) == rows
            outcomes["intact"] += 1
        except CorruptCheckpointError:
            outcomes["corrupt"] += 1
    assert outcomes["corrupt"] > len(original) // 2, outcomes


@pytest.mark.parametrize("error", ERRORS)
def test_state_rows_through_a_failing_connection_are_storage_unreachable_not_corrupt(storage_impl, error):
    storage = storage_impl.storage()
    handle = storage.write_state_file(1, "op", 0, [(1, b"x" * 1000), (2, b"y")])
    for failing in (storage_impl.failing(error()), storage_impl.failing(error(), operations=(), reads=True)):
        with pytest.raises(StorageUnreachableError):  # retryable; "corrupt" would give up on the checkpoint
            list(storage_impl.storage(filesystem=failing).read_state_rows(1, handle))


def test_metadata_round_trip(storage_impl):
    storage = storage_impl.storage()
    checkpoint = commit(storage, 4)
    assert storage.read_checkpoint(4) == checkpoint
    assert storage_impl.storage().read_checkpoint(4) == checkpoint, "another process reads the same"
    assert storage.validated_checkpoint(4) == checkpoint
    assert storage.problems(checkpoint) == []
    assert storage.completed() == [checkpoint]


def test_metadata_written_twice_raises_and_keeps_the_first(storage_impl):
    storage = storage_impl.storage()
    first = commit(storage, 1)
    second = dataclasses.replace(first, timestamp_ms=1, attempt=2, operators=first.operators[:1])
    with pytest.raises(CheckpointError, match="already exists"):
        storage.write_metadata(second)
    with pytest.raises(CheckpointError, match="already exists"):
        storage_impl.storage().write_metadata(second)  # another run of the job, same directory
    assert storage.read_checkpoint(1) == first


def test_jobs_are_kept_apart(storage_impl):
    one, other = storage_impl.storage("one"), storage_impl.storage("other / job")
    checkpoint = commit(one, 1)
    assert other.checkpoint_ids() == [] and other.next_checkpoint_id() == 1
    commit(other, 1)  # the same id in another job's directory
    assert one.read_checkpoint(1) == checkpoint


# -- CheckpointStorage: what is there -------------------------------------------------------------------------


def test_survey_tells_completed_from_incomplete_from_unreadable(storage_impl):
    storage = storage_impl.storage()
    first = commit(storage, 1)
    storage.write_state_file(2, "count", 0, [(1, b"x")])  # state files, never committed
    commit(storage, 3)
    storage.store.write(storage.metadata_path(3), b"{not json")
    commit(storage, 4)
    storage.store.write(storage.metadata_path(4), storage.store.read(storage.metadata_path(1)))  # another id's
    fifth = commit(storage, 5)
    survey = storage.survey()
    assert [(s.checkpoint_id, s.status) for s in survey] == [
        (1, CheckpointStatus.COMPLETED), (2, CheckpointStatus.INCOMPLETE), (3, CheckpointStatus.UNREADABLE),
        (4, CheckpointStatus.UNREADABLE), (5, CheckpointStatus.COMPLETED)]
    assert survey[0].checkpoint == first and survey[4].checkpoint == fifth
    assert "_metadata" in survey[1].problem and "_metadata" in survey[2].problem
    assert storage.completed() == [first, fifth]
    with pytest.raises(CorruptCheckpointError, match="never completed"):
        storage.read_checkpoint(2)
    with pytest.raises(CorruptCheckpointError, match=r"unreadable.*Usable checkpoints: \[1, 5\]"):
        storage.read_checkpoint(3)
    with pytest.raises(CheckpointNotFoundError, match=r"Usable checkpoints: \[1, 5\]"):
        storage.read_checkpoint(6)


def test_an_empty_or_missing_job_directory_holds_no_checkpoints(storage_impl):
    storage = storage_impl.storage()
    assert storage.checkpoint_ids() == [] and storage.survey() == [] and storage.completed() == []
    assert storage.next_checkpoint_id() == 1
    with pytest.raises(CheckpointNotFoundError, match="There is no usable checkpoint"):
        storage.read_checkpoint(1)
    storage.check_writable()
    assert storage.checkpoint_ids() == [] and storage.next_checkpoint_id() == 1


def test_problems_report_missing_and_truncated_state_files(storage_impl):
    storage = storage_impl.storage()
    commit(storage, 1)
    broken = commit(storage, 2)
    commit(storage, 3)
    missing, truncated, _intact = broken.state_handles
    storage.store.delete(storage.absolute(2, missing.path))
    truncated_path = storage.absolute(2, truncated.path)
    storage.store.write(truncated_path, storage.store.read(truncated_path)[:-7])
    problems = storage.problems(broken)
    assert len(problems) == 2
    assert storage.absolute(2, missing.path) in problems[0] and "missing" in problems[0]
    assert truncated_path in problems[1] and f"{truncated.size - 7} bytes" in problems[1]
    assert storage.problems(storage.read_checkpoint(3)) == []
    with pytest.raises(CorruptCheckpointError) as raised:
        storage.validated_checkpoint(2)
    message = str(raised.value)
    assert storage.absolute(2, missing.path) in message and truncated_path in message
    assert "Usable checkpoints: [1, 3]" in message
    assert storage.usable_ids() == [1, 3]
    assert [s.status for s in storage.survey()] == [CheckpointStatus.COMPLETED] * 3, "its _metadata still reads"


def test_next_checkpoint_id_continues_after_existing_ids(storage_impl):
    storage = storage_impl.storage()
    assert storage.next_checkpoint_id() == 1
    commit(storage, 1)
    assert storage.next_checkpoint_id() == 2
    commit(storage, 9)
    storage.write_state_file(12, "count", 0, [(1, b"x")])  # an incomplete one counts too: its id is taken
    for name in ("chk-x", "chk-", "other", "chk-99.inprogress"):
        storage.store.write(posixpath.join(storage.job_dir, name, "f"), b"x")
    storage.store.write(posixpath.join(storage.job_dir, "chk-100"), b"a file, not a directory")
    assert storage.checkpoint_ids() == [1, 9, 12, 100]
    assert storage.next_checkpoint_id() == 101


def test_delete_checkpoint_removes_that_checkpoint_and_nothing_else(storage_impl):
    storage = storage_impl.storage()
    first = commit(storage, 1)
    commit(storage, 2)
    third = commit(storage, 3)
    other_job = storage_impl.storage("other")
    other = commit(other_job, 2)
    storage.delete_checkpoint(2)
    assert storage.checkpoint_ids() == [1, 3]
    assert storage.completed() == [first, third] and storage.usable_ids() == [1, 3]
    assert other_job.validated_checkpoint(2) == other
    with pytest.raises(CheckpointNotFoundError):
        storage.read_checkpoint(2)
    storage.delete_checkpoint(2)  # already gone: nothing happens
    storage.delete_checkpoint(7)
    assert storage.checkpoint_ids() == [1, 3]


def test_discard_state_removes_the_given_files_and_nothing_else(storage_impl):
    storage = storage_impl.storage()
    checkpoint = commit(storage, 1)
    late = storage.write_state_file(1, "count", 5, [(1, b"late")])  # an ack the checkpoint will not use
    other = storage.write_state_file(1, "count", 6, [(2, b"kept")])
    storage.discard_state(1, [late])
    with pytest.raises(FileNotFoundError):
        storage.store.size(storage.absolute(1, late.path))
    assert list(storage.read_state_rows(1, other)) == [(2, b"kept")]
    assert storage.validated_checkpoint(1) == checkpoint
    storage.discard_state(1, [late])  # already gone: nothing happens
    storage.discard_state(1, checkpoint.state_handles)
    assert len(storage.problems(checkpoint)) == len(checkpoint.state_handles)
    assert storage.read_checkpoint(1) == checkpoint, "_metadata is not state"
    assert list(storage.read_state_rows(1, other)) == [(2, b"kept")]


# -- CheckpointStorage: an unreachable storage is never an empty one -------------------------------------------

# Which failing filesystem operations each storage question must not read as "no checkpoints".
QUESTIONS = {
    "checkpoint_ids": (lambda s: s.checkpoint_ids(), ["ls"]),
    "next_checkpoint_id": (lambda s: s.next_checkpoint_id(), ["ls"]),
    "survey": (lambda s: s.survey(), ["ls", "open"]),
    "completed": (lambda s: s.completed(), ["ls", "open"]),
    "usable_ids": (lambda s: s.usable_ids(), ["ls", "open", "size"]),
    "read_checkpoint": (lambda s: s.read_checkpoint(1), ["open"]),
    "read_checkpoint of a missing id": (lambda s: s.read_checkpoint(7), ["ls", "open"]),
    "read_checkpoint of an incomplete one": (lambda s: s.read_checkpoint(2), ["open"]),
    "validated_checkpoint": (lambda s: s.validated_checkpoint(1), ["open", "size"]),
    "problems": (lambda s: s.problems(s.checkpoint), ["size"]),
    "delete_checkpoint": (lambda s: s.delete_checkpoint(1), ["rm"]),
    "write_metadata": (lambda s: s.write_metadata(dataclasses.replace(s.checkpoint, checkpoint_id=8)),
                       ["makedirs"]),
    "check_writable": (lambda s: s.check_writable(), ["makedirs"]),
}
FAILURES = [(question, operation) for question, (_, operations) in QUESTIONS.items() for operation in operations]
FAILURES += [(question, "everything") for question in QUESTIONS]


@pytest.mark.parametrize("question,operation", FAILURES)
@pytest.mark.parametrize("error", ERRORS)
def test_an_unreachable_storage_raises_instead_of_looking_empty(storage_impl, error, question, operation):
    healthy = storage_impl.storage()
    checkpoint = commit(healthy, 1)
    healthy.write_state_file(2, "count", 0, [(1, b"x")])  # incomplete
    operations = ("ls", "open", "size", "rm", "makedirs") if operation == "everything" else (operation,)
    unreachable = storage_impl.storage(filesystem=storage_impl.failing(error(), operations))
    unreachable.checkpoint = checkpoint
    ask, _ = QUESTIONS[question]
    with pytest.raises(StorageUnreachableError, match=storage_impl.url):
        ask(unreachable)
    assert healthy.validated_checkpoint(1) == checkpoint and healthy.checkpoint_ids() == [1, 2], "nothing lost"


def test_a_job_directory_replaced_by_a_regular_file_is_unreachable(storage_impl):
    storage = storage_impl.storage()
    commit(storage, 1)
    storage.store.delete(storage.job_dir)
    storage.store.write(storage.job_dir, b"not a directory")
    for ask in (storage.checkpoint_ids, storage.next_checkpoint_id, storage.survey, storage.completed,
                lambda: storage.read_checkpoint(1)):
        with pytest.raises(StorageUnreachableError):
            ask()


def test_a_root_below_a_regular_file_is_unreachable(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    storage = CheckpointStorage(f"file://{tmp_path}/file/below", "job")
    for ask in (storage.checkpoint_ids, storage.next_checkpoint_id, storage.survey, storage.completed,
                lambda: storage.read_checkpoint(1), storage.check_writable):
        with pytest.raises(StorageUnreachableError, match="file/below"):
            ask()


def test_create_if_absent_counts_identical_content_as_done(storage_impl):
    """A retried write whose first try landed (a conditional PUT answering 412 on the retry) is no conflict."""
    store, root = storage_impl.store()
    assert store.create_if_absent(f"{root}/job/_metadata", b"same")
    assert store.create_if_absent(f"{root}/job/_metadata", b"same")
    assert not store.create_if_absent(f"{root}/job/_metadata", b"other")
    assert store.read(f"{root}/job/_metadata") == b"same"


def test_create_if_absent_stays_exclusive_where_xb_is_not_enforced(storage_impl):
    """Some fsspec filesystems accept mode ``xb`` and simply write: the store must not overwrite through it."""

    class Overwriting(storage_impl.filesystem_class):
        def _open(self, path, mode="rb", **kwargs):
            return super()._open(path, "wb" if mode == "xb" else mode, **kwargs)

        def open(self, path, mode="rb", **kwargs):
            return super().open(path, "wb" if mode == "xb" else mode, **kwargs)

    store, root = storage_impl.store(filesystem=Overwriting())
    assert store.create_if_absent(f"{root}/job/_metadata", b"first")
    assert not store.create_if_absent(f"{root}/job/_metadata", b"second")
    assert store.read(f"{root}/job/_metadata") == b"first"


def test_create_if_absent_works_on_local_disks_without_hard_links(tmp_path, monkeypatch):
    """Some mounts (FUSE, SMB, vfat) refuse hard links: the marker is then created exclusively another way."""
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", target)

    monkeypatch.setattr(os, "link", no_links)
    store, root = local(tmp_path).store()
    assert store.create_if_absent(f"{root}/job/_metadata", b"first")
    assert not store.create_if_absent(f"{root}/job/_metadata", b"second")
    assert store.read(f"{root}/job/_metadata") == b"first"
    assert sorted(os.listdir(f"{root}/job")) == ["_metadata"], "no temporary file is left behind"
