"""DeltaSource without Spark: the snapshot then each version, the change data feed, positions that restore to
exactly the next row, the bounded end, and the errors that name their fix."""

import collections

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from deltalake import DeltaTable, write_deltalake  # noqa: E402

from operators.delta.log import ChangesNotReadableError, VersionActions, parse_commit, plan_version  # noqa: E402
from operators.delta.position import DeltaPosition  # noqa: E402
from operators.delta.source import DeltaSource  # noqa: E402
from runtime.errors import ConfigurationError, InputUnreachableError  # noqa: E402

pytestmark = pytest.mark.delta

CDF = {"delta.enableChangeDataFeed": "true"}


def rows(start, count, group="a"):
    return pa.table({"id": list(range(start, start + count)), "g": [group] * count})


def opened(source, state=None):
    reader = source.create_reader(0, 1)
    if state is not None:
        reader.restore_state(state)
    reader.open(None)
    return reader


def read_through(reader, version, batch=1000, states=None):
    """Every record up to and including ``version``'s (an unbounded reader idles at the next one)."""
    out = []
    while not reader.position.is_past(version):
        records = reader.poll(batch)
        assert records is not None, "the reader ended early"
        out.extend(records)
        if states is not None:
            states.append((len(out), reader.snapshot_state()))
    return out


def read_to_end(reader, batch=1000):
    out = []
    while (records := reader.poll(batch)) is not None:
        out.extend(records)
    return out


def ids(records):
    return [r["id"] for r in records]


def test_position_moves_part_by_part_and_version_by_version():
    position = DeltaPosition.snapshot_of(2).advanced(5)
    assert position == DeltaPosition(2, True, 0, 5)
    assert position.next_part() == DeltaPosition(2, True, 1, 0)
    assert position.next_version() == DeltaPosition.changes_of(3)
    assert not position.is_past(2) and position.next_version().is_past(2) and not position.is_past(None)


def test_commit_actions_keep_data_changes_only_and_plan_each_version():
    text = "\n".join(['{"commitInfo": {"operation": "OPTIMIZE"}}',
                      '{"add": {"path": "b.parquet", "dataChange": false}}',
                      '{"remove": {"path": "a.parquet", "dataChange": false}}'])
    assert parse_commit(text) == VersionActions(operation="OPTIMIZE")
    assert plan_version(4, parse_commit(text), change_data_feed=False).value == "nothing"
    update = VersionActions(added=("b",), removed=("a",), operation="UPDATE")
    with pytest.raises(ChangesNotReadableError, match=r"version 4 of t \(UPDATE\) removed data.*delta.enableChange"):
        plan_version(4, update, change_data_feed=False, table="t")
    with pytest.raises(ChangesNotReadableError):
        plan_version(4, update, change_data_feed=False, ignore_deletes=True)  # a rewrite is no mere delete
    assert plan_version(4, update, change_data_feed=False, ignore_changes=True).value == "added files"


def test_continuous_reads_the_snapshot_then_each_appended_version_once(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 5))
    write_deltalake(path, rows(5, 3), mode="append")  # version 1: in the snapshot
    source = DeltaSource.for_continuous(path).update_check_interval(1).build()
    source.validate()
    reader = opened(source)
    assert sorted(ids(read_through(reader, 1, batch=2))) == list(range(8))  # files in path order
    assert reader.poll(10) == [] and reader.position == DeltaPosition.changes_of(2)  # waits for version 2
    write_deltalake(path, rows(8, 4, "b"), mode="append")
    write_deltalake(path, rows(12, 1), mode="append")
    assert sorted(ids(read_through(reader, 3))) == list(range(8, 13))
    assert reader.snapshot_state() == [DeltaPosition.changes_of(4)]


def test_starting_version_reads_no_snapshot_and_bounded_ends_at_its_version(tmp_path):
    path = str(tmp_path / "t")
    for v in range(4):
        write_deltalake(path, rows(10 * v, 2), mode="append")
    changes = DeltaSource.for_continuous(path).starting_version(2).update_check_interval(1).build()
    assert ids(read_through(opened(changes), 3)) == [20, 21, 30, 31]
    bounded = DeltaSource.for_bounded(path).build()
    bounded.validate()  # ends at the latest version now: 3
    write_deltalake(path, rows(40, 2), mode="append")  # after launch: not read
    assert sorted(ids(read_to_end(opened(bounded)))) == [0, 1, 10, 11, 20, 21, 30, 31]
    as_of = DeltaSource.for_bounded(path).version_as_of(1).build()
    as_of.validate()
    assert sorted(ids(read_to_end(opened(as_of)))) == [0, 1, 10, 11]
    window = DeltaSource.for_bounded(path).starting_version(1).version_as_of(2).build()
    assert ids(read_to_end(opened(window))) == [10, 11, 20, 21]


def test_a_restore_from_any_position_reads_each_remaining_row_once(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 7), partition_by=["g"], configuration=CDF)
    write_deltalake(path, rows(7, 5, "b"), mode="append")
    source = DeltaSource.for_continuous(path).update_check_interval(1).build()
    first = opened(source)  # the snapshot at version 1, then the changes of each later version
    write_deltalake(path, rows(12, 6, "c"), mode="append")  # version 2: an append, in the change data feed
    DeltaTable(path).delete("id >= 3 AND id < 6")  # version 3
    DeltaTable(path).update({"id": "id + 100"}, predicate="id = 8")  # version 4
    states = []
    everything = read_through(first, 4, batch=2, states=states)
    assert len(states) > 10
    assert collections.Counter(r.get("_change_type") for r in everything) == {
        None: 12, "insert": 6, "delete": 3, "update_preimage": 1, "update_postimage": 1}
    for emitted, state in states:
        resumed = read_through(opened(source, state), 4, batch=3)
        assert everything[:emitted] + resumed == everything, (emitted, state)


def test_change_data_feed_rows_carry_their_change_in_a_stable_order(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 4), configuration=CDF)
    source = DeltaSource.for_continuous(path).update_check_interval(1).columns(["id"]).build()
    source.validate()
    reader = opened(source)
    assert read_through(reader, 0) == [{"id": i} for i in range(4)]  # the snapshot: plain rows
    DeltaTable(path).update({"id": "id + 10"}, predicate="id = 1")  # version 1
    DeltaTable(path).delete("id = 2")  # version 2
    write_deltalake(path, rows(20, 1), mode="append")  # version 3
    changes = [(r["_change_type"], r["id"], r["_commit_version"]) for r in read_through(reader, 3)]
    assert changes == [("update_preimage", 1, 1), ("update_postimage", 11, 1), ("delete", 2, 2), ("insert", 20, 3)]
    assert set(read_through(opened(source, [DeltaPosition.changes_of(1)]), 3)[0]) == {
        "id", "_change_type", "_commit_version", "_commit_timestamp"}


def test_versions_that_change_no_data_give_nothing(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 2))
    write_deltalake(path, rows(2, 2), mode="append")
    DeltaTable(path).optimize.compact()  # version 2: files rewritten, dataChange false
    DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "false"})  # version 3
    write_deltalake(path, rows(4, 1), mode="append")  # version 4
    reader = opened(DeltaSource.for_continuous(path).starting_version(1).update_check_interval(1).build())
    assert ids(read_through(reader, 4)) == [2, 3, 4]


def test_without_a_change_data_feed_a_delete_fails_naming_the_version_unless_ignored(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.concat_tables([rows(0, 2), rows(2, 2, "b")]), partition_by=["g"])
    DeltaTable(path).delete("g = 'b'")  # version 1: removes a whole file
    write_deltalake(path, rows(4, 1), mode="append")  # version 2
    DeltaTable(path).update({"id": "id + 100"}, predicate="id = 0")  # version 3: a rewrite
    strict = opened(DeltaSource.for_bounded(path).starting_version(1).build())
    with pytest.raises(ChangesNotReadableError, match=r"version 1 of .* \(DELETE\).*ignore_deletes"):
        read_to_end(strict)
    deletes_ignored = opened(DeltaSource.for_bounded(path).starting_version(1).ignore_deletes().build())
    assert ids(read_through(deletes_ignored, 2)) == [4]
    with pytest.raises(ChangesNotReadableError, match="version 3"):
        read_to_end(deletes_ignored)
    changes_ignored = opened(DeltaSource.for_bounded(path).starting_version(1).ignore_changes().build())
    assert sorted(ids(read_to_end(changes_ignored))) == [1, 4, 100]  # the rewrite's copied row 1 comes again


def test_errors_before_launch_name_the_problem_and_the_fix(tmp_path):
    with pytest.raises(InputUnreachableError, match=r"is not a Delta table .*Check the path"):
        DeltaSource.for_bounded(str(tmp_path / "nothing")).build().validate()
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputUnreachableError, match="is not a Delta table"):
        DeltaSource.for_continuous(str(tmp_path / "plain")).build().validate()
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 1))
    with pytest.raises(ConfigurationError, match=r"version_as_of\(5\) is after the latest version .*, 0"):
        DeltaSource.for_bounded(path).version_as_of(5).build().validate()
    with pytest.raises(ConfigurationError, match=r"\['nope'\] are not columns .* \['id', 'g'\]"):
        DeltaSource.for_bounded(path).columns(["id", "nope"]).build().validate()
    with pytest.raises(ConfigurationError, match="a continuous source reads every version"):
        DeltaSource.for_continuous(path).version_as_of(0).build()
    with pytest.raises(ConfigurationError, match="must be a table version"):
        DeltaSource.for_bounded(path).starting_version(-1).build()
    with pytest.raises(ConfigurationError, match="starting_version.* is after the version the bounded source ends"):
        DeltaSource.for_bounded(path).starting_version(3).build().validate()


def test_a_restored_position_whose_commit_is_gone_is_an_error(tmp_path):
    path = str(tmp_path / "t")
    for v in range(3):
        write_deltalake(path, rows(v, 1), mode="append")
    DeltaTable(path).create_checkpoint()  # at version 2: the table loads without the commits before it
    for v in range(2):
        (tmp_path / "t" / "_delta_log" / f"{v:020d}.json").unlink()
    reader = DeltaSource.for_continuous(path).build().create_reader(0, 1)
    reader.restore_state([DeltaPosition.changes_of(1)])
    with pytest.raises(InputUnreachableError, match=r"changes of version 1.*gone from _delta_log.*retention"):
        reader.open(None)
    snapshot = DeltaSource.for_continuous(path).build().create_reader(0, 1)
    snapshot.restore_state([DeltaPosition.snapshot_of(0).advanced(1)])
    snapshot.open(None)
    with pytest.raises(InputUnreachableError, match=r"cannot load version 0 .*the snapshot at version 0.*log retention"):
        snapshot.poll(10)


def test_execute_checks_the_table_before_spark_starts_and_fixes_the_versions(tmp_path, monkeypatch):
    from runtime import StreamExecutionEnvironment

    class SparkStarted(Exception):
        pass

    def no_spark(slots):
        raise SparkStarted()

    monkeypatch.setattr("runtime.datastream.stream_execution_environment.obtain_spark_session", no_spark)
    path = str(tmp_path / "t")

    def run(source):
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
        env.from_source(source, "orders").print()
        env.execute("delta")

    with pytest.raises(InputUnreachableError, match="is not a Delta table"):
        run(DeltaSource.for_continuous(path).build())
    write_deltalake(path, rows(0, 3))
    write_deltalake(path, rows(3, 1), mode="append")
    bounded, continuous = DeltaSource.for_bounded(path).build(), DeltaSource.for_continuous(path).build()
    for source in (bounded, continuous):
        with pytest.raises(SparkStarted):
            run(source)
    assert (bounded.end_version, bounded.snapshot_version, continuous.end_version, continuous.snapshot_version) == (
        1, 1, None, 1)


def test_the_snapshot_version_is_fixed_on_the_driver_for_every_attempt(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 2))
    source = DeltaSource.for_continuous(path).update_check_interval(1).build()
    source.validate()  # at launch: the snapshot is version 0's
    write_deltalake(path, rows(2, 2), mode="append")  # version 1, before the readers open
    for _attempt in range(2):  # an attempt restarted without a checkpoint reads the same
        reader = opened(source)
        assert reader.position == DeltaPosition.snapshot_of(0)
        assert [ids(read_through(reader, 0)), sorted(ids(read_through(reader, 1)))] == [[0, 1], [2, 3]]


def test_a_table_on_an_s3_protocol_server_is_read_with_storage_options(s3_server):
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "chandy-test", "AWS_SECRET_ACCESS_KEY": "chandy-test-secret",
               "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    path = f"s3://{s3_server.bucket('delta')}/orders"
    write_deltalake(path, rows(0, 3), storage_options=options)
    source = DeltaSource.for_continuous(path).storage_options(options).update_check_interval(1).build()
    source.validate()
    reader = opened(source)
    assert sorted(ids(read_through(reader, 0))) == [0, 1, 2]
    assert reader.poll(10) == []  # version 1 is not there yet
    write_deltalake(path, rows(3, 2), mode="append", storage_options=options)
    assert sorted(ids(read_through(reader, 1))) == [3, 4]
    with pytest.raises(InputUnreachableError, match="is not a Delta table"):
        DeltaSource.for_bounded(path + "-missing").storage_options(options).build().validate()


def test_appended_files_read_their_typed_partition_values_as_the_table_does(tmp_path):
    import datetime

    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("shard", pa.int32()), ("ts", pa.timestamp("us"))])
    day = datetime.date(2026, 11, 27)
    moment = datetime.datetime(2026, 11, 27, 13, 45, 30, 123456)
    write_deltalake(path, pa.table({"id": [0], "day": [day], "shard": [1], "ts": [moment]}, schema=schema),
                    partition_by=["day", "shard", "ts"])
    write_deltalake(path, pa.table({"id": [1, 2], "day": [day, None], "shard": [2, None], "ts": [moment, None]},
                                   schema=schema), mode="append")
    reader = opened(DeltaSource.for_bounded(path).starting_version(0).build())

    def key(row):
        return row["id"]

    assert sorted(read_to_end(reader), key=key) == sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=key)


def test_a_waiting_source_asks_the_store_once_per_update_check_interval(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 1))
    now = [100.0]
    source = DeltaSource.for_continuous(path).starting_version(1).update_check_interval(5000).build()
    reader = source.create_reader(0, 1)
    reader.clock, reader.wait = (lambda: now[0]), (lambda seconds: None)
    reader.open(None)
    assert reader.poll(10) == []  # asked: version 1 is not there
    write_deltalake(path, rows(1, 1), mode="append")
    write_deltalake(path, rows(2, 1), mode="append")
    now[0] += 4.9
    assert reader.poll(10) == []  # not asked again within the interval
    now[0] += 0.1
    assert ids(read_through(reader, 2)) == [1, 2]  # version 2 follows at once, without another interval
