"""State as data: a job's checkpoint and savepoint read back as Arrow tables, from every backend that writes them,
equal to the state computed in plain Python."""

import collections
import os
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators import CollectSink, DiscardingSink, KeyedProcessFunction, ListStateDescriptor, SequenceSource, ValueStateDescriptor
from runtime.errors import UnknownNameError
from runtime.state_api import SavepointReader
from runtime.tools.cli import main as chandy
from state_backends import HashMapStateBackend
from state_backends.rocksdb import EmbeddedRocksDBStateBackend
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for
from tests.unit.test_state_api_reader import remembered, ttl_reference

N, KEYS = 5_000, 37


class CountAndLast(KeyedProcessFunction):
    """Each key's count (value state) and its three largest values (list state: the order records of two source
    subtasks arrive in does not change it)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.last = runtime_context.get_list_state(ListStateDescriptor("last"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.last.update(sorted(list(self.last.get()) + [value])[-3:])
        return []


def reference():
    counts, last = collections.Counter(), collections.defaultdict(list)
    for x in range(N):
        counts[x % KEYS] += 1
        last[x % KEYS] = sorted(last[x % KEYS] + [x])[-3:]
    return dict(counts), dict(last)


BACKENDS = {"heap": lambda tmp_path: HashMapStateBackend(),
            "heap-incremental": lambda tmp_path: HashMapStateBackend(enable_incremental_checkpointing=True),
            "rocksdb-incremental": lambda tmp_path: EmbeddedRocksDBStateBackend(
                True, db_storage_path=str(tmp_path / "rocksdb"))}


@pytest.mark.parametrize("parallelism", [1, 2, 4])
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_keyed_state_of_the_final_checkpoint_reads_as_the_reference(spark, env, tmp_path, backend, parallelism,
                                                                     capsys):
    """Each backend at parallelism 1, 2 and 4 (tests/conftest.py gives Spark 4 slots). The reads on the executors,
    the errors and the command line, which do not depend on the parallelism, are checked at parallelism 2 only."""
    env.set_parallelism(parallelism).enable_checkpointing(100).set_state_backend(BACKENDS[backend](tmp_path))
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.from_sequence(0, N - 1).uid("numbers").key_by(lambda x: x % KEYS).process(CountAndLast()).uid("count") \
        .sink_to(DiscardingSink()).uid("sink")
    env.execute("state-api")
    reader = SavepointReader.read(str(tmp_path / "ck" / "state-api"), "latest")
    (info,) = [op for op in reader.operators() if op.uid == "count"]
    assert (info.parallelism, info.keyed_states) == (parallelism, ("count", "last"))
    counts, last = reference()
    table = reader.keyed_state("count", "count", key_groups=True)
    assert table.column_names == ["key_group", "key", "value"]
    assert dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist())) == counts
    assert table.column("key_group").to_pylist() == sorted(table.column("key_group").to_pylist())
    frame = reader.keyed_state("count", "last").to_pandas()
    assert {key: list(values) for key, values in zip(frame["key"], frame["value"])} == last
    if parallelism != 2:
        return
    frame = reader.keyed_state_frame(spark, "count", "count")  # read on the executors, a file a partition
    assert frame.rdd.getNumPartitions() >= 2 and dict(frame.collect()) == counts
    pickled = reader.keyed_state_frame(spark, "count", "last", pickled=True).collect()
    assert {pickle.loads(k): pickle.loads(v) for k, v in pickled} == last
    with pytest.raises(UnknownNameError, match="has no keyed state 'nope': its keyed states are \\['count', 'last'\\]"):
        reader.keyed_state("count", "nope")
    with pytest.raises(UnknownNameError, match="no operator with uid 'nope'"):
        reader.keyed_state("nope", "count")
    if backend == "heap":  # the same at the command line
        job = str(tmp_path / "ck" / "state-api")
        assert chandy(["state", "show", job, "latest"]) == 0
        assert "keyed state count" in capsys.readouterr().out
        assert chandy(["state", "show", job, "latest", "--uid", "count", "--state", "count", "--key", "5"]) == 0
        assert capsys.readouterr().out.split() == ["1", "rows", "key", "value", "5", str(counts[5])]
        assert chandy(["state", "export", job, "latest", "--uid", "count", "--state", "count", "--to",
                       str(tmp_path / "counts.parquet")]) == 0
        exported = pq.read_table(tmp_path / "counts.parquet")
        assert dict(zip(exported.column("key").to_pylist(), exported.column("value").to_pylist())) == counts


def test_the_frame_of_a_state_with_a_ttl_reads_as_keyed_state_does_pickled_or_not(spark, tmp_path):
    """keyed_state_frame of value, list and map state with a time-to-live: the value without its times, and
    last_access_ms, as keyed_state reads them (a savepoint of harnessed subtasks: a state file, a partition each)."""
    reader = remembered(tmp_path)
    expected = ttl_reference()
    times_type = {"last": "bigint", "seen": "array<bigint>", "by_parity": "binary"}  # pickled: a map's times too
    for name in ("last", "seen", "by_parity"):
        frame = reader.keyed_state_frame(spark, "remember", name)
        assert frame.columns == ["key", "value", "last_access_ms"] and frame.rdd.getNumPartitions() == 2, name
        assert {k: (v, t) for k, v, t in frame.collect()} == expected[name], name
        pickled = reader.keyed_state_frame(spark, "remember", name, pickled=True)
        assert [(f.name, f.dataType.simpleString()) for f in pickled.schema.fields] == [
            ("key", "binary"), ("value", "binary"), ("last_access_ms", times_type[name])]
        times = pickle.loads if name == "by_parity" else (lambda t: t)
        assert {pickle.loads(k): (pickle.loads(v), times(t)) for k, v, t in pickled.collect()} == expected[name]
    count = reader.keyed_state_frame(spark, "remember", "count")
    assert count.columns == ["key", "value"] and dict(count.collect()) == expected["count"], "no TTL: as before"


class Box:
    """A value Arrow cannot hold: the reader gives its pickled bytes."""

    def __init__(self, n):
        self.n = n


class BoxedCount(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("boxed"))

    def process_element(self, value, ctx):
        self.count.update(Box((self.count.value() or Box(0)).n + 1))
        return []


def test_a_savepoint_with_values_arrow_cannot_hold_and_operator_state_reads_too(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    numbers = PacedSource(SequenceSource(0, N - 1), per_checkpoint=500, together=str(tmp_path / "paced"))
    env.from_source(numbers, "numbers").uid("numbers").key_by(lambda x: x % KEYS).process(BoxedCount()) \
        .uid("boxed").sink_to(DiscardingSink()).uid("sink")
    client = env.execute_async("state-api-savepoint")
    wait_for(lambda: len(client._run.coordinator.completed_checkpoints()) >= 2, what="two checkpoints")
    savepoint = client.stop_with_savepoint(str(tmp_path / "savepoints"))
    client.get_job_execution_result()
    reader = SavepointReader.read(savepoint)
    by_uid = {op.uid: op for op in reader.operators()}
    assert by_uid["boxed"].keyed_states == ("boxed",) and by_uid["numbers"].operator_states
    splits = reader.operator_state("numbers", by_uid["numbers"].operator_states[0])
    assert splits.num_rows == 2, "one split state per source subtask"
    table = reader.keyed_state("boxed", "boxed")
    assert table.column_names == ["key", "value_pickled"]
    counts = {key: pickle.loads(value).n for key, value in zip(table.column("key").to_pylist(),
                                                                table.column("value_pickled").to_pylist())}
    read = sum(counts.values())
    assert 0 < read < N and set(counts) <= set(range(KEYS)), "the savepoint is of a job that was still reading"


def test_a_job_starts_from_state_bootstrapped_from_a_table_and_goes_on_counting(env, tmp_path):
    from runtime.state_api import SavepointWriter
    from tests.integration.jobs import CountPerKey

    earlier = {k: 1000 * k for k in range(KEYS)}  # counts of a system the job takes over from
    savepoint = (SavepointWriter.new_savepoint(128)
                 .with_keyed_state("count", "count", pa.table({"key": list(earlier), "value": list(earlier.values())}))
                 .write(str(tmp_path / "bootstrap")))
    env.set_parallelism(2).enable_checkpointing(100).set_state_backend(
        EmbeddedRocksDBStateBackend(True, db_storage_path=str(tmp_path / "rocksdb")))
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = CollectSink("counts")
    env.from_sequence(0, N - 1).uid("numbers").key_by(lambda x: x % KEYS).process(CountPerKey()).uid("count") \
        .sink_to(sink).uid("sink")
    result = env.execute("bootstrapped", restore_from=savepoint)
    final = {}
    for key, count in result.collected(sink):
        final[key] = max(final.get(key, 0), count)
    added = collections.Counter(x % KEYS for x in range(N))
    assert final == {k: earlier[k] + added[k] for k in range(KEYS)}


def test_the_committed_format_1_savepoint_restores_and_its_job_ends_exact(env, tmp_path):
    """tests/data/savepoints/format-1 was written by this job (docs/savepoint-format.md): restored, it reads the rest
    of its input, and every key's count ends as if it had never stopped. Any later Chandy must restore it."""
    import shutil

    from tests.integration.jobs import CountPerKey

    savepoint = shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "savepoints",
                                             "format-1"), tmp_path / "format-1")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = CollectSink("counts")
    env.from_source(SequenceSource(0, 9999), "numbers").uid("numbers").map(lambda x: x % 37).uid("key") \
        .key_by(lambda k: k).process(CountPerKey()).uid("count").sink_to(sink).uid("sink")
    result = env.execute("format-1", restore_from=str(savepoint))
    final = {}
    for key, count in result.collected(sink):
        final[key] = max(final.get(key, 0), count)
    assert sum(1 for _ in result.collected(sink)) == 4000, "only the records after the savepoint"
    assert final == dict(collections.Counter(x % 37 for x in range(10_000)))



def _entries(reader, uid, name):
    """``{key: entry}`` of the keyed state ``name`` of operator ``uid``, as ``reader`` reads it."""
    table = reader.keyed_state(uid, name)
    return dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))


@pytest.mark.parametrize("parallelism", [2, 4])
def test_state_the_writer_wrote_for_3_subtasks_restores_on_2_and_4_as_given_plus_the_new_input(env, tmp_path,
                                                                                              parallelism):
    """Keys 0..4 are new to the job, keys 37..46 get no new record: their entries only go through the restore."""
    from runtime.state_api import SavepointWriter

    given_counts = {k: 100 * k + 1 for k in range(5, KEYS + 10)}
    given_last = {k: [k, k + 5 * KEYS] for k in range(5, KEYS + 10)}
    savepoint = (SavepointWriter.new_savepoint(128)
                 .with_keyed_state("count", "count", pa.table({"key": list(given_counts),
                                                               "value": list(given_counts.values())}), parallelism=3)
                 .with_keyed_state("count", "last", given_last)
                 .write(str(tmp_path / "written")))
    written = SavepointReader.read(savepoint)
    assert [(op.uid, op.parallelism) for op in written.operators()] == [("count", 3)]
    assert (_entries(written, "count", "count"), _entries(written, "count", "last")) == (given_counts, given_last)

    new = range(2 * KEYS, 5 * KEYS)  # three records a key, between the two given last values
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.from_sequence(new.start, new.stop - 1).uid("numbers").key_by(lambda x: x % KEYS).process(CountAndLast()) \
        .uid("count").sink_to(DiscardingSink()).uid("sink")
    env.execute("restored", restore_from=savepoint)

    counts, last = collections.Counter(given_counts), {k: list(v) for k, v in given_last.items()}
    for x in new:
        counts[x % KEYS] += 1
        last[x % KEYS] = sorted(last.get(x % KEYS, []) + [x])[-3:]
    final = SavepointReader.read(str(tmp_path / "ck" / "restored"), "latest")
    (info,) = [op for op in final.operators() if op.uid == "count"]
    assert info.parallelism == parallelism
    assert _entries(final, "count", "count") == dict(counts)
    assert _entries(final, "count", "last") == last


def test_a_job_bootstrapped_with_the_counts_of_the_history_ends_as_the_job_that_read_the_history(spark, tmp_path):
    """Job H reads the history and then the new records; job B starts from a savepoint the writer made of the
    history's counts (a table computed in plain Python) and reads the new records only. Keys 0..4 come in the new
    records only, keys 30..36 in the history only."""
    from runtime import StreamExecutionEnvironment
    from runtime.state_api import SavepointWriter
    from tests.integration.jobs import CountPerKey, assert_counts_continue, final_counts

    history = [x for x in range(3000) if x % KEYS >= 5]
    new = [x for x in range(3000, 5000) if x % KEYS < 30]

    def run(name, records, restore_from=None):
        env = StreamExecutionEnvironment.get_execution_environment(spark)
        env.set_parallelism(2).enable_checkpointing(100)
        env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
        sink = CollectSink("counts")
        env.from_collection(records).uid("records").key_by(lambda x: x % KEYS).process(CountPerKey()).uid("count") \
            .sink_to(sink).uid("sink")
        pairs = env.execute(name, restore_from=restore_from).collected(sink)
        return pairs, _entries(SavepointReader.read(str(tmp_path / "ck" / name), "latest"), "count", "count")

    expected = dict(collections.Counter(x % KEYS for x in history + new))
    h_pairs, h_state = run("history-and-new", history + new)
    assert final_counts(h_pairs) == h_state == expected

    historical = collections.Counter(x % KEYS for x in history)
    table = pa.table({"key": list(historical), "value": list(historical.values())})
    savepoint = SavepointWriter.new_savepoint(128).with_keyed_state("count", "count", table).write(
        str(tmp_path / "bootstrap"))
    b_pairs, b_state = run("bootstrapped", new, restore_from=savepoint)
    assert len(b_pairs) == len(new), "the new records only, each counted once"
    assert_counts_continue(b_pairs, {k: expected[k] for k in {x % KEYS for x in new}})
    assert b_state == h_state
