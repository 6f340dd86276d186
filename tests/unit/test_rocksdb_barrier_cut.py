"""A RocksDB checkpoint taken after the barrier holds the state at the barrier (state_backends/rocksdb/barrier.py).

The synchronous part of a RocksDB checkpoint only opens a cut; the checkpoint is taken later, while the task keeps
writing. Every test mirrors the same operations on the heap backend, whose snapshot is the reference: what the
RocksDB snapshot restores into a fresh heap must equal what the heap's snapshot at the same barrier restores.
"""

from __future__ import annotations

import os
import random

import pytest

from runtime.common.time import Time
from runtime.executor.restore import restore_operator
from runtime.executor.snapshotter import Snapshotter
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import RestoreSpec
from state_backends import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from state_backends.heap import HeapKeyedStateBackend
from state_backends.rocksdb import MemorySettings, RocksDBKeyedStateBackend
from state_backends.storage import CheckpointStorage
from tests.unit.checkpointing import take_checkpoint

MAX_P = 128
GROUPS = key_group_range(MAX_P, 1, 0)
STATES = ("value", "ttl_value", "list", "map", "sum")


def _descriptors():
    ttl = ValueStateDescriptor("ttl_value")
    ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1000)).build())
    return [ValueStateDescriptor("value"), ttl, ListStateDescriptor("list"), MapStateDescriptor("map"),
            ReducingStateDescriptor("sum", lambda a, b: a + b)]


class Mirror:
    """The same operations on a RocksDB backend and on the heap (the reference)."""

    def __init__(self, directory, settings: MemorySettings | None = None, incremental: bool = False):
        self.clock = [1_000]
        self.rocks = RocksDBKeyedStateBackend(MAX_P, GROUPS, str(directory / "db"), settings=settings,
                                              clock=lambda: self.clock[0], incremental=incremental,
                                              local_root=str(directory / "local"))
        self.heap = HeapKeyedStateBackend(MAX_P, GROUPS, clock=lambda: self.clock[0])
        self.states = {}
        for descriptor in _descriptors():
            self.declare(descriptor)
        self.dropped = 0

    def declare(self, descriptor):
        self.states[descriptor.name] = (self.rocks.get_state(descriptor), self.heap.get_state(descriptor))

    def each(self, name, action):
        for state in self.states[name]:
            action(state)

    def key(self, key):
        self.rocks.set_current_key(key)
        self.heap.set_current_key(key)

    def random_writes(self, rng: random.Random, count: int, value_bytes: int = 8) -> None:
        """Bulk writes (which write back the cache first), then ``count`` single ones: the barrier after this
        finds changes in the write-back cache that RocksDB does not have yet."""
        keys = [rng.randrange(200) for _ in range(20)]
        values = [rng.randrange(1000) for _ in keys]
        for backend in (self.rocks, self.heap):
            backend.put_many("value", keys, values)
        for _ in range(count):
            self.key(rng.randrange(200))
            op = rng.randrange(12)
            value = rng.randbytes(value_bytes) if value_bytes > 8 else rng.randrange(1000)
            if op < 3:
                self.each("value", lambda s: s.update(value))
            elif op == 3:
                self.each("value", lambda s: s.clear())
            elif op == 4:
                self.each("ttl_value", lambda s: s.update(value))
            elif op == 5:
                self.each("list", lambda s: s.add(value))
            elif op == 6:
                self.each("list", lambda s: s.clear())
            elif op == 7:
                field = rng.randrange(5)
                self.each("map", lambda s: s.put(field, value))
            elif op == 8:
                field = rng.randrange(5)
                self.each("map", lambda s: s.remove(field))
            elif op == 9:
                self.each("map", lambda s: s.clear())
            else:
                self.each("sum", lambda s: s.add(1))

    def short_lived_state(self, rng: random.Random) -> None:
        """A state declared, filled and dropped (as a window's panes are), with its id free for the next one."""
        self.dropped += 1
        name = f"pane-{self.dropped}"
        self.declare(MapStateDescriptor(name))
        for key in range(30):
            self.key(key)
            self.each(name, lambda s: s.put(rng.randrange(3), key))
        for backend in (self.rocks, self.heap):
            backend.drop_state(name)
        del self.states[name]

    def close(self):
        self.rocks.close()


class _NoOperatorState:
    def restore_operator_state(self, state):
        pass


def restored(snapshot) -> dict:
    """What a fresh heap backend holds after restoring ``snapshot``: {state: {key: value}}."""
    heap = HeapKeyedStateBackend(MAX_P, GROUPS, clock=lambda: 1_000)
    if snapshot is not None:
        for group, payload in snapshot.serialized():
            heap.restore_key_group(group, payload)
    for descriptor in _descriptors():
        heap.get_state(descriptor)
    return {name: {key: value for _, key, value in heap.entries(name)} for name in sorted(heap.state_names())}


@pytest.mark.parametrize("seed", range(4))
def test_writes_after_the_barrier_stay_out_of_the_checkpoint(tmp_path, seed):
    rng = random.Random(seed)
    mirror = Mirror(tmp_path)
    try:
        mirror.random_writes(rng, 3_000)
        mirror.short_lived_state(rng)
        ours, reference = mirror.rocks.snapshot(), mirror.heap.snapshot()
        assert not os.path.exists(ours.path), "the synchronous part took the RocksDB checkpoint"
        mirror.random_writes(rng, 3_000)  # every kind of write, and whole states dropped and declared anew
        mirror.short_lived_state(rng)
        mirror.declare(ValueStateDescriptor("declared-after"))
        mirror.key(1)
        mirror.each("declared-after", lambda s: s.update(1))
        expected = restored(reference)
        assert restored(ours) == expected
        assert expected["value"] and expected["map"] and expected["list"]
    finally:
        mirror.close()


def test_memtables_flushed_between_the_barrier_and_the_cut(tmp_path):
    """Writes after the barrier fill several small memtables that RocksDB flushes to files on its own before
    the checkpoint is taken: those files are in the checkpoint, and their rows are set back."""
    mirror = Mirror(tmp_path, MemorySettings(column_write_buffer_bytes=256 << 10))
    rng = random.Random(7)
    try:
        mirror.random_writes(rng, 2_000, value_bytes=2_000)
        ours, reference = mirror.rocks.snapshot(), mirror.heap.snapshot()
        mirror.random_writes(rng, 4_000, value_bytes=2_000)  # ~8 MB: about 30 memtables
        assert restored(ours) == restored(reference)
    finally:
        mirror.close()


def test_a_barrier_before_the_last_cut_was_taken(tmp_path):
    mirror = Mirror(tmp_path)
    rng = random.Random(3)
    try:
        mirror.random_writes(rng, 1_000)
        first, first_reference = mirror.rocks.snapshot(), mirror.heap.snapshot()
        mirror.random_writes(rng, 1_000)
        second, second_reference = mirror.rocks.snapshot(), mirror.heap.snapshot()  # takes the first cut now
        assert os.path.exists(first.path) and not os.path.exists(second.path)
        mirror.random_writes(rng, 1_000)
        assert restored(second) == restored(second_reference)
        assert restored(first) == restored(first_reference)
    finally:
        mirror.close()


def test_closing_takes_an_open_cut_and_a_discarded_one_leaves_nothing(tmp_path):
    mirror = Mirror(tmp_path)
    rng = random.Random(5)
    mirror.random_writes(rng, 1_000)
    dropped = mirror.rocks.snapshot()
    mirror.heap.snapshot()
    dropped.discard()  # the checkpoint was abandoned before its asynchronous part ran
    assert not os.path.exists(dropped.path)
    mirror.random_writes(rng, 1_000)
    ours, reference = mirror.rocks.snapshot(), mirror.heap.snapshot()
    mirror.random_writes(rng, 1_000)
    mirror.close()  # the task ends before the upload ran
    assert restored(ours) == restored(reference)


class WritesAfterBarrier:
    """The RocksDB backend of ``mirror``, whose snapshot() is followed by more writes (before the snapshotter's
    thread takes the cut, at the earliest: the checkpoint must not see them)."""

    def __init__(self, mirror: Mirror, rng: random.Random):
        self.mirror, self.rng = mirror, rng

    def snapshot(self, full=False):
        snapshot = self.mirror.rocks.snapshot(full)
        self.mirror.random_writes(self.rng, 3_000)
        return snapshot

    def notify_checkpoint_complete(self, checkpoint_id):
        self.mirror.rocks.notify_checkpoint_complete(checkpoint_id)


def test_an_incremental_checkpoint_restores_the_barrier_state(tmp_path):
    """The cut's checkpoint is what incremental uploads, local recovery and restores read: restored into a new
    RocksDB instance (adopting the files), it holds the state at the barrier. Along a chain of checkpoints: the
    files a cut writes are numbered as the instance numbers its own later ones, and must never be taken for
    them."""
    mirror = Mirror(tmp_path, incremental=True)
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "job")
    sent = []
    snapshotter = Snapshotter(storage, 0, sent.append)
    rng = random.Random(11)
    try:
        for checkpoint_id in (1, 2, 3):
            mirror.random_writes(rng, 3_000)
            reference = mirror.heap.snapshot()
            handle = take_checkpoint(WritesAfterBarrier(mirror, rng), snapshotter, sent, checkpoint_id)
            assert handle.is_native, sent[-1]
            target = RocksDBKeyedStateBackend(MAX_P, GROUPS, str(tmp_path / f"restored-{checkpoint_id}"),
                                              clock=lambda: mirror.clock[0])
            try:
                restore_operator(storage, RestoreSpec(checkpoint_id, (handle,), (), (0, MAX_P - 1)),
                                 _NoOperatorState(), target, 0, 1)
                for descriptor in _descriptors():
                    target.get_state(descriptor)
                got = {name: {key: value for _, key, value in target.entries(name)}
                       for name in sorted(target.state_names())}
            finally:
                target.close()
            assert got == restored(reference), f"checkpoint {checkpoint_id}"
    finally:
        snapshotter.close(10)
        mirror.close()
