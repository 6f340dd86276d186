"""Incremental heap checkpoints without Spark: which key groups each checkpoint writes and references, and that
every checkpoint along a chain restores exactly what the heap held at its barrier (into the heap, into RocksDB,
and rescaled), including after a restore and past a checkpoint that never completed."""

from __future__ import annotations

import random
import time

import pytest

from runtime.executor.restore import restore_operator
from runtime.executor.snapshotter import OperatorSnapshot, Snapshotter, SubtaskSnapshot
from runtime.keys.key_groups import assign_to_key_group, key_group_range
from runtime.protocol.checkpoints import HEAP_GROUPS_STATE_GROUP, RestoreSpec
from state_backends import HashMapStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend
from state_backends.heap.incremental import GroupManifest
from state_backends.rocksdb import RocksDBKeyedStateBackend
from state_backends.storage import CheckpointStorage
from tests.unit.checkpointing import take_checkpoint

MAX_P = 128
ALL = key_group_range(MAX_P, 1, 0)
KEYS = 2_000


class _NoOperatorState:
    def restore_operator_state(self, state):
        pass


class Job:
    """One keyed subtask on the heap with incremental checkpoints, and a snapshotter storing them."""

    def __init__(self, tmp_path, backend=None, declare=True):
        self.storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "job")
        self.backend = backend or HashMapStateBackend(True).create_keyed_state_backend("op", MAX_P, ALL)
        if declare:
            self.declare()
        self.sent = []
        self.snapshotter = Snapshotter(self.storage, 0, self.sent.append)

    def declare(self):
        self.count = self.backend.get_state(ValueStateDescriptor("count"))
        self.seen = self.backend.get_state(ListStateDescriptor("seen"))
        self.tags = self.backend.get_state(MapStateDescriptor("tags"))

    def write(self, keys, round_):
        for key in keys:
            self.backend.set_current_key(key)
            self.count.update((self.count.value() or 0) + 1)
            self.seen.add(round_)
            self.tags.put(round_ % 3, key)

    def checkpoint(self, checkpoint_id, complete=True, full=False):
        return take_checkpoint(self.backend, self.snapshotter, self.sent, checkpoint_id, complete, full)

    def contents(self) -> dict:
        return contents(self.backend)

    def close(self):
        self.snapshotter.close(10)


def contents(backend) -> dict:
    return {name: {key: value for _, key, value in backend.entries(name)} for name in ("count", "seen", "tags")}


def restored(job: Job, handle, checkpoint_id: int, backend, owned=(0, MAX_P - 1), own_job_dir=None) -> dict:
    """What ``backend`` holds once restored from ``job``'s checkpoint; ``own_job_dir``: where the restoring job
    keeps its checkpoints (default: the same directory)."""
    restore_operator(job.storage, RestoreSpec(checkpoint_id, (handle,), (), owned), _NoOperatorState(), backend,
                     0, 1, own_job_dir or job.storage.job_dir)
    for descriptor in (ValueStateDescriptor("count"), ListStateDescriptor("seen"), MapStateDescriptor("tags")):
        backend.get_state(descriptor)
    return contents(backend)


def manifest(job: Job, handle, checkpoint_id: int) -> GroupManifest:
    ((_, payload),) = job.storage.read_state_rows(checkpoint_id, handle, {HEAP_GROUPS_STATE_GROUP})
    return GroupManifest.from_bytes(payload)


def keys_in_groups(groups: set[int]) -> list[int]:
    return [key for key in range(KEYS) if assign_to_key_group(key, MAX_P) in groups]


@pytest.fixture()
def job(tmp_path):
    made = Job(tmp_path)
    yield made
    made.close()


def test_a_checkpoint_writes_only_the_groups_changed_since_the_last_completed_one(job):
    job.write(range(KEYS), 1)
    first = job.checkpoint(1)
    assert first.is_native and len(first.shared) == 1 and first.shared[0].uploaded_in == 1
    assert set(manifest(job, first, 1).files) == set(range(MAX_P)), "the first checkpoint writes every group"

    changed_groups = {3, 77}
    job.write(keys_in_groups(changed_groups), 2)
    second = job.checkpoint(2)
    files = manifest(job, second, 2).files
    new = {group for group, path in files.items() if path != first.shared[0].path}
    assert new == changed_groups
    assert {f.uploaded_in for f in second.shared} == {1, 2}
    assert second.uploaded_bytes(2) < first.uploaded_bytes(1) / 10, "the second stored a small part"
    expected = job.contents()

    third = job.checkpoint(3)  # nothing changed: everything referenced
    assert {f.uploaded_in for f in third.shared} == {1, 2} and third.uploaded_bytes(3) == third.size

    for checkpoint_id, handle in ((2, second), (3, third)):
        assert restored(job, handle, checkpoint_id, HeapKeyedStateBackend(MAX_P, ALL)) == expected


def test_a_checkpoint_that_never_completed_is_never_referenced(job):
    job.write(range(KEYS), 1)
    job.checkpoint(1)
    job.write(keys_in_groups({5}), 2)
    aborted = job.checkpoint(2, complete=False)
    job.write(keys_in_groups({9}), 3)
    third = job.checkpoint(3)
    assert all(f.uploaded_in != 2 for f in third.shared), "a file of checkpoint 2 (never completed) is referenced"
    written = {group for group, path in manifest(job, third, 3).files.items() if path.endswith("-3.rows.arrow")}
    assert written == {5, 9}, "groups changed since the last completed checkpoint, checkpoint 2's included"
    job.storage.delete_shared([f.path for f in aborted.shared if f.uploaded_in == 2])
    assert restored(job, third, 3, HeapKeyedStateBackend(MAX_P, ALL)) == job.contents()


def test_restores_into_rocksdb_and_rescaled(job, tmp_path):
    job.write(range(KEYS), 1)
    job.checkpoint(1)
    job.write(range(0, KEYS, 7), 2)
    handle = job.checkpoint(2)
    expected = job.contents()
    rocks = RocksDBKeyedStateBackend(MAX_P, ALL, str(tmp_path / "rocks"))
    try:
        assert restored(job, handle, 2, rocks) == expected
    finally:
        rocks.close()
    halves = []
    for subtask in range(2):
        part = key_group_range(MAX_P, 2, subtask)
        halves.append(restored(job, handle, 2, HeapKeyedStateBackend(MAX_P, part), (part.start, part.end)))
    for name in expected:
        assert {**halves[0][name], **halves[1][name]} == expected[name]
        assert not set(halves[0][name]) & set(halves[1][name])


def test_after_a_restore_the_next_checkpoint_references_the_restored_files(job, tmp_path):
    job.write(range(KEYS), 1)
    handle = job.checkpoint(1)
    again = Job(tmp_path, HashMapStateBackend(True).create_keyed_state_backend("op", MAX_P, ALL))
    try:
        assert restored(job, handle, 1, again.backend) == job.contents()
        again.declare()
        again.write(keys_in_groups({42}), 2)
        next_handle = again.checkpoint(2)
        files = manifest(again, next_handle, 2).files
        assert {g for g, p in files.items() if p != handle.shared[0].path} == {42}
        assert restored(again, next_handle, 2, HeapKeyedStateBackend(MAX_P, ALL)) == again.contents()
    finally:
        again.close()


def test_a_savepoint_is_written_whole_and_an_incremental_snapshot_refuses_to_be(job):
    job.write(range(KEYS), 1)
    job.checkpoint(1)
    job.write(keys_in_groups({1}), 2)
    whole = job.backend.snapshot(full=True)
    assert not whole.incremental and len({group for group, _ in whole.serialized()}) == MAX_P
    partial = job.backend.snapshot()
    with pytest.raises(Exception, match="full=True"):
        list(partial.serialized())
    partial.discard()


@pytest.mark.parametrize("seed", range(3))
def test_every_checkpoint_of_a_random_chain_restores_its_barrier_state(job, seed):
    """Writes of every kind, to few or many groups, checkpoints completed or not: each restores exactly what the
    heap held at its barrier."""
    rng = random.Random(seed)
    for checkpoint_id in range(1, 9):
        spread = rng.choice([1, 3, 40])
        groups = set(rng.sample(range(MAX_P), spread))
        keys = keys_in_groups(groups)
        job.write(rng.sample(keys, min(len(keys), 50)), checkpoint_id)
        if rng.random() < 0.3:  # a key cleared in every state
            job.backend.set_current_key(rng.randrange(KEYS))
            job.count.clear()
            job.seen.clear()
            job.tags.clear()
        if rng.random() < 0.3:  # bulk writes
            bulk = rng.sample(range(KEYS), 30)
            job.backend.put_many("count", bulk, [checkpoint_id] * len(bulk))
        expected = job.contents()
        handle = job.checkpoint(checkpoint_id, complete=rng.random() < 0.8)
        assert restored(job, handle, checkpoint_id, HeapKeyedStateBackend(MAX_P, ALL)) == expected, checkpoint_id


def test_a_write_after_the_barrier_to_the_key_set_before_it_is_written(job):
    """The barrier may come between setting a key and writing its state (a chained operator, a timer)."""
    job.write(range(KEYS), 1)
    job.checkpoint(1)
    job.backend.set_current_key(11)
    job.checkpoint(2)
    job.count.update(-1)  # no set_current_key since the barrier
    handle = job.checkpoint(3)
    assert restored(job, handle, 3, HeapKeyedStateBackend(MAX_P, ALL)) == job.contents()


def test_a_restore_from_another_job_directory_references_nothing_there(job, tmp_path):
    """Shared paths are relative to a job's directory: a job restored from another's checkpoint writes its
    first checkpoint whole into its own."""
    job.write(range(KEYS), 1)
    handle = job.checkpoint(1)
    other = Job(tmp_path / "other", HashMapStateBackend(True).create_keyed_state_backend("op", MAX_P, ALL))
    try:
        assert restored(job, handle, 1, other.backend, own_job_dir=other.storage.job_dir) == job.contents()
        other.declare()
        first = other.checkpoint(7)
        assert {f.uploaded_in for f in first.shared} == {7}
        assert restored(other, first, 7, HeapKeyedStateBackend(MAX_P, ALL)) == job.contents()
    finally:
        other.close()


def test_state_restored_into_another_ttl_format_is_written_anew(job, tmp_path):
    from runtime.common.time import Time
    from state_backends import StateTtlConfig

    job.write(range(KEYS), 1)
    handle = job.checkpoint(1)
    again = Job(tmp_path, HashMapStateBackend(True).create_keyed_state_backend("op", MAX_P, ALL), declare=False)
    try:
        restore_operator(job.storage, RestoreSpec(1, (handle,), (), (0, MAX_P - 1)), _NoOperatorState(),
                         again.backend, 0, 1, job.storage.job_dir)
        timed = ValueStateDescriptor("count")
        timed.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(60)).build())
        again.backend.get_state(timed)  # declared with a TTL: its restored entries change format
        second = again.checkpoint(2)
        written = {group for group, path in manifest(again, second, 2).files.items() if path.endswith("-2.rows.arrow")}
        groups_with_counts = {assign_to_key_group(key, MAX_P) for key in range(KEYS)}
        assert written >= groups_with_counts, "groups whose entries changed format must not be referenced"
    finally:
        again.close()


def test_a_checkpoint_aborted_while_its_groups_are_written_leaves_no_rows_file(job):
    job.write(range(KEYS), 1)
    job.checkpoint(1)
    job.write(range(KEYS), 2)
    job.snapshotter.abort(2)  # the coordinator gave it up before its rows were written
    job.snapshotter.submit(SubtaskSnapshot(2, 0, 0, [OperatorSnapshot("op", job.backend.snapshot(), {})], 0.0, 0.0,
                                           time.monotonic()))
    third = job.checkpoint(3)  # the snapshotter's queue is in order: checkpoint 2 was dealt with before
    assert not any(m.checkpoint_id == 2 for m in job.sent)
    assert sorted(path.rsplit("/", 1)[1].split("-")[1] for path in job.storage.shared_files()) == \
        ["1.rows.arrow", "3.rows.arrow"]
    assert restored(job, third, 3, HeapKeyedStateBackend(MAX_P, ALL)) == job.contents()


@pytest.mark.parametrize("seed", range(3))
def test_a_bulk_states_checkpoints_write_the_groups_its_keys_changed_in_and_restore_its_barrier_state(tmp_path, seed):
    """A bulk state (the aligned window's panes) holds the keys touched since the last barrier outside their key
    groups: each checkpoint still writes exactly the groups changed since the last completed one, and restores the
    state at its barrier."""
    job = Job(tmp_path, declare=False)
    try:
        backend, rng = job.backend, random.Random(seed)
        backend.declare_bulk_state(ValueStateDescriptor("count"))
        backend.aggregate_many("count", list(range(KEYS)), [1] * KEYS, lambda value, total: total + value, int)
        job.checkpoint(1)
        changed: set[int] = set()  # groups changed since the last completed checkpoint
        for checkpoint_id in range(2, 10):
            groups = set(rng.sample(range(MAX_P), rng.choice([1, 3, 40])))
            candidates = keys_in_groups(groups)
            keys = rng.sample(candidates, min(len(candidates), 30))
            new = range(KEYS * checkpoint_id, KEYS * (checkpoint_id + 1))  # keys no checkpoint holds yet
            keys += [key for key in new if assign_to_key_group(key, MAX_P) in groups][:5]
            backend.aggregate_many("count", keys, [checkpoint_id] * len(keys), lambda value, total: total + value, int)
            if rng.random() < 0.3:
                backend.put_many("count", keys[:3], [0] * 3)
            changed |= {assign_to_key_group(key, MAX_P) for key in keys}
            expected = job.contents()
            complete = rng.random() < 0.8
            handle = job.checkpoint(checkpoint_id, complete=complete)
            written = {group for group, path in manifest(job, handle, checkpoint_id).files.items()
                       if path.endswith(f"-{checkpoint_id}.rows.arrow")}
            assert written == changed, checkpoint_id
            if complete:
                changed = set()
            assert restored(job, handle, checkpoint_id, HeapKeyedStateBackend(MAX_P, ALL)) == expected, checkpoint_id
    finally:
        job.close()
