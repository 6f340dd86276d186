"""State time-to-live on a fake clock, on both backends (heap and RocksDB): expiry per state kind and per entry,
update types, visibility, cleanup, and what snapshots and restores keep. Tests marked ``heap_only`` look at
the heap's incremental cleanup, a strategy of its own (RocksDB drops expired entries when they are read and
leaves them out of full snapshots)."""

from __future__ import annotations

import dataclasses
import pickle
import tempfile

import cloudpickle
import pytest

from runtime.common.time import Duration, Time
from runtime.errors import ApiUsageError, ConfigurationError, StateUsageError
from runtime.keys.key_groups import key_group_range
from state_backends import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from state_backends.descriptors import refuse_ttl
from state_backends.heap.states import HeapValueState
from state_backends.rocksdb import RocksDBKeyedStateBackend
from tests.integration.window_jobs import Sum

MAX_P = 128
TTL_MS = 10_000


class Clock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


_backends = {"kind": "hashmap", "made": [], "directory": None}


def pytest_generate_tests(metafunc):
    if "backend_kind" in metafunc.fixturenames:
        heap_only = metafunc.definition.get_closest_marker("heap_only") is not None
        metafunc.parametrize("backend_kind", ["hashmap"] if heap_only else ["hashmap", "rocksdb"], indirect=True)


@pytest.fixture(autouse=True)
def backend_kind(request, tmp_path):
    _backends.update(kind=request.param, directory=tmp_path)
    yield request.param
    for backend in _backends["made"]:
        backend.close()
    _backends["made"].clear()


def make_backend(clock: Clock):
    if _backends["kind"] == "rocksdb":
        backend = RocksDBKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0),
                                           tempfile.mkdtemp(dir=_backends["directory"]), clock=clock)
        _backends["made"].append(backend)
        return backend
    return HeapKeyedStateBackend(MAX_P, key_group_range(MAX_P, 1, 0), clock=clock)


def ttl_config(builder_steps=lambda builder: builder, ttl=Time.seconds(10)) -> StateTtlConfig:
    return builder_steps(StateTtlConfig.new_builder(ttl)).build()


def with_ttl(descriptor, config=None):
    descriptor.enable_time_to_live(config or ttl_config())
    return descriptor



# Each kind: a descriptor factory, how to write one value for the current key, and what a read shows.
KINDS = {
    "value": (lambda name: ValueStateDescriptor(name), lambda s, v: s.update(v), lambda s: s.value()),
    "list": (lambda name: ListStateDescriptor(name), lambda s, v: s.add(v), lambda s: list(s.get()) or None),
    "map": (lambda name: MapStateDescriptor(name), lambda s, v: s.put("k", v), lambda s: s.get("k")),
    "reducing": (lambda name: ReducingStateDescriptor(name, lambda a, b: a + b), lambda s, v: s.add(v),
                 lambda s: s.get()),
    "aggregating": (lambda name: AggregatingStateDescriptor(name, Sum()), lambda s, v: s.add(v), lambda s: s.get()),
}
EXPECTED_AFTER_ONE_WRITE = {"value": 7, "list": [7], "map": 7, "reducing": 7, "aggregating": 7}


def declared(kind: str, clock: Clock, config=None, backend=None):
    make, write, read = KINDS[kind]
    backend = backend or make_backend(clock)
    state = backend.get_state(with_ttl(make("s"), config))
    return backend, state, (lambda value: write(state, value)), (lambda: read(state))


# -- the configuration ---------------------------------------------------------------------------------


def test_builder_defaults_are_flinks():
    config = StateTtlConfig.new_builder(Time.seconds(10)).build()
    assert config.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert config.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert config.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert config.get_ttl() == Time.seconds(10) and config.is_enabled()
    strategies = config.get_cleanup_strategies()
    assert strategies.is_cleanup_in_background() and not strategies.in_full_snapshot()
    assert strategies.get_incremental_cleanup_strategy().get_cleanup_size() == 5
    assert strategies.get_rocksdb_compact_filter_cleanup_strategy().get_query_time_after_num_entries() == 1000


def test_builder_setters_and_getters():
    config = (StateTtlConfig.new_builder(Time.seconds(1)).set_ttl(Time.minutes(2))
              .update_ttl_on_read_and_write().return_expired_if_not_cleaned_up()
              .set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)
              .cleanup_full_snapshot().cleanup_incrementally(20, True)
              .cleanup_in_rocksdb_compact_filter(500, Duration.of_days(1)).disable_cleanup_in_background().build())
    assert config.get_ttl() == Time.minutes(2)
    assert config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    assert config.get_state_visibility() is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
    strategies = config.get_cleanup_strategies()
    assert strategies.in_full_snapshot() and not strategies.is_cleanup_in_background()
    incremental = strategies.get_incremental_cleanup_strategy()
    assert (incremental.get_cleanup_size(), incremental.run_cleanup_for_every_record()) == (20, True)
    rocksdb = strategies.get_rocksdb_compact_filter_cleanup_strategy()
    assert rocksdb.get_query_time_after_num_entries() == 500
    assert rocksdb.get_periodic_compaction_time() == Duration.of_days(1)
    never = (StateTtlConfig.new_builder(Time.seconds(1)).return_expired_if_not_cleaned_up().never_return_expired()
             .update_ttl_on_read_and_write().update_ttl_on_create_and_write().use_processing_time().build())
    assert never == StateTtlConfig.new_builder(Time.seconds(1)).build()
    assert StateTtlConfig.new_builder(Time.seconds(1)).disable_cleanup_in_background().build() \
        .get_cleanup_strategies().get_incremental_cleanup_strategy() is None


@pytest.mark.parametrize("build, error", [
    (lambda: StateTtlConfig.new_builder(Time.seconds(0)).build(), ConfigurationError),
    (lambda: StateTtlConfig.new_builder(Time.milliseconds(-5)).build(), ConfigurationError),
    (lambda: StateTtlConfig.new_builder(10).build(), ApiUsageError),
    (lambda: StateTtlConfig.new_builder(Time.seconds(1)).set_update_type("OnReadAndWrite"), ApiUsageError),
    (lambda: StateTtlConfig.new_builder(Time.seconds(1)).set_state_visibility(1), ApiUsageError),
    (lambda: StateTtlConfig.new_builder(Time.seconds(1)).set_ttl_time_characteristic("EventTime"), ApiUsageError),
    (lambda: StateTtlConfig.new_builder(Time.seconds(1)).cleanup_incrementally(-1, False), ConfigurationError),
])
def test_bad_configurations_fail_when_built_with_the_fix(build, error):
    with pytest.raises(error) as raised:
        build()
    assert "StateTtlConfig" in str(raised.value) or "cleanup_incrementally" in str(raised.value)


def test_ttl_accepts_a_duration_too():
    assert ttl_config(ttl=Duration.of_millis(1500)).get_ttl().to_milliseconds() == 1500


def test_descriptors_with_ttl_stay_frozen_and_pickle():
    descriptor = with_ttl(ValueStateDescriptor("v"), ttl_config(lambda b: b.update_ttl_on_read_and_write()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        descriptor.name = "w"
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        copy = loads(dumps(descriptor))
        assert copy.has_ttl and copy.ttl_config == descriptor.ttl_config
        assert copy.ttl_config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    reducing = with_ttl(ReducingStateDescriptor("r", max))
    assert reducing.has_ttl and reducing.get_reduce_function() is max and reducing.get_name() == "r"
    assert not ReducingStateDescriptor("r", max).has_ttl


def test_enable_time_to_live_wants_a_config():
    with pytest.raises(ApiUsageError, match="StateTtlConfig.new_builder"):
        ValueStateDescriptor("v").enable_time_to_live(Time.seconds(10))


@pytest.mark.heap_only
def test_a_disabled_update_type_means_no_ttl():
    descriptor = with_ttl(ValueStateDescriptor("v"),
                          ttl_config(lambda b: b.set_update_type(StateTtlConfig.UpdateType.Disabled)))
    assert not descriptor.has_ttl
    assert type(make_backend(Clock()).get_state(descriptor)) is HeapValueState


def test_operator_state_refuses_a_ttl_naming_the_fix():
    refuse_ttl(ListStateDescriptor("offsets"), "operator list state")  # no TTL: fine
    with pytest.raises(StateUsageError, match=r"Remove enable_time_to_live\(...\)"):
        refuse_ttl(with_ttl(ListStateDescriptor("offsets")), "operator list state")


# -- expiry, per kind ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_visible_before_expiry_and_gone_after(kind):
    clock = Clock()
    backend, _, write, read = declared(kind, clock)
    backend.set_current_key("a")
    write(7)
    clock.now = TTL_MS - 1
    assert read() == EXPECTED_AFTER_ONE_WRITE[kind]
    clock.now = TTL_MS  # last access + ttl <= now: expired
    assert read() is None
    assert list(backend.keys("s")) == []


@pytest.mark.parametrize("kind, expected_at_15s", [
    ("value", 7), ("map", 7), ("reducing", 14), ("aggregating", 14), ("list", [7]),  # list: the later element
])
def test_a_write_restarts_the_life(kind, expected_at_15s):
    clock = Clock()
    backend, _, write, read = declared(kind, clock)
    backend.set_current_key("a")
    write(7)
    clock.now = 6_000
    write(7)
    clock.now = 15_000
    assert read() == expected_at_15s
    clock.now = 16_000
    assert read() is None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_reads_refresh_only_with_on_read_and_write(kind):
    for update_on_read, expected_at_12s in ((False, None), (True, EXPECTED_AFTER_ONE_WRITE[kind])):
        clock = Clock()
        config = ttl_config(lambda b: b.update_ttl_on_read_and_write() if update_on_read else b)
        backend, _, write, read = declared(kind, clock, config)
        backend.set_current_key("a")
        write(7)
        clock.now = 6_000
        assert read() == EXPECTED_AFTER_ONE_WRITE[kind]
        clock.now = 12_000
        assert read() == expected_at_12s, f"update on read: {update_on_read}"
        if update_on_read:
            clock.now = 22_000  # 10 s after the last read
            assert read() is None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_return_expired_if_not_cleaned_up_returns_it_until_cleanup(kind):
    clock = Clock()
    config = ttl_config(lambda b: b.return_expired_if_not_cleaned_up().disable_cleanup_in_background())
    backend, _, write, read = declared(kind, clock, config)
    backend.set_current_key("a")
    write(7)
    clock.now = 30_000
    assert read() == EXPECTED_AFTER_ONE_WRITE[kind]  # expired, not cleaned up yet: returned, and cleaned up
    assert read() is None


@pytest.mark.heap_only
def test_return_expired_stops_once_incremental_cleanup_removed_it():
    clock = Clock()
    config = ttl_config(lambda b: b.return_expired_if_not_cleaned_up().cleanup_incrementally(100, False))
    backend, state, _, _ = declared("value", clock, config)
    backend.set_current_key("a")
    state.update(1)
    clock.now = 30_000
    backend.set_current_key("b")
    state.update(2)  # an access to the state: the cleanup step walks the other keys
    backend.set_current_key("a")
    assert state.value() is None


@pytest.mark.heap_only
def test_never_return_expired_hides_an_expired_value_that_is_still_stored():
    clock = Clock()
    backend, state, _, _ = declared("value", clock, ttl_config(lambda b: b.disable_cleanup_in_background()))
    backend.set_current_key("a")
    state.update(1)
    clock.now = TTL_MS
    assert sum(len(table) for table in backend.state_tables("s").values()) == 1
    assert state.value() is None


def test_list_elements_expire_individually():
    clock = Clock()
    backend, state, _, _ = declared("list", clock)
    backend.set_current_key("a")
    state.add("t0")
    clock.now = 4_000
    state.add_all(["t4a", "t4b"])
    clock.now = 8_000
    state.add("t8")
    assert state.get() == ["t0", "t4a", "t4b", "t8"]
    clock.now = 10_000
    assert state.get() == ["t4a", "t4b", "t8"]
    clock.now = 14_000
    assert state.get() == ["t8"]
    state.update(["fresh"])
    clock.now = 23_999
    assert state.get() == ["fresh"]
    clock.now = 24_000
    assert state.get() == []


def test_map_entries_expire_individually():
    clock = Clock()
    backend, state, _, _ = declared("map", clock)
    backend.set_current_key("a")
    state.put("old", 1)
    clock.now = 5_000
    state.put_all({"new": 2, "newer": 3})
    clock.now = 10_000
    assert (state.get("old"), state.get("new"), state.contains("old"), state.contains("new")) == (None, 2, False, True)
    assert sorted(state.items()) == [("new", 2), ("newer", 3)]
    assert sorted(state.keys()) == ["new", "newer"] and sorted(state.values()) == [2, 3]
    assert not state.is_empty()
    clock.now = 15_000
    assert state.is_empty() and list(state.items()) == []


def test_reducing_and_aggregating_never_fold_into_an_expired_value():
    clock = Clock()
    for kind in ("reducing", "aggregating"):
        config = ttl_config(lambda b: b.return_expired_if_not_cleaned_up())
        backend, state, _, _ = declared(kind, clock, config)
        clock.now = 0
        backend.set_current_key("a")
        state.add(5)
        clock.now = 20_000
        state.add(1)
        assert state.get() == 1, kind


@pytest.mark.heap_only
def test_state_without_ttl_is_untouched_beside_state_with_it():
    clock = Clock()
    backend = make_backend(clock)
    plain = backend.get_state(ValueStateDescriptor("plain"))
    timed = backend.get_state(with_ttl(ValueStateDescriptor("timed")))
    assert type(plain) is HeapValueState
    backend.set_current_key("a")
    plain.update(1)
    timed.update(1)
    clock.now = 10 ** 9
    assert (plain.value(), timed.value()) == (1, None)
    snapshot = backend.snapshot()
    payloads = [pickle.loads(payload) for _, payload in snapshot.serialized()]
    assert payloads == [{"plain": {"a": 1}}]  # state without TTL keeps its format; expired entries are not written


# -- many keys at once, iteration ------------------------------------------------------------------------


def test_bulk_access_respects_expiry():
    clock = Clock()
    backend, state, _, _ = declared("value", clock)
    backend.put_many("s", ["a", "b"], [1, 2])
    clock.now = 6_000
    backend.fold_many("s", ["b", "c", "c"], [10, 5, 5], lambda old, new: (old or 0) + new)
    assert backend.get_many("s", ["a", "b", "c", "d"]) == [1, 12, 10, None]
    assert sorted(backend.keys("s")) == ["a", "b", "c"]
    clock.now = 10_000  # a expired; b and c written at 6 s
    assert backend.get_many("s", ["a", "b", "c"]) == [None, 12, 10]
    assert sorted((key, value) for _, key, value in backend.entries("s")) == [("b", 12), ("c", 10)]
    clock.now = 12_000
    backend.fold_many("s", ["a"], [1], lambda old, new: (old or 100) + new)  # a expired: folds into None
    assert backend.get_many("s", ["a"]) == [101]
    clock.now = 16_000
    assert sorted(backend.keys("s")) == ["a"]
    backend.aggregate_many("s", ["a", "e"], [1, 1], lambda value, total: total + value, lambda: 1_000)
    assert backend.get_many("s", ["a", "e"]) == [102, 1_001]
    clock.now = 27_000  # both written at 16 s: expired, so an add starts from a new accumulator
    backend.aggregate_many("s", ["a"], [1], lambda value, total: total + value, lambda: 1_000)
    assert backend.get_many("s", ["a", "e"]) == [1_001, None]


def old_and_new_elements():
    """A list and a map state of key "a", each with an element written at 0 s and one at 5 s (ttl 10 s); the
    clock at 12 s: the old elements expired, the new ones live."""
    clock = Clock()
    backend = make_backend(clock)
    seen = backend.get_state(with_ttl(ListStateDescriptor("seen")))
    visits = backend.get_state(with_ttl(MapStateDescriptor("visits")))
    backend.set_current_key("a")
    seen.add("old")
    visits.put("old", 1)
    clock.now = 5_000
    seen.add("new")
    visits.put("new", 2)
    clock.now = 12_000
    return clock, backend


def test_entries_of_list_and_map_state_show_live_parts_without_timestamps():
    clock, backend = old_and_new_elements()
    assert [(key, value) for _, key, value in backend.entries("seen")] == [("a", ["new"])]
    assert [(key, value) for _, key, value in backend.entries("visits")] == [("a", {"new": 2})]


def test_bulk_writes_of_list_or_map_state_with_ttl_are_refused_naming_the_fix():
    backend = make_backend(Clock())
    backend.get_state(with_ttl(ListStateDescriptor("seen")))
    for call in (lambda: backend.get_many("seen", ["a"]), lambda: backend.put_many("seen", ["a"], [[1]]),
                 lambda: backend.fold_many("seen", ["a"], [1], max)):
        with pytest.raises(StateUsageError, match="use its state handle"):
            call()


def test_redeclaring_a_state_with_another_ttl_is_refused():
    backend = make_backend(Clock())
    config = ttl_config()
    state = backend.get_state(with_ttl(ValueStateDescriptor("v"), config))
    assert backend.get_state(with_ttl(ValueStateDescriptor("v"), ttl_config())) is state  # an equal config
    with pytest.raises(StateUsageError, match="without a time-to-live"):
        backend.get_state(ValueStateDescriptor("v"))
    with pytest.raises(StateUsageError, match="StateTtlConfig"):
        backend.get_state(with_ttl(ValueStateDescriptor("v"), ttl_config(ttl=Time.seconds(5))))
    backend.get_state(ValueStateDescriptor("plain"))
    with pytest.raises(StateUsageError, match="without a time-to-live"):
        backend.get_state(with_ttl(ValueStateDescriptor("plain")))


# -- incremental cleanup ---------------------------------------------------------------------------------


def stored_entries(backend, name: str) -> int:
    """Entries stored, expired or not (what a read would not show)."""
    if isinstance(backend, RocksDBKeyedStateBackend):
        return sum(1 for _ in backend._column(name).family.keys())
    return sum(len(table) for table in backend.state_tables(name).values())


def has_ttl(state) -> bool:
    """Whether a state handle keeps last-access times (state without a TTL pays nothing for them)."""
    if isinstance(state, HeapValueState.__mro__[1]):  # the heap's handles: TTL ones are classes of their own
        return type(state).__name__.startswith("Ttl")
    return state.config is not None


@pytest.mark.heap_only
@pytest.mark.parametrize("steps, cleaned", [
    (lambda b: b, True),  # Flink's default: 5 entries per access, in the background
    (lambda b: b.cleanup_incrementally(3, False), True),
    (lambda b: b.disable_cleanup_in_background(), False),
])
def test_incremental_cleanup_frees_keys_never_read_again(steps, cleaned):
    clock = Clock()
    backend, state, _, _ = declared("value", clock, ttl_config(steps))
    for key in range(50):
        backend.set_current_key(key)
        state.update(key)
    clock.now = 20_000
    backend.set_current_key("other")
    for _ in range(60):
        state.update(1)
    assert stored_entries(backend, "s") == (1 if cleaned else 51)


@pytest.mark.heap_only
def test_incremental_cleanup_removes_expired_list_elements_of_other_keys():
    clock = Clock()
    backend, state, _, _ = declared("list", clock, ttl_config(lambda b: b.cleanup_incrementally(10, False)))
    backend.set_current_key("a")
    state.add("old")
    clock.now = 5_000
    state.add("new")
    clock.now = 12_000
    backend.set_current_key("b")
    for _ in range(5):
        state.add("x")
    table = backend.state_tables("s")[backend.key_group_of("a")]
    assert [element for element, _ in table["a"]] == ["new"]


# -- snapshots and restores ------------------------------------------------------------------------------


def restored_from(snapshot, clock: Clock) -> HeapKeyedStateBackend:
    backend = make_backend(clock)
    for group, payload in snapshot.serialized():
        backend.restore_key_group(group, payload)
    return backend


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_snapshot_after_expiry_does_not_contain_the_expired_entry(kind):
    clock = Clock()
    make, write, read = KINDS[kind]
    config = ttl_config(lambda b: b.disable_cleanup_in_background())  # expired entries stay stored until written
    backend, _, write, _ = declared(kind, clock, config)
    backend.set_current_key("early")
    write(1)
    clock.now = 6_000
    backend.set_current_key("late")
    write(2)
    clock.now = 12_000
    assert stored_entries(backend, "s") == 2
    snapshot = backend.snapshot()
    restored = restored_from(snapshot, Clock(0))  # a clock back at 0: what is missing was never written
    assert stored_entries(restored, "s") == 1
    restored.get_state(with_ttl(make("s"), config))
    assert [key for _, key, _ in restored.entries("s")] == ["late"]


def test_list_and_map_snapshots_keep_only_live_elements():
    clock, backend = old_and_new_elements()
    restored = restored_from(backend.snapshot(), clock)
    seen = restored.get_state(with_ttl(ListStateDescriptor("seen")))
    visits = restored.get_state(with_ttl(MapStateDescriptor("visits")))
    restored.set_current_key("a")
    assert (seen.get(), dict(visits.items())) == (["new"], {"new": 2})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_restore_keeps_the_last_access_times(kind):
    clock = Clock()
    make, _, read_state = KINDS[kind]
    backend, _, write, _ = declared(kind, clock)
    backend.set_current_key("a")
    write(7)  # at t=0, ttl 10 s
    clock.now = 1_000
    snapshot = backend.snapshot()
    later = Clock(5_000)
    restored = restored_from(snapshot, later)
    state = restored.get_state(with_ttl(make("s")))
    restored.set_current_key("a")
    assert read_state(state) == EXPECTED_AFTER_ONE_WRITE[kind]
    later.now = 9_999
    assert read_state(state) == EXPECTED_AFTER_ONE_WRITE[kind]
    later.now = 10_000  # expires at 10 s, as written: not 15 s (restore time + ttl)
    assert read_state(state) is None


def test_snapshots_stay_copy_on_write_and_judge_expiry_at_the_barrier():
    clock = Clock()
    backend, state, _, _ = declared("value", clock, ttl_config(lambda b: b.cleanup_incrementally(100, False)))
    for key in range(20):
        backend.set_current_key(key)
        state.update([key])
    clock.now = 5_000
    snapshot = backend.snapshot()  # the barrier: every entry live
    clock.now = 20_000  # all expired now
    backend.set_current_key(0)
    assert state.value() is None  # the read removes key 0, and the cleanup step walks the others
    backend.set_current_key("new")
    state.update(["new"])
    rows = list(snapshot.serialized())
    restored = restored_from_rows(rows, Clock(5_000))
    restored_state = restored.get_state(with_ttl(ValueStateDescriptor("s")))
    assert sorted(key for _, key, _ in restored.entries("s")) == list(range(20))
    restored.set_current_key(3)
    assert restored_state.value() == [3]


def restored_from_rows(rows, clock: Clock) -> HeapKeyedStateBackend:
    backend = make_backend(clock)
    for group, payload in rows:
        backend.restore_key_group(group, payload)
    return backend


def test_restored_state_not_declared_yet_is_written_again_with_its_times():
    clock = Clock()
    backend, state, _, _ = declared("value", clock)
    backend.set_current_key("a")
    state.update(1)
    middle = restored_from(backend.snapshot(), Clock(2_000))  # the function has not declared the state yet
    with pytest.raises(StateUsageError, match="declare it with"):
        list(middle.entries("s"))
    later = Clock(9_000)
    last = restored_from(middle.snapshot(), later)
    restored_state = last.get_state(with_ttl(ValueStateDescriptor("s")))
    last.set_current_key("a")
    assert restored_state.value() == 1
    later.now = 10_000
    assert restored_state.value() is None


def test_state_can_gain_or_lose_its_ttl_across_a_restore():
    clock = Clock()
    plain_backend = make_backend(clock)
    plain = plain_backend.get_state(MapStateDescriptor("m"))
    plain_backend.set_current_key("a")
    plain.put("x", 1)
    later = Clock(50_000)
    gained = restored_from(plain_backend.snapshot(), later)
    timed = gained.get_state(with_ttl(MapStateDescriptor("m")))
    gained.set_current_key("a")
    assert timed.get("x") == 1  # its life starts at the declaration after the restore
    later.now = 60_000
    assert timed.get("x") is None

    timed_backend, timed, _, _ = declared("list", clock)
    timed_backend.set_current_key("a")
    timed.add_all([1, 2])
    lost = restored_from(timed_backend.snapshot(), Clock(10 ** 9))
    untimed = lost.get_state(ListStateDescriptor("s"))
    lost.set_current_key("a")
    assert untimed.get() == [1, 2] and not has_ttl(untimed)


def test_restoring_into_a_state_already_declared_converts_the_entries():
    clock = Clock()
    backend, state, _, _ = declared("value", clock)
    backend.set_current_key("a")
    state.update(1)
    snapshot_rows = list(backend.snapshot().serialized())
    target = make_backend(clock)
    plain = target.get_state(ValueStateDescriptor("s"))
    for group, payload in snapshot_rows:
        target.restore_key_group(group, payload)
    target.set_current_key("a")
    assert plain.value() == 1


def test_drop_state_forgets_the_ttl():
    backend, state, _, _ = declared("value", Clock())
    backend.set_current_key("a")
    state.update(1)
    backend.drop_state("s")
    plain = backend.get_state(ValueStateDescriptor("s"))
    assert not has_ttl(plain) and plain.value() is None
