"""Incremental RocksDB checkpoints without Spark: what each checkpoint uploads, what it reuses, restores into
RocksDB (same key groups, and rescaled) and into the heap, local recovery, and missing or damaged files."""

from __future__ import annotations

import os
import shutil

import pytest

from runtime.errors import CorruptCheckpointError
from runtime.executor.restore import restore_operator
from runtime.executor.snapshotter import Snapshotter
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import RestoreSpec
from state_backends.descriptors import MapStateDescriptor, ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend
from state_backends.rocksdb import RocksDBKeyedStateBackend
from state_backends.storage import CheckpointStorage
from tests.unit.checkpointing import take_checkpoint

MAX_P = 128
KEYS = 1_500


class Job:
    """One keyed subtask on RocksDB with incremental checkpoints, and a snapshotter storing them."""

    def __init__(self, tmp_path, name="db"):
        self.tmp_path = tmp_path
        self.storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "job")
        self.backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), str(tmp_path / name),
                                                incremental=True, local_root=str(tmp_path / "local"))
        self.count = self.backend.get_state(ValueStateDescriptor("count"))
        self.seen = self.backend.get_state(MapStateDescriptor("seen"))
        self.sent = []
        self.snapshotter = Snapshotter(self.storage, 0, self.sent.append)

    def records(self, round_: int, keys=range(KEYS)) -> None:
        for key in keys:
            self.backend.set_current_key(key)
            self.count.update((self.count.value() or 0) + 1)
            self.seen.put(round_, key)

    def checkpoint(self, checkpoint_id: int, complete: bool = True):
        return take_checkpoint(self.backend, self.snapshotter, self.sent, checkpoint_id, complete)

    def close(self):
        self.snapshotter.close(10)
        self.backend.close()


class Op:
    def restore_operator_state(self, state):
        pass


def restored(job: Job, handle, checkpoint_id: int, backend):
    spec = RestoreSpec(checkpoint_id, (handle,), (), (backend.key_groups.start, backend.key_groups.end))
    restore_operator(job.storage, spec, Op(), backend, 0, 1)
    count = backend.get_state(ValueStateDescriptor("count"))
    seen = backend.get_state(MapStateDescriptor("seen"))
    found = {}
    for _, key, value in list(backend.entries("count")):
        backend.set_current_key(key)
        found[key] = (count.value(), sorted(seen.keys()))
    return found


@pytest.fixture
def job(tmp_path):
    made = Job(tmp_path)
    yield made
    made.close()


def test_each_checkpoint_uploads_only_files_no_completed_checkpoint_uploaded(job):
    handles = []
    for checkpoint_id in range(1, 5):
        job.records(checkpoint_id, range(0, KEYS, 10))  # a tenth of the keys change each time
        handles.append(job.checkpoint(checkpoint_id))
    first, *later = handles
    assert first.is_native and first.native_range == (0, MAX_P - 1) and first.shared
    for checkpoint_id, handle in enumerate(later, start=2):
        reused = [f for f in handle.shared if f.uploaded_in < checkpoint_id]
        assert reused, f"checkpoint {checkpoint_id} reuses earlier files"
        assert handle.uploaded_bytes(checkpoint_id) < handle.full_bytes
        assert {f.path for f in reused} <= {f.path for h in handles[:checkpoint_id - 1] for f in h.shared}


def test_files_of_a_checkpoint_that_did_not_complete_are_uploaded_again(job):
    job.records(1)
    job.checkpoint(1, complete=False)
    job.records(2, range(5))
    second = job.checkpoint(2)
    assert all(f.uploaded_in == 2 for f in second.shared), "nothing of the uncompleted checkpoint 1 is reused"


@pytest.mark.parametrize("target", ["rocksdb", "heap", "rocksdb-rescaled"])
def test_an_incremental_checkpoint_restores_into_rocksdb_the_heap_and_fewer_key_groups(job, tmp_path, target):
    for checkpoint_id in range(1, 4):
        job.records(checkpoint_id, range(0, KEYS, checkpoint_id))
        handle = job.checkpoint(checkpoint_id)
    job.records(99)  # after the checkpoint: not restored
    expected = {key: (sum(1 for r in range(1, 4) if key % r == 0), [r for r in range(1, 4) if key % r == 0])
                for key in range(KEYS)}
    if target == "heap":
        backend = HeapKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0))
    else:
        parallelism, subtask = (2, 1) if target == "rocksdb-rescaled" else (1, 0)
        backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, parallelism, subtask),
                                           str(tmp_path / "restored"), local_root=str(tmp_path / "local"))
        expected = {k: v for k, v in expected.items() if backend.prefix_of(k)[:2] >= bytes([0, 64 * subtask])}
    try:
        assert restored(job, handle, 3, backend) == expected
    finally:
        backend.close()


def test_a_restore_on_the_same_machine_takes_the_files_from_local_recovery(job, tmp_path):
    job.records(1)
    handle = job.checkpoint(1)
    job.storage.delete_shared([f.path for f in handle.shared])  # the store lost them: the local copy has them
    backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), str(tmp_path / "again"),
                                       local_root=str(tmp_path / "local"))
    try:
        assert len(restored(job, handle, 1, backend)) == KEYS
        assert backend.last_restore["downloaded"] == 0 and backend.last_restore["local"] > len(handle.shared)
    finally:
        backend.close()


def test_without_local_recovery_nothing_stays_on_the_worker_and_a_restore_downloads_everything(tmp_path):
    job = Job(tmp_path)
    job.backend.local_recovery = False
    try:
        job.records(1)
        handle = job.checkpoint(1)
        recovery = tmp_path / "local" / "recovery"
        assert not recovery.exists() or not any(recovery.rglob("*.sst")), "a local copy was kept"
        backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), str(tmp_path / "again"),
                                           local_root=str(tmp_path / "local"), local_recovery=False)
        try:
            assert len(restored(job, handle, 1, backend)) == KEYS
            assert backend.last_restore["local"] == 0 and backend.last_restore["downloaded"] > len(handle.shared)
        finally:
            backend.close()
    finally:
        job.close()


def test_a_missing_or_damaged_file_fails_the_restore_naming_it(job, tmp_path):
    job.records(1)
    handle = job.checkpoint(1)
    shutil.rmtree(tmp_path / "local" / "recovery")  # no local copy: the store is all there is
    victim = handle.shared[0].path
    path = os.path.join(job.storage.job_dir, victim)
    data = open(path, "rb").read()
    with open(path, "wb") as damaged:
        damaged.write(data[:-1] + bytes([data[-1] ^ 1]))
    for problem in ("checksum", "is missing"):
        backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), str(tmp_path / problem),
                                           local_root=str(tmp_path / "elsewhere"))
        try:
            with pytest.raises(CorruptCheckpointError, match=f"{victim}.*{problem}.*Restore an older checkpoint"):
                restored(job, handle, 1, backend)
        finally:
            backend.close()
        if os.path.exists(path):
            os.remove(path)


def test_a_subtask_whose_state_emptied_still_lists_its_files_so_retention_keeps_what_it_reuses(job, tmp_path):
    job.records(1)
    first = job.checkpoint(1)
    for key in range(KEYS):  # every row deleted: the instance still holds the files (tombstones, no compaction)
        job.backend.set_current_key(key)
        job.count.clear()
        job.seen.clear()
    emptied = job.checkpoint(2)
    assert emptied is not None and emptied.is_native, "an emptied instance still takes its incremental checkpoint"
    # retention keeping only checkpoint 2 deletes what only checkpoint 1 referenced
    job.storage.delete_shared(sorted({f.path for f in first.shared} - {f.path for f in emptied.shared}))
    job.records(3, range(5))
    third = job.checkpoint(3)
    assert not job.storage.problems(_as_checkpoint(third, 3)), "every file the newest checkpoint needs is there"
    shutil.rmtree(tmp_path / "local" / "recovery")
    backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), str(tmp_path / "again"),
                                       local_root=str(tmp_path / "elsewhere"))
    try:
        assert restored(job, third, 3, backend) == {key: (1, [3]) for key in range(5)}
    finally:
        backend.close()


def _as_checkpoint(handle, checkpoint_id):
    from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState

    return CompletedCheckpoint(checkpoint_id, "job", 0, 0, 1, MAX_P, (OperatorState("op", "op", 1, (handle,)),))
