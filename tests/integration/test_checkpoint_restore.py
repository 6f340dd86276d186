"""Alignment, rescaling, restore entry points and storage faults, checked on real checkpoints."""

import collections
import os
import re
import shutil

import pytest

from operators import (
    CollectSink,
    DiscardingSink,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    SequenceSource,
    Source,
    SourceReader,
    ValueStateDescriptor,
)
from runtime import CheckpointingMode, RestartStrategies
from runtime.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    JobFailedError,
)
from runtime.keys.key_groups import subtask_for_key
from state_backends.storage import CheckpointStorage
from tests.integration.checkpoints import SignalAfterCheckpoints, restored_state
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for


class CoCountPerKey(KeyedCoProcessFunction):
    """CountPerKey over both inputs of connected streams: one count per key, whichever input a record came by."""

    def open(self, runtime_context):
        self.counter = CountPerKey()
        self.counter.open(runtime_context)

    def process_element1(self, value, ctx):
        return self.counter.process_element(value, ctx)

    process_element2 = process_element1


@pytest.mark.parametrize("inputs", ["union", "connect"])
def test_aligned_snapshot_holds_exactly_the_records_before_each_barrier(env, tmp_path, inputs):
    """A fast and a 100x slower input into one keyed operator (one input gate by union, or the two inputs of a
    two-input operator): in every checkpoint, the count of records from each source equals that source's
    checkpointed position: nothing after a barrier leaked in."""
    env.set_parallelism(2).enable_checkpointing(50, CheckpointingMode.EXACTLY_ONCE)
    url = str(tmp_path / "ck")
    env.get_checkpoint_config().set_checkpoint_storage(url).set_max_retained_checkpoints(1000)
    # The rates make one input 100x slower than the other; each source holds its end until five checkpoints
    # have completed, whatever the machine's speed.
    fast = env.from_source(PacedSource(SequenceSource(0, 299_999, records_per_second=200_000),
                                       end_after_checkpoints=5), "fast").uid("fast") \
        .set_parallelism(1).map(lambda x: "fast").uid("fast-tag").set_parallelism(1)
    slow = env.from_source(PacedSource(SequenceSource(0, 2_999, records_per_second=2_000),
                                       end_after_checkpoints=5), "slow").uid("slow") \
        .set_parallelism(1).map(lambda x: "slow").uid("slow-tag").set_parallelism(1)
    if inputs == "union":
        counted = fast.union(slow).key_by(lambda tag: tag).process(CountPerKey())
    else:
        counted = fast.connect(slow).key_by(lambda tag: tag, lambda tag: tag).process(CoCountPerKey())
    counted.uid("count").sink_to(DiscardingSink())
    env.execute(f"alignment-{inputs}")
    storage = CheckpointStorage("file://" + url, f"alignment-{inputs}")
    checked = 0
    for checkpoint in storage.completed():
        counts, _ = restored_state(storage, checkpoint, "count", "count")
        for source in ("fast", "slow"):
            _, source_state = restored_state(storage, checkpoint, source)
            splits = source_state["splits"]  # none left in a finished source's final state: it read them all
            position = splits[0][0] if splits else {"fast": 300_000, "slow": 3_000}[source]
            assert counts.get(source, 0) == position, f"checkpoint {checkpoint.checkpoint_id}, {source}"
        checked += 1
    assert checked >= 5, "the job should have completed several checkpoints"


class CountWithPlacement(KeyedProcessFunction):
    """Running count per key; each output says which subtask (of how many) held the key's state."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.where = (runtime_context.get_index_of_this_subtask(),
                      runtime_context.get_number_of_parallel_subtasks())

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n, *self.where


N, KEYS = 60_000, 97


def rescalable_job(env, url, parallelism, per_checkpoint, marker=None, together=None):
    """``together``: the paced source's local meeting directory (by default beside a local ``url``)."""
    env.set_parallelism(parallelism).enable_checkpointing(100)
    # the tests restore the first run's checkpoints after other runs added theirs: retention must not delete them
    env.get_checkpoint_config().set_checkpoint_storage(url).set_max_retained_checkpoints(1000)
    sink = CollectSink("counts")
    numbers = PacedSource(SequenceSource(0, N - 1), per_checkpoint, together=together or url + "-paced")
    stream = env.from_source(numbers, "numbers").uid("numbers") \
        .map(lambda x: x % KEYS).uid("modulo")
    if marker:
        stream = stream.map(SignalAfterCheckpoints(marker, 2)).uid("signal")
    else:
        stream = stream.map(lambda x: x).uid("signal")
    stream.key_by(lambda k: k).process(CountWithPlacement()).uid("count").sink_to(sink).uid("sink")
    return sink


def run_until_checkpointed(spark, url, job_name, tmp_path):
    """``url``: a local path, or any URL (such as s3://)."""
    from runtime import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    marker = str(tmp_path / f"{job_name}.checkpointed")
    rescalable_job(env, url, 2, per_checkpoint=N // 2 // 20, marker=marker,  # 20 checkpoints: cancelled after 2
                   together=str(tmp_path / f"{job_name}-paced"))
    client = env.execute_async(job_name)
    wait_for(lambda: os.path.exists(marker), what="two completed checkpoints")
    client.cancel()
    storage = CheckpointStorage(url if "://" in url else "file://" + url, job_name)
    return storage, storage.usable_ids()


@pytest.fixture(scope="module")
def checkpointed_at_2(spark, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("rescale")
    url = str(tmp_path / "ck")
    storage, ids = run_until_checkpointed(spark, url, "rescale", tmp_path)
    assert ids, "the first run left completed checkpoints"
    return url, storage, ids


@pytest.mark.parametrize("new_parallelism", [3, 1])
def test_rescaled_restore_is_exact_and_puts_state_where_the_key_group_formula_says(
        spark, checkpointed_at_2, new_parallelism):
    url, storage, ids = checkpointed_at_2
    assert_rescaled_restore_is_exact(spark, url, "rescale", ids, new_parallelism)


def assert_rescaled_restore_is_exact(spark, url, job_name, ids, new_parallelism, together=None):
    """Restoring the newest of ``ids`` (of :func:`run_until_checkpointed`) at ``new_parallelism`` counts every record
    once, and each key's state lands on the subtask the key group formula names."""
    from runtime import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = rescalable_job(env, url, new_parallelism, per_checkpoint=None, together=together)
    result = env.execute(job_name, restore_from=ids[-1])
    assert result.restored_from == [ids[-1]]
    out = result.collected(sink)
    expected = sorted((k, i) for k, c in collections.Counter(x % KEYS for x in range(N)).items()
                      for i in range(1, c + 1))
    assert sorted((k, n) for k, n, _, _ in out) == expected
    parallelisms = {p for _, _, _, p in out}
    assert parallelisms == {2, new_parallelism}, "some output came before the checkpoint, some after"
    assert all(subtask == subtask_for_key(k, 128, p) for k, _, subtask, p in out)


def test_restore_from_a_path_and_from_the_spark_conf(spark, checkpointed_at_2):
    from runtime import StreamExecutionEnvironment

    url, storage, ids = checkpointed_at_2
    for how in ("path", "conf"):
        env = StreamExecutionEnvironment.get_execution_environment(spark)
        sink = rescalable_job(env, url, 2, per_checkpoint=None)
        if how == "path":
            result = env.execute("rescale", restore_from=os.path.join(url, "rescale", f"chk-{ids[0]}"))
        else:
            spark.conf.set("spark.chandy.restoreFrom", str(ids[0]))
            try:
                result = env.execute("rescale")
            finally:
                spark.conf.unset("spark.chandy.restoreFrom")
        assert result.restored_from == [ids[0]], how
        finals = {}
        for k, n, _, _ in result.collected(sink):
            finals[k] = max(finals.get(k, 0), n)
        assert finals == dict(collections.Counter(x % KEYS for x in range(N))), how


def test_restoring_a_missing_or_incomplete_checkpoint_fails_clearly(spark, checkpointed_at_2):
    from runtime import StreamExecutionEnvironment

    url, storage, _ = checkpointed_at_2
    ids = storage.usable_ids()  # earlier restored runs added their own checkpoints
    incomplete = ids[-1] + 50
    source = os.path.join(url, "rescale", f"chk-{ids[-1]}")
    shutil.copytree(source, os.path.join(url, "rescale", f"chk-{incomplete}"))
    os.remove(os.path.join(url, "rescale", f"chk-{incomplete}", "_metadata"))
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    rescalable_job(env, url, 2, per_checkpoint=None)
    with pytest.raises(CorruptCheckpointError,
                       match=f"{incomplete}.*never completed.*" + re.escape(f"Usable checkpoints: {ids}")):
        env.execute("rescale", restore_from=incomplete)
    with pytest.raises(CheckpointNotFoundError, match="9999 does not exist.*Usable"):
        env.execute("rescale", restore_from=9999)
    assert storage.usable_ids() == ids, "an incomplete checkpoint is never usable"
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    rescalable_job(env, url, 2, per_checkpoint=None)
    result = env.execute("rescale", restore_from="latest")
    assert result.restored_from == [ids[-1]]
    shutil.rmtree(os.path.join(url, "rescale", f"chk-{incomplete}"), ignore_errors=True)  # the run cleans up too


def test_a_deleted_state_file_makes_that_checkpoint_unrestorable(spark, tmp_path):
    from runtime import StreamExecutionEnvironment

    url = str(tmp_path / "ck")
    storage, ids = run_until_checkpointed(spark, url, "faulty", tmp_path)
    victim = storage.validated_checkpoint(ids[-1]).operator("count").handles[0].path
    os.remove(os.path.join(url, "faulty", f"chk-{ids[-1]}", victim))
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    rescalable_job(env, url, 2, per_checkpoint=None)
    with pytest.raises(CorruptCheckpointError,
                       match=re.escape(f"{victim} is missing") + ".*" + re.escape(f"Usable checkpoints: {ids[:-1]}")):
        env.execute("faulty", restore_from=ids[-1])


def damage_in_place(path):
    """Change one byte in the middle of the largest payload of a state file, keeping its size: Arrow still
    reads the file, only a checksum can tell."""
    import pyarrow as pa

    with open(path, "rb") as f:
        data = f.read()
    reader = pa.ipc.open_file(pa.py_buffer(data))
    payload = max((reader.get_batch(i).column(1)[0].as_py() for i in range(reader.num_record_batches)), key=len)
    at = data.index(payload) + len(payload) // 2
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([data[at] ^ 0xFF]))


def test_a_state_file_damaged_in_place_fails_its_checksum_and_latest_falls_back_with_a_warning(
        spark, tmp_path, caplog):
    from runtime import StreamExecutionEnvironment

    url = str(tmp_path / "ck")
    storage, ids = run_until_checkpointed(spark, url, "damaged", tmp_path)
    assert len(ids) >= 2, "the run left two usable checkpoints"
    newest = storage.validated_checkpoint(ids[-1])
    victim = newest.operator("count").handles[0].path
    damage_in_place(os.path.join(url, "damaged", f"chk-{ids[-1]}", victim))
    assert storage.problems(newest) == [], "same size: only the checksum sees the damage"

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    rescalable_job(env, url, 2, per_checkpoint=None)
    with pytest.raises(JobFailedError, match=re.escape(victim) + ".*does not match the checksum") as failed:
        env.execute("damaged", restore_from=ids[-1])  # asked for by id: no other checkpoint will do
    assert isinstance(failed.value.__cause__, CorruptCheckpointError)

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = rescalable_job(env, url, 2, per_checkpoint=None)
    with caplog.at_level("WARNING"):
        result = env.execute("damaged", restore_from="latest")
    assert result.restored_from == [ids[-1], ids[-2]] and result.restarts == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"Checkpoint {ids[-1]} cannot be restored" in w and "checksum" in w for w in warnings), warnings
    expected = sorted((k, i) for k, c in collections.Counter(x % KEYS for x in range(N)).items()
                      for i in range(1, c + 1))
    assert sorted((k, n) for k, n, _, _ in result.collected(sink)) == expected


def test_max_parallelism_must_match(spark, checkpointed_at_2):
    from runtime import StreamExecutionEnvironment

    url, storage, ids = checkpointed_at_2
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_max_parallelism(256)
    rescalable_job(env, url, 2, per_checkpoint=None)
    with pytest.raises(IncompatibleCheckpointError, match="max parallelism 128.*256"):
        env.execute("rescale", restore_from=ids[-1])


class BreakLatestCheckpointThenFail(MapFunction):
    """First attempt: after two completed checkpoints, delete a state file of the newest, then fail."""

    def __init__(self, url, job, record, damage):
        self.url, self.job, self.record, self.damage = url, job, record, damage

    def open(self, runtime_context):
        self.first = runtime_context.get_attempt_number() == 0 and runtime_context.get_index_of_this_subtask() == 0
        self.completed = []

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed.append(checkpoint_id)

    def map(self, value):
        if self.first and len(self.completed) >= 2:
            newest = self.completed[-1]
            directory = os.path.join(self.url, self.job, f"chk-{newest}", "count")
            for name in os.listdir(directory):
                if self.damage == "delete":
                    os.remove(os.path.join(directory, name))
                else:
                    damage_in_place(os.path.join(directory, name))
            with open(self.record, "w") as f:
                f.write(str(newest))
            raise RuntimeError("failing after breaking the newest checkpoint")
        return value


@pytest.mark.parametrize("damage", ["delete", "in place"])
def test_automatic_restart_falls_back_to_an_older_complete_checkpoint(env, tmp_path, damage):
    url = str(tmp_path / "ck")
    record = str(tmp_path / "broken")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(url)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    sink = CollectSink("counts")
    env.from_source(PacedSource(SequenceSource(0, N - 1), N // 2 // 10, together=str(tmp_path / "paced")),
                    "numbers").uid("numbers") \
        .map(lambda x: x % KEYS).uid("modulo").key_by(lambda k: k).process(CountPerKey()).uid("count") \
        .map(BreakLatestCheckpointThenFail(url, "fallback", record, damage)).uid("breaker").sink_to(sink).uid("sink")
    result = env.execute("fallback")
    broken = int(open(record).read())
    assert result.restarts == 1, "falling back past a damaged checkpoint is not another restart"
    assert result.restored_from[-1] is not None and result.restored_from[-1] < broken
    if damage == "in place":  # found by the executor's checksum: that attempt failed while restoring
        assert result.restored_from[1] == broken
    expected = sorted((k, i) for k, c in collections.Counter(x % KEYS for x in range(N)).items()
                      for i in range(1, c + 1))
    assert sorted(result.collected(sink)) == expected


class NothingToRead(SourceReader):
    def poll(self, max_records):
        return None

    def snapshot_state(self):
        return []

    def restore_state(self, splits):
        pass


class OnlySubtaskZeroReads(Source):
    """A parallel source with one split: subtask 0 reads it all, holding its end until four checkpoints
    completed; every other subtask has nothing to read."""

    def __init__(self, n):
        self.paced = PacedSource(SequenceSource(0, n - 1), end_after_checkpoints=4)

    def create_reader(self, subtask_index, parallelism):
        return self.paced.create_reader(0, 1) if subtask_index == 0 else NothingToRead()


def test_a_source_subtask_with_nothing_to_read_idles_and_checkpoints_go_on(env, tmp_path):
    env.set_parallelism(3).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = CollectSink("counts")
    env.from_source(OnlySubtaskZeroReads(N), "lopsided").uid("lopsided") \
        .map(lambda x: x % KEYS).uid("modulo").key_by(lambda k: k).process(CountPerKey()).uid("count") \
        .sink_to(sink).uid("sink")
    client = env.execute_async("lopsided")
    try:  # before idling, subtasks 1 and 2 finished at once, checkpoints stopped, and subtask 0 waited forever
        result = client.get_job_execution_result(timeout=300)
    finally:
        if client.get_job_status().name == "RUNNING":
            client.cancel()
    assert len(result.checkpoints) >= 4
    assert final_counts(result.collected(sink)) == dict(collections.Counter(x % KEYS for x in range(N)))
