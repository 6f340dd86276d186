"""State as data, written from a Spark DataFrame: SavepointWriter routes the rows to their subtasks on the executors
(by the runtime's key groups) and writes each subtask's state file there, byte for byte the file the driver writes
for the same data; the state reads back as the input, a job restores it at another parallelism and ends exact, and
the writer and the Spark reader work on executors of their own JVMs too (local-cluster: STATE_API_ON_A_CLUSTER, run
by tests/integration/test_deployment.py in its cluster)."""

import os
import textwrap

import pyarrow as pa
import pytest

from operators import CollectSink
from runtime.errors import ConfigurationError
from runtime.keys.key_groups import assign_to_key_group, key_group_range
from runtime.state_api import SavepointReader, SavepointWriter
from runtime.tools.demo import CountPerKey, final_counts

KEYS, MAX_PARALLELISM, PARALLELISM = 10_000, 128, 3
GROUP = "state-api-spark-writer"


def reference() -> dict:
    """What the DataFrame holds, in plain Python: each user's earlier count."""
    return {f"user-{i}": 3 * i for i in range(KEYS)}


def handles(path: str) -> list:
    (state,) = SavepointReader.read(path).checkpoint.operators
    return sorted(state.handles, key=lambda handle: handle.subtask)


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The reference as a DataFrame of four partitions, written at parallelism 3; and the number of tasks of each
    stage of the Spark jobs the write ran."""
    directory = tmp_path_factory.mktemp("spark-writer")
    frame = spark.range(KEYS, numPartitions=4).selectExpr("concat('user-', id) AS user", "id * 3 AS visits")
    context = spark.sparkContext
    context.setJobGroup(GROUP, "SavepointWriter from a DataFrame")
    try:
        path = (SavepointWriter.new_savepoint(MAX_PARALLELISM)
                .with_keyed_state("count", "count", frame, key_column="user", value_column="visits",
                                  parallelism=PARALLELISM)
                .write(str(directory / "executors")))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    stages = [stage for job in tracker.getJobIdsForGroup(GROUP) for stage in tracker.getJobInfo(job).stageIds]
    return path, sorted(tracker.getStageInfo(stage).numTasks for stage in stages)


def test_a_dataframe_written_on_the_executors_reads_back_and_its_files_are_the_drivers(written, tmp_path):
    path, stage_tasks = written
    assert stage_tasks == [PARALLELISM, 4], "one job: the DataFrame's 4 partitions shuffled to one task per subtask"
    reader = SavepointReader.read(path)
    (state,) = reader.checkpoint.operators
    assert (state.uid, state.parallelism, reader.max_parallelism) == ("count", PARALLELISM, MAX_PARALLELISM)
    table = reader.keyed_state("count", "count", key_groups=True)
    keys = table.column("key").to_pylist()
    assert dict(zip(keys, table.column("value").to_pylist())) == reference()
    assert table.column("key_group").to_pylist() == [assign_to_key_group(k, MAX_PARALLELISM) for k in keys]
    for handle in state.handles:  # each file holds only the key groups its subtask owns at parallelism 3
        assert set(handle.keyed_groups) <= set(key_group_range(MAX_PARALLELISM, PARALLELISM, handle.subtask))
    backwards = dict(reversed(reference().items()))  # the rows' order does not change a file
    on_driver = (SavepointWriter.new_savepoint(MAX_PARALLELISM)
                 .with_keyed_state("count", "count", backwards, parallelism=PARALLELISM)
                 .write(str(tmp_path / "driver")))
    ours, theirs = handles(path), handles(on_driver)
    assert [h.subtask for h in ours] == [0, 1, 2] and ours == theirs, "same paths, sizes, key groups and checksums"
    for handle in ours:
        with open(os.path.join(path[len("file://"):], handle.path), "rb") as one, \
                open(os.path.join(on_driver[len("file://"):], handle.path), "rb") as other:
            assert one.read() == other.read()


def test_a_job_restores_the_dataframes_state_at_parallelism_2_and_ends_exact(env, written, tmp_path):
    path, _ = written
    n = 6_000  # users 0..5999 count one more; the others keep their earlier count
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = CollectSink("counts")
    env.from_sequence(0, n - 1).uid("numbers").map(lambda x: f"user-{x}").uid("user").key_by(lambda user: user) \
        .process(CountPerKey()).uid("count").sink_to(sink).uid("sink")
    result = env.execute("restored-from-a-dataframe", restore_from=path)
    expected = {key: count + (1 if int(key[5:]) < n else 0) for key, count in reference().items()}
    assert final_counts(result.collected(sink)) == {key: expected[key] for key in (f"user-{x}" for x in range(n))}
    final = SavepointReader.read(str(tmp_path / "ck" / "restored-from-a-dataframe"), "latest")
    assert [op.parallelism for op in final.checkpoint.operators if op.uid == "count"] == [2]
    table = final.keyed_state("count", "count")
    assert dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist())) == expected


def test_states_from_a_dataframe_and_from_the_driver_share_an_operators_files_as_the_driver_writes_them(
        spark, tmp_path):
    recent = {f"user-{i}": [i, i + 1] for i in range(40)}
    frame = spark.createDataFrame([(k, v) for k, v in recent.items()], "user string, recent array<bigint>")
    names = {"user-1": "ann", "user-7": "bob"}
    mixed = (SavepointWriter.new_savepoint(MAX_PARALLELISM)
             .with_keyed_state("profile", "recent", frame, key_column="user", value_column="recent", parallelism=2)
             .with_keyed_state("profile", "name", names)
             .write(str(tmp_path / "mixed")))
    on_driver = (SavepointWriter.new_savepoint(MAX_PARALLELISM)
                 .with_keyed_state("profile", "recent", dict(reversed(recent.items())), parallelism=2)
                 .with_keyed_state("profile", "name", names)
                 .write(str(tmp_path / "driver")))
    assert handles(mixed) == handles(on_driver) and len(handles(mixed)) == 2
    reader = SavepointReader.read(mixed)
    table = reader.keyed_state("profile", "recent")
    assert dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist())) == recent
    table = reader.keyed_state("profile", "name")
    assert dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist())) == names


def test_a_key_the_dataframe_holds_twice_fails_the_write_as_the_driver_refuses_it_and_leaves_nothing(
        spark, tmp_path):
    rows = [("a", 1), ("b", 2), ("c", 3), ("a", 4)]  # "a" in the first and the last of four partitions
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), "user string, visits bigint")
    with pytest.raises(ConfigurationError) as on_driver:
        SavepointWriter.new_savepoint().with_keyed_state(
            "count", "n", pa.table({"user": [k for k, _ in rows], "visits": [v for _, v in rows]}),
            key_column="user", value_column="visits")
    writer = SavepointWriter.new_savepoint().with_keyed_state("count", "n", frame, key_column="user",
                                                              value_column="visits", parallelism=2)
    with pytest.raises(ConfigurationError) as on_executors:
        writer.write(str(tmp_path / "sp"))
    assert str(on_executors.value) == str(on_driver.value)
    assert "the key 'a' comes twice in column 'user'" in str(on_executors.value)
    assert not (tmp_path / "sp").exists() or not any((tmp_path / "sp").rglob("*")), "nothing is left behind"
    with pytest.raises(ConfigurationError, match="in the driver's memory, where the executors cannot write"):
        writer.write("memory://state-api-spark-writer/sp")
    with pytest.raises(ConfigurationError, match="comes from a Spark DataFrame.*withColumn"):
        writer.transform("count", "n", lambda key, n: n + 1)
    with pytest.raises(ConfigurationError, match="no column 'key' .*key_column="):
        SavepointWriter.new_savepoint().with_keyed_state("count", "n", frame)


# Run by tests/integration/test_deployment.py in its local-cluster[2,1,1024] process (a master and two workers, each
# starting an executor JVM; a process holds one SparkContext, and the test session's is local): after its first job,
# the executors write the state files and read them back; the driver only gathers handles and rows.
STATE_API_ON_A_CLUSTER = textwrap.dedent("""
    from runtime.state_api import SavepointReader, SavepointWriter

    state_directory, keys = os.path.abspath("state-api"), 2_000
    reference = {f"user-{i}": [i, i % 7] for i in range(keys)}   # a list state's entries, from an array column
    frame = spark.range(keys, numPartitions=4).selectExpr("concat('user-', id) AS user", "array(id, id % 7) AS recent")
    on_executors = (SavepointWriter.new_savepoint(128)
                    .with_keyed_state("count", "recent", frame, key_column="user", value_column="recent", parallelism=3)
                    .write(os.path.join(state_directory, "executors")))
    on_driver = (SavepointWriter.new_savepoint(128).with_keyed_state("count", "recent", reference, parallelism=3)
                 .write(os.path.join(state_directory, "driver")))
    read = SavepointReader.read(on_executors).keyed_state_frame(spark, "count", "recent")
    rows = {key: list(value) for key, value in read.collect()}
    same = [op.handles for op in SavepointReader.read(on_executors).checkpoint.operators] == \\
        [op.handles for op in SavepointReader.read(on_driver).checkpoint.operators]
    print("STATE_API", "EXACT" if rows == reference else "WRONG", "SAME_FILES" if same else "OTHER_FILES",
          "EXECUTORS", spark.sparkContext._jsc.sc().getExecutorIds().size(),
          "PARTITIONS", read.rdd.getNumPartitions(), flush=True)
""")
