"""The keyed state contract, run against every ``StateBackend`` (as fsspec's abstract test suites).

Implementations are listed in ``STATE_BACKENDS``, one :class:`Implementation` each: a factory
``(scratch directory) -> StateBackend``, so a backend that keeps files (RocksDB) gets a directory of its own, and
whether its handles hand out the stored objects themselves. Adding a backend is adding one entry.

The tests see a backend only as the interfaces in ``state_backends/base.py`` show it: keyed backends come from
``create_keyed_state_backend(...)`` and are used through ``KeyedStateBackend``'s methods and the state handles
only, never through an implementation's internals. A snapshot is judged by what a fresh backend restored from
its ``serialized()`` rows holds.
"""

from __future__ import annotations

import copy
import pickle
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.errors import ChandyError, StateUsageError, UnpicklableStateError
from runtime.keys.key_groups import assign_to_key_group, key_group_range, key_group_to_subtask
from state_backends import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateBackend,
    ValueStateDescriptor,
)
from state_backends.base import KeyedStateBackend
from state_backends.rocksdb import EmbeddedRocksDBStateBackend


@dataclass(frozen=True)
class Implementation:
    make: Callable[[Path], StateBackend]  # given a scratch directory of its own
    # Handles return the stored objects themselves, so changing a value in place (without update()) changes
    # the state: true on the heap, false where values are stored serialized (RocksDB). Either way a change
    # after a snapshot never reaches that snapshot.
    values_by_reference: bool


STATE_BACKENDS = [
    pytest.param(Implementation(lambda directory: HashMapStateBackend(), values_by_reference=True), id="hashmap"),
    pytest.param(Implementation(lambda directory: HashMapStateBackend(enable_incremental_checkpointing=True),
                                values_by_reference=True), id="hashmap-incremental"),
    pytest.param(Implementation(lambda directory: EmbeddedRocksDBStateBackend(db_storage_path=str(directory)),
                                values_by_reference=False), id="rocksdb"),
]

MAX_PARALLELISM = 128
KEYS = [*range(40), "alice", "bob", "", "ü", ("tuple", 1), b"bytes", 2 ** 70, 1.5]


@pytest.fixture(scope="module", params=STATE_BACKENDS)
def implementation(request) -> Implementation:
    return request.param


@pytest.fixture(scope="module")
def state_backend(implementation, tmp_path_factory) -> StateBackend:
    return implementation.make(tmp_path_factory.mktemp("state-backend"))


class KeyedBackends:
    """Makes keyed backends of one ``StateBackend`` and closes them all at the end."""

    def __init__(self, state_backend: StateBackend):
        self.state_backend = state_backend
        self.made: list[KeyedStateBackend] = []

    def __call__(self, parallelism: int = 1, subtask: int = 0, max_parallelism: int = MAX_PARALLELISM,
                 uid: str = "op") -> KeyedStateBackend:
        backend = self.state_backend.create_keyed_state_backend(
            uid, max_parallelism, key_group_range(max_parallelism, parallelism, subtask))
        self.made.append(backend)
        return backend

    def close(self) -> None:
        for backend in self.made:
            backend.close()
        self.made.clear()


@pytest.fixture
def keyed(state_backend):
    backends = KeyedBackends(state_backend)
    yield backends
    backends.close()


# -- helpers ---------------------------------------------------------------------------------------------


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]


def concat(old, new):
    return old + new  # not commutative on strings: the order of arguments shows


DESCRIPTORS = {
    "value": lambda name: ValueStateDescriptor(name),
    "list": lambda name: ListStateDescriptor(name),
    "map": lambda name: MapStateDescriptor(name),
    "reducing": lambda name: ReducingStateDescriptor(name, concat),
    "aggregating": lambda name: AggregatingStateDescriptor(name, Average()),
}


class Handles:
    """The value, list and map states ``v``, ``l``, ``m`` of one keyed backend."""

    def __init__(self, backend: KeyedStateBackend):
        self.backend = backend
        self.v = backend.get_state(ValueStateDescriptor("v"))
        self.l = backend.get_state(ListStateDescriptor("l"))
        self.m = backend.get_state(MapStateDescriptor("m"))

    def at(self, key) -> "Handles":
        self.backend.set_current_key(key)
        return self


def fill(backend: KeyedStateBackend, keys=KEYS) -> Handles:
    """Every key gets a value ``{"n": key}``, a list ``[key]`` and a map ``{"k": key}``."""
    handles = Handles(backend)
    for key in keys:
        handles.at(key)
        handles.v.update({"n": key})
        handles.l.add(key)
        handles.m.put("k", key)
    return handles


def normalised(name: str, value):
    return list(value) if name == "l" else dict(value) if name == "m" else value


def contents(backend: KeyedStateBackend, names=("v", "l", "m")) -> dict:
    """``{state name: {key: value}}`` through ``entries()``, checking each entry's key group on the way."""
    found = {}
    for name in names:
        table = found[name] = {}
        for group, key, value in backend.entries(name):
            assert group == assign_to_key_group(key, backend.max_parallelism), f"{name}: key {key!r}"
            assert group in backend.key_groups, f"{name}: key {key!r} is outside the backend's key groups"
            assert key not in table, f"{name}: key {key!r} listed twice"
            table[key] = normalised(name, value)
    return found


def handle_contents(backend: KeyedStateBackend, keys) -> dict:
    """The same as :func:`contents`, asked key by key through the state handles."""
    handles = Handles(backend)
    found = {"v": {}, "l": {}, "m": {}}
    for key in keys:
        handles.at(key)
        if (value := handles.v.value()) is not None:
            found["v"][key] = value
        if items := list(handles.l.get()):
            found["l"][key] = items
        if not handles.m.is_empty():
            found["m"][key] = dict(handles.m.items())
    return found


def change_in_place(implementation: Implementation, state, change: Callable) -> None:
    """Change the current key's value in place; where values are stored serialized, write it back too."""
    value = state.value()
    change(value)
    if not implementation.values_by_reference:
        state.update(value)


def rows_of(snapshot) -> list:
    assert snapshot is not None
    rows = list(snapshot.serialized())
    written = [(group, name) for group, payload in rows for name in pickle.loads(payload)]
    assert len(written) == len(set(written)), "each state of a key group is written once"
    return rows


def restored(keyed: KeyedBackends, rows, parallelism: int = 1, subtask: int = 0,
             max_parallelism: int = MAX_PARALLELISM) -> KeyedStateBackend:
    """A fresh backend that restored the rows of its own key groups, as a restore after a rescale does."""
    backend = keyed(parallelism, subtask, max_parallelism)
    for group, payload in rows:
        if group in backend.key_groups:
            backend.restore_key_group(group, payload)
    return backend


def expected_fill(keys=KEYS) -> dict:
    return {"v": {k: {"n": k} for k in keys}, "l": {k: [k] for k in keys}, "m": {k: {"k": k} for k in keys}}


# -- the factory --------------------------------------------------------------------------------------------


def test_keyed_backends_own_the_key_groups_they_were_created_for(keyed):
    backend = keyed(parallelism=3, subtask=2)
    assert isinstance(backend, KeyedStateBackend)
    assert backend.max_parallelism == MAX_PARALLELISM
    assert backend.key_groups == key_group_range(MAX_PARALLELISM, 3, 2)


def test_the_state_backend_travels_pickled(state_backend, keyed):
    shipped = pickle.loads(pickle.dumps(state_backend))  # as the job graph ships it to the executors
    keyed.state_backend = shipped
    backend = keyed()
    fill(backend, ["x"])
    assert contents(backend) == expected_fill(["x"])


# -- every kind of state, scoped to the current key -----------------------------------------------------------


def test_the_current_key_is_what_was_set(keyed):
    backend = keyed()
    for key in ("a", 7, ("t", 1)):
        backend.set_current_key(key)
        assert backend.get_current_key() == key


def test_value_state_update_value_clear(keyed):
    backend = keyed()
    state = backend.get_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    assert state.value() is None
    state.update(1)
    state.update(2)
    backend.set_current_key("b")
    assert state.value() is None
    state.update("b's")
    backend.set_current_key("a")
    assert state.value() == 2
    state.clear()
    assert state.value() is None
    state.clear()  # clearing an absent entry is harmless
    backend.set_current_key("b")
    assert state.value() == "b's"
    assert list(backend.keys("v")) == ["b"]


def test_value_state_update_none_clears(keyed):
    backend = keyed()
    state = backend.get_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    state.update(0)  # falsy values are values
    assert state.value() == 0 and list(backend.keys("v")) == ["a"]
    state.update(None)
    assert state.value() is None
    assert list(backend.keys("v")) == [] and list(backend.entries("v")) == []


def test_list_state_add_add_all_update_get(keyed):
    backend = keyed()
    state = backend.get_state(ListStateDescriptor("l"))
    backend.set_current_key("a")
    assert list(state.get()) == []
    state.add(1)
    state.add_all([2, 3])
    state.add_all(iter([4]))  # any iterable
    state.add_all([])
    backend.set_current_key("b")
    assert list(state.get()) == []
    state.update(["x", "y"])
    backend.set_current_key("a")
    assert list(state.get()) == [1, 2, 3, 4]
    state.update(iter([9, 8]))
    assert list(state.get()) == [9, 8]
    state.add(7)
    assert list(state.get()) == [9, 8, 7]
    state.update([])
    assert list(state.get()) == []
    assert list(backend.keys("l")) == ["b"]
    backend.set_current_key("b")
    assert list(state.get()) == ["x", "y"]
    state.clear()
    assert list(state.get()) == [] and list(backend.keys("l")) == []


def test_list_states_of_different_keys_are_separate(keyed):
    backend = keyed()
    state = backend.get_state(ListStateDescriptor("l"))
    backend.set_current_key("a")
    state.add_all([1, 2])
    state.add(3)
    assert list(state.get()) == [1, 2, 3]
    backend.set_current_key("b")
    state.add_all([5])
    backend.set_current_key("a")
    assert list(state.get()) == [1, 2, 3]


def test_map_state_operations(keyed):
    backend = keyed()
    state = backend.get_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    assert state.is_empty() and state.get("x") is None and not state.contains("x")
    assert list(state.items()) == [] and list(state.keys()) == [] and list(state.values()) == []
    state.put("x", 1)
    state.put("y", 2)
    state.put("x", 3)
    state.put_all({"z": 4, "y": 5})
    state.put("none", None)
    backend.set_current_key("b")
    assert state.is_empty() and not state.contains("x")
    state.put("x", "b's")
    backend.set_current_key("a")
    assert not state.is_empty()
    assert state.get("x") == 3 and state.get("y") == 5 and state.get("missing") is None
    assert state.contains("x") and state.contains("none") and not state.contains("missing")
    assert dict(state.items()) == {"x": 3, "y": 5, "z": 4, "none": None}
    assert sorted(state.keys()) == ["none", "x", "y", "z"]
    assert sorted(state.values(), key=repr) == sorted([3, 5, 4, None], key=repr)
    state.remove("x")
    state.remove("missing")  # removing an absent map key is harmless
    assert not state.contains("x") and state.get("x") is None
    assert dict(state.items()) == {"y": 5, "z": 4, "none": None}
    for name in ("y", "z", "none"):
        state.remove(name)
    assert state.is_empty() and dict(state.items()) == {}
    assert list(backend.keys("m")) == ["b"], "a key whose map is empty has no entry"
    backend.set_current_key("b")
    assert dict(state.items()) == {"x": "b's"}
    state.clear()
    assert state.is_empty() and list(backend.keys("m")) == []


def test_map_state_iterators_survive_changes_while_iterating(keyed):
    backend = keyed()
    state = backend.get_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    state.put_all({i: i for i in range(10)})
    for key in state.keys():
        if key % 2:
            state.remove(key)
    for key, value in state.items():
        state.put(key + 100, value)
    assert dict(state.items()) == {**{i: i for i in range(0, 10, 2)}, **{i + 100: i for i in range(0, 10, 2)}}


def test_reducing_state_folds_values_in_order(keyed):
    backend = keyed()
    state = backend.get_state(ReducingStateDescriptor("r", concat))
    backend.set_current_key("a")
    assert state.get() is None
    state.add("x")
    assert state.get() == "x"
    state.add("y")
    state.add("z")
    backend.set_current_key("b")
    assert state.get() is None
    state.add("q")
    backend.set_current_key("a")
    assert state.get() == "xyz", "reduce_function(old, new), in arrival order"
    state.clear()
    assert state.get() is None
    state.add("w")
    assert state.get() == "w"
    backend.set_current_key("b")
    assert state.get() == "q"


def test_aggregating_state_returns_the_functions_result(keyed):
    backend = keyed()
    state = backend.get_state(AggregatingStateDescriptor("avg", Average()))
    backend.set_current_key("a")
    assert state.get() is None
    for value in (1, 2, 6):
        state.add(value)
    backend.set_current_key("b")
    assert state.get() is None
    state.add(10)
    backend.set_current_key("a")
    assert state.get() == 3.0
    state.clear()
    assert state.get() is None
    state.add(4)
    assert state.get() == 4.0
    backend.set_current_key("b")
    assert state.get() == 10.0


def test_keys_python_finds_equal_are_one_key_before_and_after_a_restore(keyed):
    backend = keyed()
    count = backend.get_state(ValueStateDescriptor("count"))
    backend.set_current_key(1)
    count.update(10)
    for same in (True, 1.0, 1):
        backend.set_current_key(same)
        assert count.value() == 10, same
    backend.set_current_key(-0.0)
    count.update(5)
    restored_backend = restored(keyed, rows_of(backend.snapshot()))
    restored_count = restored_backend.get_state(ValueStateDescriptor("count"))
    for key, expected in ((1.0, 10), (True, 10), (0.0, 5), (0, 5)):
        restored_backend.set_current_key(key)
        assert restored_count.value() == expected, key


def test_get_state_twice_gives_the_same_state(keyed):
    backend = keyed()
    first = backend.get_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    first.update(1)
    again = backend.get_state(ValueStateDescriptor("v"))
    assert again.value() == 1
    again.update(2)
    assert first.value() == 2


def test_states_of_different_names_are_independent(keyed):
    backend = keyed()
    one = backend.get_state(ValueStateDescriptor("one"))
    two = backend.get_state(ValueStateDescriptor("two"))
    backend.set_current_key("a")
    one.update(1)
    assert two.value() is None
    two.update(2)
    one.clear()
    assert two.value() == 2 and list(backend.keys("one")) == [] and list(backend.keys("two")) == ["a"]


@pytest.mark.parametrize("first,second", [(a, b) for a in DESCRIPTORS for b in DESCRIPTORS if a != b])
def test_one_name_declared_as_another_kind_raises(keyed, first, second):
    backend = keyed()
    state = backend.get_state(DESCRIPTORS[first]("s"))
    with pytest.raises(StateUsageError, match="'s'"):
        backend.get_state(DESCRIPTORS[second]("s"))
    assert backend.get_state(DESCRIPTORS[first]("s")) is not None, "the first declaration still stands"
    backend.set_current_key("a")
    state.clear()  # and its handle still works


# -- many keys at once ----------------------------------------------------------------------------------------


def test_get_many_and_put_many_agree_with_value_handles(keyed):
    backend = keyed()
    state = backend.get_state(ValueStateDescriptor("v"))
    for key in KEYS[:20]:
        backend.set_current_key(key)
        state.update(("handle", key))
    assert backend.get_many("v", KEYS) == [("handle", k) if k in KEYS[:20] else None for k in KEYS]
    assert backend.get_many("v", []) == []
    backend.put_many("v", KEYS[10:], [("many", k) for k in KEYS[10:]])
    backend.put_many("v", ["dup", "dup"], [1, 2])  # the last value of a key wins
    for key in KEYS:
        backend.set_current_key(key)
        assert state.value() == (("handle", key) if key in KEYS[:10] else ("many", key))
    backend.set_current_key("dup")
    assert state.value() == 2
    assert backend.get_many("v", ["dup", "absent", KEYS[0]]) == [2, None, ("handle", KEYS[0])]
    assert contents(backend, ["v"])["v"] == {**{k: ("handle", k) for k in KEYS[:10]},
                                              **{k: ("many", k) for k in KEYS[10:]}, "dup": 2}


# -- iteration ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("parallelism,subtask", [(1, 0), (2, 1), (3, 1)])
def test_keys_and_entries_give_each_keys_key_group(keyed, parallelism, subtask):
    owned = [k for k in KEYS if key_group_to_subtask(assign_to_key_group(k, MAX_PARALLELISM), MAX_PARALLELISM,
                                                      parallelism) == subtask]
    assert owned, "the keys must reach this subtask"
    backend = keyed(parallelism, subtask)
    fill(backend, owned)
    for name in ("v", "l", "m"):
        assert sorted(backend.keys(name), key=repr) == sorted(owned, key=repr)
        assert sorted(((g, k) for g, k, _ in backend.entries(name)), key=repr) == sorted(
            ((assign_to_key_group(k, MAX_PARALLELISM), k) for k in owned), key=repr)
    assert contents(backend) == expected_fill(owned)
    assert list(backend.keys("undeclared")) == [] and list(backend.entries("undeclared")) == []


# -- snapshots ------------------------------------------------------------------------------------------------


def test_snapshot_round_trip_gives_the_same_entries(keyed):
    backend = keyed()
    handles = fill(backend)
    reduced = backend.get_state(ReducingStateDescriptor("r", concat))
    average = backend.get_state(AggregatingStateDescriptor("avg", Average()))
    for key in KEYS[:5]:
        backend.set_current_key(key)
        reduced.add("a")
        reduced.add("b")
        average.add(2)
        average.add(4)
    copy_ = restored(keyed, rows_of(backend.snapshot()))
    assert contents(copy_) == contents(backend) == expected_fill()
    assert handle_contents(copy_, KEYS) == expected_fill()
    r = copy_.get_state(ReducingStateDescriptor("r", concat))
    a = copy_.get_state(AggregatingStateDescriptor("avg", Average()))
    for key in KEYS:
        copy_.set_current_key(key)
        assert (r.get(), a.get()) == (("ab", 3.0) if key in KEYS[:5] else (None, None))
    r.add("c")
    copy_.set_current_key(KEYS[0])
    r.add("c")
    assert r.get() == "abc", "restored state goes on where it was"
    handles.at(KEYS[0])
    assert handles.v.value() == {"n": KEYS[0]}
    twice = restored(keyed, rows_of(copy_.snapshot()))  # a restored backend snapshots what it restored
    assert contents(twice) == expected_fill()


@pytest.mark.parametrize("parallelism", [2, 3])
def test_rescaled_restore_puts_each_key_where_its_key_group_says(keyed, parallelism):
    original = keyed()
    fill(original)
    rows = rows_of(original.snapshot())
    assert {group for group, _ in rows} == {assign_to_key_group(k, MAX_PARALLELISM) for k in KEYS}
    union = {"v": {}, "l": {}, "m": {}}
    for subtask in range(parallelism):
        part = restored(keyed, rows, parallelism, subtask)
        found = contents(part)  # checks every entry's key group is in the part's range
        for key in KEYS:
            home = key_group_to_subtask(assign_to_key_group(key, MAX_PARALLELISM), MAX_PARALLELISM, parallelism)
            assert (key in found["v"]) == (home == subtask), f"key {key!r} belongs to subtask {home}"
        assert handle_contents(part, [k for k in KEYS if k in found["v"]]) == found
        for name, table in found.items():
            assert not set(table) & set(union[name]), "no key restored twice"
            union[name].update(table)
    assert union == contents(original) == expected_fill()


def test_restoring_a_key_group_outside_the_range_raises(keyed):
    source = keyed()
    fill(source)
    rows = rows_of(source.snapshot())
    lower = keyed(parallelism=2, subtask=0)
    outside = [(group, payload) for group, payload in rows if group not in lower.key_groups]
    assert outside
    with pytest.raises(ChandyError):
        lower.restore_key_group(*outside[0])
    assert all(group not in lower.key_groups for group, _ in outside)


def test_values_read_in_bulk_and_changed_in_place_after_a_barrier_stay_as_they_were_in_the_snapshot(keyed):
    """get_many hands out the values themselves (window accumulators, reduce values), which an aggregate
    function may change in place before put_many: the snapshot taken before holds them as they were."""
    backend = keyed()
    backend.get_state(ValueStateDescriptor("acc"))
    backend.put_many("acc", ["k"], [[1]])
    snapshot = backend.snapshot()
    (accumulator,) = backend.get_many("acc", ["k"])
    accumulator.append(2)  # an accumulator updated in place, as add() may do
    backend.put_many("acc", ["k"], [accumulator])
    copy_ = restored(keyed, rows_of(snapshot))
    copy_.get_state(ValueStateDescriptor("acc"))
    assert copy_.get_many("acc", ["k"]) == [[1]]


def test_fold_many_folds_each_keys_values_in_their_order_and_keeps_snapshots_as_they_were(keyed):
    backend = keyed()
    backend.get_state(ValueStateDescriptor("joined"))
    backend.put_many("joined", ["a"], [["start"]])
    snapshot = backend.snapshot()

    def append(accumulator, value):  # changes the stored list in place, as an accumulator may
        accumulator = accumulator if accumulator is not None else []
        accumulator.append(value)
        return accumulator

    backend.fold_many("joined", ["a", "b", "a", "b", "a"], [1, 2, 3, 4, 5], append)
    assert backend.get_many("joined", ["a", "b", "c"]) == [["start", 1, 3, 5], [2, 4], None]
    copy_ = restored(keyed, rows_of(snapshot))
    copy_.get_state(ValueStateDescriptor("joined"))
    assert copy_.get_many("joined", ["a", "b"]) == [["start"], None]


def test_aggregate_many_adds_each_keys_values_to_a_new_or_stored_accumulator_in_their_order(keyed):
    """An AggregateFunction's add(value, accumulator) and create_accumulator(), as a window's panes use them:
    the accumulator changed in place stays out of a snapshot taken before."""
    backend = keyed()
    backend.get_state(ValueStateDescriptor("joined"))
    backend.put_many("joined", ["a"], [["start"]])
    snapshot = backend.snapshot()
    created = []

    def add(value, accumulator):
        accumulator.append(value)
        return accumulator

    def create():
        created.append(1)
        return []

    backend.aggregate_many("joined", ["a", "b", "a", "b", "a"], [1, 2, 3, 4, 5], add, create)
    assert backend.get_many("joined", ["a", "b", "c"]) == [["start", 1, 3, 5], [2, 4], None]
    assert len(created) == 1, "one accumulator created, for the key that had none"
    copy_ = restored(keyed, rows_of(snapshot))
    copy_.get_state(ValueStateDescriptor("joined"))
    assert copy_.get_many("joined", ["a", "b"]) == [["start"], None]


def test_snapshot_is_none_without_state(keyed):
    backend = keyed()
    assert backend.snapshot() is None, "nothing declared"
    state = backend.get_state(ValueStateDescriptor("v"))
    backend.get_state(ListStateDescriptor("l"))
    assert backend.snapshot() is None, "declared, never written"
    for key in KEYS:
        backend.set_current_key(key)
        state.update(key)
    for key in KEYS:
        backend.set_current_key(key)
        state.clear()
    assert backend.snapshot() is None, "every entry cleared"


def test_updates_deletes_and_new_keys_after_the_snapshot_stay_out_of_it(keyed):
    backend = keyed()
    handles = fill(backend, KEYS)
    snapshot = backend.snapshot()
    for key in KEYS[0::3]:
        handles.at(key)
        handles.v.update({"n": "changed"})
        handles.l.update(["changed"])
        handles.m.put("k", "changed")
    for key in KEYS[1::3]:
        handles.at(key)
        handles.v.clear()
        handles.l.clear()
        handles.m.remove("k")
    for key in KEYS[2::3]:
        handles.at(key)
        handles.v.update(None)
        handles.l.add("more")
        handles.m.put("more", 1)
    for key in ("new", 1000):
        handles.at(key)
        handles.v.update({"n": key})
        handles.l.add(key)
        handles.m.put("k", key)
    backend.put_many("v", KEYS[2::3] + ["many"], [{"n": "put_many"}] * (len(KEYS[2::3]) + 1))
    live = contents(backend)
    assert contents(restored(keyed, rows_of(snapshot))) == expected_fill(), "the state at the barrier"
    assert contents(backend) == live, "serializing the snapshot does not change the live state"
    assert live["v"] == {**{k: {"n": "changed"} for k in KEYS[0::3]}, **{k: {"n": "put_many"} for k in KEYS[2::3]},
                         "new": {"n": "new"}, 1000: {"n": 1000}, "many": {"n": "put_many"}}
    assert live["l"] == {**{k: ["changed"] for k in KEYS[0::3]}, **{k: [k, "more"] for k in KEYS[2::3]},
                         "new": ["new"], 1000: [1000]}
    assert live["m"] == {**{k: {"k": "changed"} for k in KEYS[0::3]},
                         **{k: {"k": k, "more": 1} for k in KEYS[2::3]}, "new": {"k": "new"}, 1000: {"k": 1000}}


def test_put_many_after_the_snapshot_stays_out_of_it(keyed):
    backend = keyed()
    fill(backend)
    snapshot = backend.snapshot()
    backend.put_many("v", KEYS + ["new"], [{"n": "many"} for _ in range(len(KEYS) + 1)])  # first access
    assert contents(restored(keyed, rows_of(snapshot))) == expected_fill()
    assert contents(backend)["v"] == {k: {"n": "many"} for k in KEYS + ["new"]}


def test_values_mutated_in_place_after_the_snapshot_stay_out_of_it(keyed, implementation):
    backend = keyed()
    handles = Handles(backend)
    for key in KEYS:
        handles.at(key)
        handles.v.update({"n": key, "seen": [key]})
        handles.m.put("k", [key])
    snapshot = backend.snapshot()
    for key in KEYS:
        handles.at(key)
        value = handles.v.value()
        value["n"] = "mutated"  # in place, without update()
        value["seen"].append("late")
        handles.m.get("k").append("late")
    assert contents(restored(keyed, rows_of(snapshot)), ["v", "m"]) == {
        "v": {k: {"n": k, "seen": [k]} for k in KEYS}, "m": {k: {"k": [k]} for k in KEYS}}
    if implementation.values_by_reference:
        handles.at(KEYS[3])
        assert handles.v.value() == {"n": "mutated", "seen": [KEYS[3], "late"]}, "the live state keeps the change"
        assert handles.m.get("k") == [KEYS[3], "late"]


def test_a_key_set_before_the_snapshot_stays_current_and_its_changes_stay_out_of_it(keyed):
    backend = keyed()
    handles = fill(backend)
    handles.at(KEYS[7])
    snapshot = backend.snapshot()  # the barrier comes between two records; the key stays set
    handles.v.update({"n": "after"})
    handles.l.add("after")
    handles.m.put("k", "after")
    assert backend.get_current_key() == KEYS[7]
    assert contents(restored(keyed, rows_of(snapshot))) == expected_fill()
    assert contents(backend)["v"][KEYS[7]] == {"n": "after"}


def test_changes_while_the_snapshot_is_being_written_stay_out_of_it(keyed, implementation):
    backend = keyed()
    handles = fill(backend)
    snapshot = backend.snapshot()
    rows = snapshot.serialized()
    written = [next(rows)]  # the snapshotter is part way through
    for key in KEYS:
        handles.at(key)
        change_in_place(implementation, handles.v, lambda value: value.update(n="mutated"))
        handles.l.add("late")
    backend.put_many("v", KEYS, [{"n": "many"} for _ in KEYS])
    written.extend(rows)
    assert contents(restored(keyed, written)) == expected_fill()


def test_a_discarded_snapshot_no_longer_tracks_changes(keyed, implementation):
    backend = keyed()
    handles = fill(backend)
    kept = backend.snapshot()
    dropped = backend.snapshot()
    dropped.discard()  # its checkpoint failed
    for key in KEYS:
        handles.at(key)
        handles.v.update({"n": "after"})
        change_in_place(implementation, handles.v, lambda value: value.update(extra=True))
    after = {k: {"n": "after", "extra": True} for k in KEYS}
    later = backend.snapshot()
    assert contents(restored(keyed, rows_of(kept))) == expected_fill(), "discarding one leaves the other alone"
    assert contents(restored(keyed, rows_of(later)), ["v"])["v"] == after
    assert contents(backend, ["v"])["v"] == after
    rows = backend.snapshot().serialized()
    next(rows)
    rows.close()  # an upload that failed part way: the snapshot is released
    for key in KEYS:
        handles.at(key)
        handles.v.update({"n": "last"})
    assert contents(restored(keyed, rows_of(backend.snapshot())), ["v"])["v"] == {k: {"n": "last"} for k in KEYS}


def test_two_snapshots_in_flight_each_hold_their_own_barrier(keyed, implementation):
    backend = keyed()
    handles = fill(backend)
    first = backend.snapshot()
    first_rows = first.serialized()
    partial = [next(first_rows)]
    for key in KEYS[::2]:
        handles.at(key)
        change_in_place(implementation, handles.v, lambda value: value.update(n="second"))
        handles.l.add("second")
    handles.at("only-second")
    handles.v.update({"n": "only-second"})
    second = backend.snapshot()
    for key in KEYS:
        handles.at(key)
        handles.v.update({"n": "third"})
        handles.l.clear()
        handles.m.put("k", "third")
    handles.at("only-second")
    handles.v.clear()
    at_second = expected_fill()
    for key in KEYS[::2]:
        at_second["v"][key] = {"n": "second"}
        at_second["l"][key] = [key, "second"]
    at_second["v"]["only-second"] = {"n": "only-second"}
    assert contents(restored(keyed, rows_of(second))) == at_second, "the second is written first"
    partial.extend(first_rows)
    assert contents(restored(keyed, partial)) == expected_fill()
    assert contents(backend) == {"v": {k: {"n": "third"} for k in KEYS}, "l": {},
                                 "m": {k: {"k": "third"} for k in KEYS}}


@pytest.mark.parametrize("touched", [False, True], ids=["untouched", "touched-after-barrier"])
def test_an_unpicklable_value_fails_serialization_naming_the_state(keyed, touched, implementation):
    backend = keyed()
    fine = backend.get_state(ValueStateDescriptor("fine"))
    bad = backend.get_state(ValueStateDescriptor("bad"))
    for key in KEYS:
        backend.set_current_key(key)
        fine.update(key)
    backend.set_current_key(KEYS[5])
    if not implementation.values_by_reference:  # stored serialized: the write fails, naming state, key and uid
        with pytest.raises(UnpicklableStateError, match="'bad' of operator uid 'op'.* key 5") as raised:
            bad.update([threading.Lock()])
        assert "'fine'" not in str(raised.value) and bad.value() is None
        return
    bad.update([threading.Lock()])
    snapshot = backend.snapshot()
    if touched:  # the task goes on and touches the key before the snapshotter gets to it
        backend.set_current_key(KEYS[5])
        fine.update("later")
    with pytest.raises(UnpicklableStateError, match="'bad'") as raised:
        list(snapshot.serialized())
    assert "'fine'" not in str(raised.value)
    backend.set_current_key(KEYS[5])  # the checkpoint failed, not the task
    bad.clear()
    assert contents(restored(keyed, rows_of(backend.snapshot())), ["fine"])["fine"] == {
        k: ("later" if touched and k == KEYS[5] else k) for k in KEYS}


# -- a property: random operations against a dict model -------------------------------------------------------

PROPERTY_KEYS = [*range(12), "a", "b", ("t", 1)]
SAME = object()  # keep the key set last: the operation follows a snapshot with no set_current_key between
_key = st.sampled_from(PROPERTY_KEYS)
_target = st.sampled_from([*PROPERTY_KEYS, SAME, SAME])
_n = st.integers(0, 9)
_slot = st.integers(0, 1)
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("set"), _target, _n),
    st.tuples(st.just("none"), _target),
    st.tuples(st.just("clear"), _target),
    st.tuples(st.just("mutate"), _target, _n),
    st.tuples(st.just("add"), _target, _n),
    st.tuples(st.just("put"), _target, st.sampled_from("xy"), _n),
    st.tuples(st.just("remove"), _target, st.sampled_from("xy")),
    st.tuples(st.just("put_many"), st.lists(_key, max_size=4), _n),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("advance"), _slot),
    st.tuples(st.just("discard"), _slot),
    st.tuples(st.just("close"), _slot),
), min_size=15, max_size=80)


class ModelRun:
    """Operations applied to a keyed backend (through its interface) and to a plain dict model."""

    def __init__(self, backend: KeyedStateBackend, values_by_reference: bool):
        self.handles = Handles(backend)
        self.backend = backend
        self.values_by_reference = values_by_reference
        self.model = {"v": {}, "l": {}, "m": {}}
        self.key = SAME  # none set yet

    def apply(self, operation: tuple) -> None:
        kind, *args = operation
        v, l, m = self.model["v"], self.model["l"], self.model["m"]
        if kind == "put_many":
            keys, n = args
            self.backend.put_many("v", keys, [[n] for _ in keys])  # a list of its own per key
            v.update({key: [n] for key in keys})
            return
        if args[0] is not SAME:
            self.key = args[0]
            self.handles.at(self.key)
        elif self.key is SAME:
            return
        key, handles = self.key, self.handles
        if kind == "set":
            handles.v.update([args[1]])
            v[key] = [args[1]]
        elif kind == "none":
            handles.v.update(None)
            v.pop(key, None)
        elif kind == "clear":
            handles.v.clear()
            v.pop(key, None)
        elif kind == "mutate":
            value = handles.v.value()
            if value is not None:
                value.append(args[1])  # in place
                if not self.values_by_reference:
                    handles.v.update(value)
                v[key] = v[key] + [args[1]]
        elif kind == "add":
            handles.l.add(args[1])
            l[key] = l.get(key, []) + [args[1]]
        elif kind == "put":
            handles.m.put(args[1], args[2])
            m[key] = {**m.get(key, {}), args[1]: args[2]}
        elif kind == "remove":
            handles.m.remove(args[1])
            if key in m:
                m[key] = {k: x for k, x in m[key].items() if k != args[1]}
                if not m[key]:
                    del m[key]


class SnapshotsInFlight:
    """Up to two snapshots of ``backend`` being written while operations go on, each with a copy of ``model`` at
    its barrier; ``is_empty()``: whether the model holds no state (then ``snapshot()`` must be None)."""

    def __init__(self, backend: KeyedStateBackend, model: dict, is_empty: Callable[[], bool]):
        self.backend, self.model, self.is_empty = backend, model, is_empty
        self.pending: list = []  # [snapshot, its rows iterator, rows written so far, the model at its barrier]
        self.finished: list = []  # (rows, the model at the barrier)

    def apply(self, operation: tuple) -> bool:
        """Take, advance, discard or close a snapshot; False if ``operation`` is none of those."""
        kind = operation[0]
        if kind == "snapshot":
            if len(self.pending) < 2:
                snapshot = self.backend.snapshot()
                assert (snapshot is None) == self.is_empty(), f"snapshot() is None exactly without state: {self.model}"
                if snapshot is not None:
                    self.pending.append([snapshot, snapshot.serialized(), [], copy.deepcopy(self.model)])
            return True
        if kind not in ("advance", "discard", "close"):
            return False
        if operation[1] < len(self.pending):
            entry = self.pending[operation[1]]
            if kind == "advance":
                row = next(entry[1], None)
                if row is None:
                    self.pending.remove(entry)
                    self.finished.append((entry[2], entry[3]))
                else:
                    entry[2].append(row)
            else:
                entry[0].discard() if kind == "discard" else entry[1].close()
                self.pending.remove(entry)
        return True

    def written(self) -> list:
        """``(rows, the model at the barrier)`` of every snapshot not discarded, the pending ones written out."""
        return self.finished + [(written + list(rows), at_barrier) for _, rows, written, at_barrier in self.pending]


@pytest.mark.parametrize("max_parallelism", [MAX_PARALLELISM, 4], ids=["128-groups", "4-groups"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefilled=st.booleans(), operations=OPERATIONS)
def test_random_operations_match_a_dict_model_and_snapshots_match_it_at_their_barrier(
        state_backend, implementation, max_parallelism, prefilled, operations):
    backends = KeyedBackends(state_backend)
    try:
        backend = backends(max_parallelism=max_parallelism)
        run = ModelRun(backend, implementation.values_by_reference)
        model = run.model
        if prefilled:  # every key has every state: whatever a later operation touches was in the snapshot
            for index, key in enumerate(PROPERTY_KEYS):
                for operation in (("set", key, index), ("add", key, index), ("put", key, "x", index)):
                    run.apply(operation)
        snapshots = SnapshotsInFlight(backend, model, lambda: not any(model.values()))
        for operation in operations:
            if not snapshots.apply(operation):
                run.apply(operation)
        assert contents(backend) == model
        assert handle_contents(backend, PROPERTY_KEYS) == model
        for name in model:
            assert sorted(backend.keys(name), key=repr) == sorted(model[name], key=repr)
        for rows, at_barrier in snapshots.written():
            copy_ = restored(backends, rows, max_parallelism=max_parallelism)
            assert contents(copy_) == at_barrier
            assert handle_contents(copy_, PROPERTY_KEYS) == at_barrier
        assert contents(backend) == model, "writing snapshots does not change the live state"
    finally:
        backends.close()


# -- bulk value states: used only through the methods taking many keys --------------------------------------


def _append(value, accumulator):  # an AggregateFunction's add() changing its accumulator in place
    accumulator.append(value)
    return accumulator


def test_a_bulk_state_is_a_value_state_read_and_written_many_keys_at_a_time(keyed, implementation):
    backend = keyed()
    backend.declare_bulk_state(ValueStateDescriptor("panes"))
    backend.declare_bulk_state(ValueStateDescriptor("panes"))  # declaring it again changes nothing
    backend.aggregate_many("panes", ["a", "b", "a"], [1, 2, 3], _append, list)
    backend.fold_many("panes", ["b", "c"], [4, 5], lambda current, value: (current or []) + [value])
    backend.put_many("panes", ["d"], [[6]])
    assert backend.get_many("panes", ["a", "b", "c", "d", "e"]) == [[1, 3], [2, 4], [5], [6], None]
    assert contents(backend, ["panes"])["panes"] == {"a": [1, 3], "b": [2, 4], "c": [5], "d": [6]}
    assert sorted(backend.keys("panes")) == ["a", "b", "c", "d"] and "panes" in backend.state_names()
    if implementation.values_by_reference:  # the heap counts its entries; RocksDB estimates
        assert backend.state_size()[0] == 4
    handle = backend.get_state(ValueStateDescriptor("panes"))  # a handle after all: it sees every value
    backend.set_current_key("b")
    assert handle.value() == [2, 4]
    handle.update([7])
    backend.declare_bulk_state(ValueStateDescriptor("panes"))
    backend.aggregate_many("panes", ["b"], [8], _append, list)
    assert backend.get_many("panes", ["b"]) == [[7, 8]]
    backend.drop_state("panes")
    assert list(backend.entries("panes")) == [] and "panes" not in backend.state_names()
    backend.declare_bulk_state(ValueStateDescriptor("panes"))
    assert backend.get_many("panes", ["a", "b"]) == [None, None]


def test_a_snapshot_holds_a_bulk_state_as_it_was_at_the_barrier_while_its_accumulators_change_in_place(
        keyed, implementation):
    backend = keyed()
    backend.declare_bulk_state(ValueStateDescriptor("panes"))
    backend.aggregate_many("panes", KEYS, [1] * len(KEYS), _append, list)
    first = backend.snapshot()
    first_rows = first.serialized()
    written_first = [next(first_rows)]  # one key group written before the task goes on
    backend.aggregate_many("panes", KEYS, [2] * len(KEYS), _append, list)
    second = backend.snapshot()  # while the first is still being written
    backend.aggregate_many("panes", KEYS[::2], [3] * len(KEYS[::2]), _append, list)
    for rows, expected in ((written_first + list(first_rows), {k: [1] for k in KEYS}),
                           (list(second.serialized()), {k: [1, 2] for k in KEYS})):
        copy_ = restored(keyed, rows)
        copy_.declare_bulk_state(ValueStateDescriptor("panes"))
        assert contents(copy_, ["panes"])["panes"] == expected
        assert copy_.get_many("panes", KEYS) == [expected[k] for k in KEYS]
    assert contents(backend, ["panes"])["panes"] == {k: [1, 2, 3] if i % 2 == 0 else [1, 2]
                                                      for i, k in enumerate(KEYS)}


_bulk_keys = st.lists(_key, max_size=5)
BULK_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("aggregate"), _bulk_keys, _n),
    st.tuples(st.just("fold"), _bulk_keys, _n),
    st.tuples(st.just("put_many"), _bulk_keys, _n),
    st.tuples(st.just("mutate"), _bulk_keys, _n),
    st.tuples(st.just("handle"), _key, _n),
    st.tuples(st.just("drop")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("advance"), _slot),
    st.tuples(st.just("discard"), _slot),
    st.tuples(st.just("close"), _slot),
), min_size=10, max_size=60)


@pytest.mark.parametrize("max_parallelism", [MAX_PARALLELISM, 4], ids=["128-groups", "4-groups"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=BULK_OPERATIONS)
def test_random_bulk_operations_match_a_dict_model_and_snapshots_match_it_at_their_barrier(
        state_backend, implementation, max_parallelism, operations):
    """Accumulators changed in place (as an aggregate function may), values read and written back, a handle taken
    on the state and the state dropped, with up to two snapshots being written at a time."""
    backends = KeyedBackends(state_backend)
    bulk = ValueStateDescriptor("b")
    try:
        backend = backends(max_parallelism=max_parallelism)
        backend.declare_bulk_state(bulk)
        model: dict = {}
        snapshots = SnapshotsInFlight(backend, model, lambda: not model)
        for kind, *args in operations:
            if snapshots.apply((kind, *args)):
                continue
            if kind == "aggregate":
                keys, n = args
                backend.aggregate_many("b", keys, [n] * len(keys), _append, list)
                for key in keys:
                    model[key] = model.get(key, []) + [n]
            elif kind == "fold":
                keys, n = args
                backend.fold_many("b", keys, [n] * len(keys), lambda current, value: (current or []) + [value])
                for key in keys:
                    model[key] = model.get(key, []) + [n]
            elif kind == "put_many":
                keys, n = args
                backend.put_many("b", keys, [[n, key] for key in keys])
                model.update({key: [n, key] for key in keys})
            elif kind == "mutate":
                keys = list(dict.fromkeys(args[0]))
                values = backend.get_many("b", keys)
                assert values == [model.get(key) for key in keys]
                present = [(key, value) for key, value in zip(keys, values) if value is not None]
                for key, value in present:
                    value.append(args[1])
                    model[key] = model[key] + [args[1]]
                if not implementation.values_by_reference:
                    backend.put_many("b", [key for key, _ in present], [value for _, value in present])
            elif kind == "handle":  # a handle taken on the state after all, then used in bulk again
                key, n = args
                handle = backend.get_state(bulk)
                backend.set_current_key(key)
                assert handle.value() == model.get(key)
                handle.update([n])
                model[key] = [n]
                backend.declare_bulk_state(bulk)
            elif kind == "drop":
                backend.drop_state("b")
                backend.declare_bulk_state(bulk)
                model.clear()
        assert contents(backend, ["b"])["b"] == model
        assert sorted(backend.keys("b"), key=repr) == sorted(model, key=repr)
        for rows, at_barrier in snapshots.written():
            copy_ = restored(backends, rows, max_parallelism=max_parallelism)
            copy_.declare_bulk_state(bulk)
            assert contents(copy_, ["b"])["b"] == at_barrier
            assert copy_.get_many("b", PROPERTY_KEYS) == [at_barrier.get(key) for key in PROPERTY_KEYS]
    finally:
        backends.close()
