"""A savepoint's keyed state as typed tables (metadata format 2): each state's entries come back identical through
its table, typed where the descriptor declares a type and the entry fits it, pickled otherwise; a damaged or missing
table is refused by name."""

import datetime
import os

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from runtime.common.time import Time
from runtime.errors import CorruptCheckpointError
from runtime.ids import CheckpointId
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState, StateHandle, StateTableFile
from runtime.types import Row, Types
from state_backends.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from state_backends.ttl import StateTtlConfig
from state_backends.heap import HeapKeyedStateBackend
from state_backends.rocksdb import RocksDBKeyedStateBackend
from state_backends.state_columns import StateFileEncoder, StateLayout, decode_batch
from state_backends.storage import SavepointStorage

MAX = 16
CHECKPOINT = CheckpointId(3)
PAIR = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def _declared(ttl_now=None):
    count = ValueStateDescriptor("count", Types.LONG())
    seen = ListStateDescriptor("seen", Types.STRING())
    visits = MapStateDescriptor("visits", Types.STRING(), Types.LONG())
    pair = ValueStateDescriptor("pair", PAIR)
    total = ReducingStateDescriptor("total", lambda a, b: a + b, Types.DOUBLE())
    anything = ValueStateDescriptor("anything")
    last = ValueStateDescriptor("last", Types.STRING())
    last.enable_time_to_live(StateTtlConfig.new_builder(Time.minutes(5)).build())
    return count, seen, visits, pair, total, anything, last


def _filled(backend):
    count, seen, visits, pair, total, anything, last = (backend.get_state(d) for d in _declared())
    expected = {}
    for n in range(40):
        key = f"k{n}"
        backend.set_current_key(key)
        count.update(n if n % 7 else 2 ** 70)  # 2**70 does not fit int64: that entry goes pickled
        seen.add_all([f"s{n}", f"t{n}"] if n % 5 else [n])  # an int in a STRING list: pickled
        visits.put("home", n)
        pair.update(Row(word=key, count=n) if n % 3 else (key, n))  # a tuple is not a Row: pickled
        total.add(n / 3)
        anything.update({"n": n, "when": datetime.date(2026, 1, 1 + n % 28)})
        last.update(key)
        expected[key] = {"count": count.value(), "seen": list(seen.get()), "visits": dict(visits.items()),
                         "pair": pair.value(), "total": total.get(), "anything": anything.value(),
                         "last": last.value()}
    return expected


def _read_back(restored, storage, handle):
    for group, payload in storage.read_state_rows(CHECKPOINT, handle, set(range(MAX))):
        restored.restore_key_group(group, payload)
    states = dict(zip(["count", "seen", "visits", "pair", "total", "anything", "last"],
                      (restored.get_state(d) for d in _declared())))
    got = {}
    for n in range(40):
        key = f"k{n}"
        restored.set_current_key(key)
        got[key] = {"count": states["count"].value(), "seen": list(states["seen"].get()),
                    "visits": dict(states["visits"].items()), "pair": states["pair"].value(),
                    "total": states["total"].get(), "anything": states["anything"].value(),
                    "last": states["last"].value()}
    return got


def _savepoint_of(backend, tmp_path):
    storage = SavepointStorage(str(tmp_path / "sp"))
    handle = storage.write_state_file(CHECKPOINT, "op", 0, [])
    snapshot = backend.snapshot(full=True)
    return storage, storage.write_state_tables(CHECKPOINT, "op", 0, handle, snapshot.serialized(),
                                               backend.declared_states())


def _heap(tmp_path, name):
    return HeapKeyedStateBackend(MAX, key_group_range(MAX, 1, 0), clock=lambda: 1_000)


def _rocksdb(tmp_path, name):
    return RocksDBKeyedStateBackend(MAX, key_group_range(MAX, 1, 0), str(tmp_path / name), clock=lambda: 1_000)


@pytest.mark.parametrize("make", [_heap, _rocksdb], ids=["heap", "rocksdb"])
def test_every_kind_of_state_comes_back_identical_through_its_table(make, tmp_path):
    backend = make(tmp_path, "written")
    expected = _filled(backend)
    storage, handle = _savepoint_of(backend, tmp_path)
    assert sorted(t.state for t in handle.tables) == sorted(["count", "seen", "visits", "pair", "total",
                                                            "anything", "last"])
    got = _read_back(_heap(tmp_path, "heap"), storage, handle)
    assert got == expected
    assert all(type(got[k]["pair"]) is type(expected[k]["pair"]) for k in expected)  # Rows stay Rows
    assert _read_back(_rocksdb(tmp_path, "rocksdb"), storage, handle) == expected


def test_declared_types_give_typed_columns_that_pyarrow_reads_without_chandy(tmp_path):
    backend = HeapKeyedStateBackend(MAX, key_group_range(MAX, 1, 0), clock=lambda: 1_000)
    _filled(backend)
    storage, handle = _savepoint_of(backend, tmp_path)
    directory = {t.state: os.path.dirname(os.path.join(str(tmp_path / "sp"), t.path)) for t in handle.tables}
    table = ds.dataset(directory["count"], format="arrow").to_table()
    assert table.schema.field("key").type == pa.string() and table.schema.field("value").type == pa.int64()
    typed = {k: v for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()) if v is not None}
    assert typed == {f"k{n}": n for n in range(40) if n % 7}
    assert ds.dataset(directory["seen"], format="arrow").schema.field("value").type == pa.list_(pa.string())
    assert ds.dataset(directory["visits"], format="arrow").schema.field("value").type == pa.map_(pa.string(),
                                                                                                 pa.int64())
    pairs = ds.dataset(directory["pair"], format="arrow").to_table()
    assert pairs.schema.field("value").type == PAIR.to_arrow()
    assert {"word": "k1", "count": 1} in pairs.column("value").to_pylist()
    last = ds.dataset(directory["last"], format="arrow").to_table()
    assert set(last.column("last_access_ms").to_pylist()) == {1_000}  # the TTL's clock at the writes
    assert "value" not in ds.dataset(directory["anything"], format="arrow").schema.names  # untyped: pickled


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_a_damaged_or_missing_table_is_refused_naming_it(tmp_path, damage):
    backend = HeapKeyedStateBackend(MAX, key_group_range(MAX, 1, 0), clock=lambda: 1_000)
    _filled(backend)
    storage, handle = _savepoint_of(backend, tmp_path)
    table = next(t for t in handle.tables if t.state == "count")
    path = tmp_path / "sp" / table.path
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:200] + bytes([data[200] ^ 1]) + data[201:])
    elif damage == "truncate":
        path.write_bytes(data[:-10])
    else:
        path.unlink()
    with pytest.raises(CorruptCheckpointError, match=f"state table .*{table.path}.* of state 'count'"):
        list(storage.read_state_rows(CHECKPOINT, handle, set(range(MAX))))
    checkpoint = CompletedCheckpoint(CHECKPOINT, "job", 0, 0, 1, MAX, (OperatorState("op", "op", 1, (handle,)),),
                                     savepoint=True)
    assert any(table.path in problem for problem in storage.problems(checkpoint)) is (damage != "flip")


def test_a_handle_with_tables_keeps_them_through_the_metadata_and_counts_their_groups_and_bytes():
    handle = StateHandle("op", 0, "op/0.arrow", 100, ())
    assert handle.keyed_groups == ()
    with_tables = StateHandle("op", 0, "op/0.arrow", 100, (-1,), "crc32:00000000",
                              tables=(StateTableFile("a", "op/a/0.arrow", 50, "crc32:1", (3, 5)),
                                      StateTableFile("b", "op/b/0.arrow", 20, "crc32:2", (5, 9))))
    assert with_tables.keyed_groups == (3, 5, 9) and with_tables.full_bytes == 170
    assert StateHandle.from_metadata(with_tables.to_metadata()) == with_tables


def test_keys_of_mixed_types_go_pickled_row_by_row():
    encoder = StateFileEncoder(StateLayout.of("n", ValueStateDescriptor("n", Types.LONG()), ttl=False))
    batch = encoder.batch(0, {1: 10, "two": 20, (3,): 30})
    assert batch.column("key").to_pylist() == [1, None, None]
    assert decode_batch(batch, encoder.schema) == (0, "n", {1: 10, "two": 20, (3,): 30})
