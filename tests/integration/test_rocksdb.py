"""Keyed state in RocksDB on Spark: exactly once after an exception and a SIGKILL (keyed counts, and windows
with their timers), state carried between the heap and RocksDB backends and between parallelisms, incremental
checkpoints whose retention never deletes a file a retained checkpoint needs, a missing file, and the Spark
conf choosing the backend without editing the job."""

import collections
import random

import pytest

from operators import CollectSink, KeyedProcessFunction, SequenceSource
from runtime import RestartStrategies, StreamExecutionEnvironment, Types
from runtime.datastream.state_backend import ROCKSDB_LOCAL_DIR_CONF, STATE_BACKEND_CONF
from runtime.errors import CorruptCheckpointError
from state_backends import HashMapStateBackend, MapStateDescriptor
from state_backends.rocksdb import EmbeddedRocksDBStateBackend
from state_backends.storage import CheckpointStorage
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.jobs import CountPerKey, assert_counts_continue
from tests.integration.paced import FileExists, PacedSource
from tests.integration.test_exactly_once import KEYS, N, build, expected_running_counts
from tests.integration.test_windows import check_exact, checkpointed_windows_job
from tests.integration.waiting import wait_for


def rocksdb(tmp_path, incremental=False) -> EmbeddedRocksDBStateBackend:
    return EmbeddedRocksDBStateBackend(incremental, db_storage_path=str(tmp_path / "rocksdb"))


BACKENDS = {"heap": lambda tmp_path: HashMapStateBackend(), "rocksdb": rocksdb,
            "incremental": lambda tmp_path: rocksdb(tmp_path, incremental=True),
            "heap-incremental": lambda tmp_path: HashMapStateBackend(enable_incremental_checkpointing=True)}


@pytest.mark.parametrize("how, backend", [("exception", "rocksdb"), ("kill", "rocksdb"), ("kill", "incremental"),
                                          ("kill", "heap-incremental")])
def test_keyed_counts_are_exactly_once_after_a_failure(env, tmp_path, how, backend):
    env.set_state_backend(BACKENDS[backend](tmp_path))
    sink = build(env, tmp_path, 2, how, random.randrange(1 << 30))
    result = env.execute(f"rocksdb-exactly-once-{how}")
    assert result.restarts == 1 and result.restored_from[1] is not None
    assert sorted(result.collected(sink)) == expected_running_counts(N, KEYS)


# Windows on RocksDB cost more per record than on the heap (each session record reads and writes its key's
# merging-window set, unpickled and pickled, as in Flink): smaller inputs keep these tests short.
WINDOW_RECORDS = 8_000


def test_windows_and_their_timers_on_rocksdb_are_exactly_once_after_a_kill(env, tmp_path):
    n = WINDOW_RECORDS
    faults = plan(str(tmp_path / "faults"), "fail")
    env.set_state_backend(rocksdb(tmp_path, incremental=True))
    after = random.Random().randrange(n // 10, n // 3)
    tumbling, sessions = checkpointed_windows_job(env, tmp_path, 2, n, ChaosMap(faults, "fail", "kill", after))
    result = env.execute("rocksdb-windows-kill")
    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from[1] is not None
    check_exact(result, tumbling, sessions, n)



@pytest.mark.parametrize("first, first_parallelism, then, parallelism", [
    ("heap", 3, "incremental", 1),  # heap checkpoints into RocksDB (at p > 1 its session windows are slow here)
    ("rocksdb", 2, "heap", 1),  # RocksDB's full snapshots into the heap
    ("incremental", 2, "heap", 1),  # RocksDB's files into the heap
    ("incremental", 2, "incremental", 3),  # rescaled up and down from incremental checkpoints
    ("incremental", 3, "incremental", 1),
    ("heap-incremental", 2, "heap-incremental", 3),  # heap rows files, rescaled
    ("heap-incremental", 3, "incremental", 1),  # heap rows files into RocksDB
])
def test_window_state_moves_between_backends_and_parallelisms(spark, tmp_path, first, first_parallelism, then,
                                                              parallelism):
    n = WINDOW_RECORDS
    url = str(tmp_path / "ck")
    job = StreamExecutionEnvironment.get_execution_environment(spark)
    job.set_state_backend(BACKENDS[first](tmp_path))
    checkpointed_windows_job(job, tmp_path, first_parallelism, n, url=url)
    client = job.execute_async("backend-change")
    storage = CheckpointStorage("file://" + url, "backend-change")
    wait_for(lambda: len(storage.usable_ids()) >= 2, what="two completed checkpoints")
    client.cancel()
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    env.set_state_backend(BACKENDS[then](tmp_path / "then"))
    tumbling, sessions = checkpointed_windows_job(env, tmp_path / "then", parallelism, n, url=url, paced=False)
    result = env.execute("backend-change", restore_from=storage.usable_ids()[-1])
    assert result.restored_from[0] is not None
    check_exact(result, tumbling, sessions, n)


class CountAndRemember(CountPerKey):
    """A running count per key, and every value seen in map state: the count stays in the backend's write-back
    cache (101 keys), so checkpoints would store it in files of their own; map entries are written to RocksDB
    at once, so its files grow and checkpoints share them."""

    def open(self, runtime_context):
        super().open(runtime_context)
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen", Types.INT(), Types.BOOLEAN()))

    def process_element(self, value, ctx):
        self.seen.put(value, True)
        yield from super().process_element(value, ctx)


def key_of(x):
    return x // 50 % 101  # runs of one key: a checkpoint interval changes a few key groups, not all of them


def counting_job(env, tmp_path, sink, n, end_when=None, backend="incremental"):
    env.set_parallelism(2).enable_checkpointing(100)
    env.set_state_backend(BACKENDS[backend](tmp_path))
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(str(tmp_path / "ck"))
    config.set_max_retained_checkpoints(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    source = PacedSource(SequenceSource(0, n - 1), per_checkpoint=n // 2 // 30, end_when=end_when,
                         together=str(tmp_path / "paced"))
    (env.from_source(source, "numbers").uid("numbers").key_by(key_of)
     .process(CountAndRemember()).uid("count")
     .sink_to(sink).uid("sink"))


def shared_paths(checkpoint) -> set:
    return {f.path for handle in checkpoint.state_handles for f in handle.shared}


@pytest.mark.parametrize("backend", ["incremental", "heap-incremental"])
def test_incremental_checkpoints_with_retention_keep_every_file_the_retained_ones_need(spark, tmp_path, backend):
    n = 30_000
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    counting_job(first, tmp_path, CollectSink("counts"), n, end_when=FileExists(str(tmp_path / "never")),
                 backend=backend)
    client = first.execute_async("retention-chain")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "retention-chain")
    try:
        wait_for(lambda: (storage.usable_ids() or [0])[-1] >= 10, what="ten completed checkpoints", timeout=240)
    finally:
        client.cancel()
    retained = [storage.validated_checkpoint(i) for i in storage.usable_ids()]
    assert len(retained) == 2, [c.checkpoint_id for c in retained]
    assert any(f.uploaded_in < c.checkpoint_id for c in retained for h in c.state_handles for f in h.shared), \
        "a retained checkpoint reuses a file an earlier checkpoint uploaded"
    assert set(storage.shared_files()) == shared_paths(retained[0]) | shared_paths(retained[1]), \
        "every shared file is referenced by a retained checkpoint, and every referenced one is there"
    oldest, newest = retained
    only_newest = sorted(shared_paths(newest) - shared_paths(oldest))
    assert only_newest, "the newest checkpoint uploaded files of its own"

    # The oldest retained checkpoint, restored after the newer ones were taken (by another job): exact.
    second = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    counting_job(second, tmp_path / "oldest", sink, n, backend=backend)
    check_counts(second.execute("from-oldest", restore_from=storage.checkpoint_dir(oldest.checkpoint_id)), sink, n)

    # A file only the newest references goes missing: asking for the newest names the file, and 'latest' falls
    # back to the older checkpoint.
    storage.delete_shared(only_newest[:1])
    third = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    counting_job(third, tmp_path, sink, n, backend=backend)
    with pytest.raises(CorruptCheckpointError, match=only_newest[0].split("/")[-1] + " is missing"):
        third.execute("retention-chain", restore_from=newest.checkpoint_id)
    result = third.execute("retention-chain", restore_from="latest")
    assert result.restored_from[0] == oldest.checkpoint_id
    check_counts(result, sink, n)


def check_counts(result, sink, n):
    assert_counts_continue(result.collected(sink), collections.Counter(key_of(x) for x in range(n)))


class BackendName(KeyedProcessFunction):
    """Emits, once per subtask, the class of the keyed state backend it runs on."""

    def open(self, runtime_context):
        self.backend = type(runtime_context.keyed_backend).__name__
        self.said = False

    def process_element(self, value, ctx):
        if not self.said:
            self.said = True
            yield self.backend


def test_the_spark_conf_chooses_the_backend_without_editing_the_job(spark, env, tmp_path):
    env.set_parallelism(2)
    sink = CollectSink("backends")
    (env.from_source(SequenceSource(0, 999), "numbers").key_by(lambda x: x % 10).process(BackendName())
     .sink_to(sink))
    spark.conf.set(STATE_BACKEND_CONF, "rocksdb")
    spark.conf.set(ROCKSDB_LOCAL_DIR_CONF, str(tmp_path / "local"))
    try:
        result = env.execute("conf-chooses-rocksdb")
    finally:
        spark.conf.unset(STATE_BACKEND_CONF)
        spark.conf.unset(ROCKSDB_LOCAL_DIR_CONF)
    assert collections.Counter(result.collected(sink)) == {"RocksDBKeyedStateBackend": 2}
    assert (tmp_path / "local").is_dir() and not any((tmp_path / "local").iterdir()), "instances deleted at the end"
