"""The Delta Lake sink against real tables (deltalake): files and commits, partitions, the checks before a job starts,
schema evolution when asked for, a commit beside another writer's, and a table that Spark's readers see."""

import os

import pyarrow as pa
import pytest

from runtime.common import Types
from runtime.datastream.connectors.delta import DeltaSink
from runtime.errors import ApiUsageError, ConfigurationError

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.delta

SCHEMA = pa.schema([("day", pa.string()), ("user", pa.string()), ("clicks", pa.int64())])


def _batch(days, users, clicks, schema=SCHEMA):
    return pa.record_batch([pa.array(days), pa.array(users), pa.array(clicks)], schema=schema)


def _sink(path, **options):
    sink = DeltaSink(str(path), **options)
    sink.expect_schema(options.get("schema", SCHEMA))
    sink.validate()
    sink.bind("job", "clicks-committer")
    return sink


def _write(sink, *batches, subtask=0):
    writer = sink.create_file_writer(subtask, 2)
    writer.write(list(batches))
    return writer.prepare_commit()


def test_one_commit_holds_every_subtasks_files_and_records_the_checkpoint(tmp_path):
    sink = _sink(tmp_path / "t", schema=SCHEMA)
    files = _write(sink, _batch(["mon"], ["ada"], [1])) + _write(sink, _batch(["tue"], ["bob"], [2]), subtask=1)
    sink.commit(files, checkpoint_id=3)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["user"]) == [
        {"day": "mon", "user": "ada", "clicks": 1}, {"day": "tue", "user": "bob", "clicks": 2}]
    assert table.version() == 1 and table.transaction_version(sink.app_id) == 3
    assert table.history(1)[0]["chandy.checkpoint-id"] == "3"
    assert sink.committed_checkpoint() == 3


def test_partitioned_files_lie_in_partition_directories_and_read_back_by_partition(tmp_path):
    sink = _sink(tmp_path / "t", schema=SCHEMA, partition_by=["day"])
    sink.commit(_write(sink, _batch(["mon", "tue", "mon", None], ["a", "b", "c", "d"], [1, 2, 3, 4])), 1)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert table.metadata().partition_columns == ["day"]
    monday = table.to_pyarrow_table(filters=[("day", "=", "mon")])
    assert sorted(monday["user"].to_pylist()) == ["a", "c"]
    assert sorted(table.to_pyarrow_table()["clicks"].to_pylist()) == [1, 2, 3, 4]
    assert {uri.rsplit("/", 2)[1] for uri in table.file_uris()} == {"day=mon", "day=tue",
                                                                     "day=__HIVE_DEFAULT_PARTITION__"}


def test_a_stream_with_a_column_the_table_lacks_is_refused_unless_merge_schema(tmp_path):
    _sink(tmp_path / "t", schema=SCHEMA.remove(0))
    with pytest.raises(ConfigurationError, match=r"has no column 'day' \(stream type string\).*merge_schema=True"):
        _sink(tmp_path / "t", schema=SCHEMA)
    sink = _sink(tmp_path / "t", schema=SCHEMA, merge_schema=True)
    sink.commit(_write(sink, _batch(["mon"], ["ada"], [1])), 1)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert "day" in pa.schema(table.schema().to_arrow()).names
    assert table.to_pyarrow_table().to_pylist() == [{"user": "ada", "clicks": 1, "day": "mon"}]


def test_a_column_of_another_type_names_the_column_and_both_types(tmp_path):
    _sink(tmp_path / "t", schema=SCHEMA)
    wrong = pa.schema([("day", pa.string()), ("user", pa.string()), ("clicks", pa.float64())])
    with pytest.raises(ConfigurationError, match=r"column 'clicks' is int64 in the table and double in the stream"):
        _sink(tmp_path / "t", schema=wrong)


def test_a_narrower_integer_column_is_widened_to_the_tables(tmp_path):
    _sink(tmp_path / "t", schema=SCHEMA)
    narrow = pa.schema([("day", pa.string()), ("user", pa.string()), ("clicks", pa.int32())])
    sink = _sink(tmp_path / "t", schema=narrow)
    sink.commit(_write(sink, _batch(["mon"], ["ada"], [5], schema=narrow)), 1)
    assert deltalake.DeltaTable(str(tmp_path / "t")).to_pyarrow_table()["clicks"].type == pa.int64()


def test_other_partition_columns_than_the_tables_are_refused(tmp_path):
    _sink(tmp_path / "t", schema=SCHEMA, partition_by=["day"])
    with pytest.raises(ConfigurationError, match=r"partitioned by \['day'\], the sink by \[\]. Give the sink "
                                                 r"partition_by=\['day'\]"):
        _sink(tmp_path / "t", schema=SCHEMA)


def test_a_sink_without_a_schema_says_how_to_give_one(tmp_path):
    from runtime import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ApiUsageError, match=r"no declared row type.*output_type=Types.ROW_NAMED"):
        env.from_collection([1, 2]).sink_to(DeltaSink(str(tmp_path / "t")))
    row = Types.ROW_NAMED(["n"], [Types.LONG()])
    sink = env.from_collection([1, 2]).map(lambda n: (n,), output_type=row).sink_to(DeltaSink(str(tmp_path / "t")))
    assert sink.uid("numbers")._committer.uid == "numbers-committer"


def test_a_commit_beside_another_writers_appends_keeps_both(tmp_path):
    sink = _sink(tmp_path / "t", schema=SCHEMA)
    files = _write(sink, _batch(["mon"], ["ada"], [1]))
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table(_batch(["sun"], ["eve"], [9])), mode="append")
    sink.commit(files, 2)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert sorted(table.to_pyarrow_table()["user"].to_pylist()) == ["ada", "eve"]
    assert table.transaction_version(sink.app_id) == 2 and sink.app_id.startswith("chandy:job:clicks-committer:")


def test_an_aborted_writer_leaves_no_file(tmp_path):
    sink = _sink(tmp_path / "t", schema=SCHEMA)
    writer = sink.create_file_writer(0, 1)
    writer.write([_batch(["mon"], ["ada"], [1])])
    writer.abort()
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["_delta_log"]


def test_a_table_on_the_s3_server_is_written_and_committed(s3_server):
    path = f"s3://{s3_server.bucket()}/clicks"
    sink = _sink(path, schema=SCHEMA, partition_by=["day"])
    sink.commit(_write(sink, _batch(["mon", "tue"], ["ada", "bob"], [1, 2])), checkpoint_id=4)
    table = deltalake.DeltaTable(path, storage_options={"AWS_ALLOW_HTTP": "true"})
    assert sorted(table.to_pyarrow_table()["user"].to_pylist()) == ["ada", "bob"]
    assert sink.committed_checkpoint() == 4
    assert any("/clicks/day=mon/part-" in key for key in s3_server.filesystem().find(path))


def test_a_bucket_that_does_not_exist_is_named_before_the_job_starts(s3_server):
    from runtime.errors import OutputUnreachableError

    with pytest.raises(OutputUnreachableError, match=r"s3://no-such-bucket-[0-9a-f]+/clicks"):
        _sink(f"s3://no-such-bucket-{os.urandom(4).hex()}/clicks", schema=SCHEMA)


def test_a_commit_that_conflicts_with_another_writers_schema_change_fails_clearly_and_loses_nothing(tmp_path):
    from runtime.errors import OutputConflictError

    sink = _sink(tmp_path / "t", schema=SCHEMA)
    files = _write(sink, _batch(["mon"], ["ada"], [1]))
    loaded = sink.table

    def loaded_before_another_writer_changed_the_schema():
        table = loaded()
        deltalake.DeltaTable(str(tmp_path / "t")).alter.add_columns([deltalake.Field("note", "string")])
        return table

    sink.table = loaded_before_another_writer_changed_the_schema
    with pytest.raises(OutputConflictError, match=r"checkpoint 1 conflicts with another writer's commit.*schema"):
        sink.commit(files, 1)
    sink.table = loaded
    assert sink.commit(files, 1), "the restarted committer commits the same files on the table as it is"
    assert deltalake.DeltaTable(str(tmp_path / "t")).to_pyarrow_table()["user"].to_pylist() == ["ada"]
