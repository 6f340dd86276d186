"""The Iceberg sink against real tables (pyiceberg's SQL catalog on SQLite): snapshots that record the checkpoint,
the newest checkpoint of this sink read back among other writers' snapshots, and the checks before a job starts."""

import pyarrow as pa
import pytest

from runtime.datastream.connectors.iceberg import IcebergSink
from runtime.errors import ConfigurationError

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.iceberg

SCHEMA = pa.schema([("id", pa.int64()), ("item", pa.string())])


@pytest.fixture
def catalog(tmp_path):
    return {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}


def _sink(catalog, schema=SCHEMA, uid="orders-committer"):
    sink = IcebergSink(catalog, "shop.orders")
    sink.expect_schema(schema)
    sink.validate()
    sink.bind("job", uid)
    return sink


def _files(sink, ids, subtask=0):
    writer = sink.create_file_writer(subtask, 2)
    writer.write([pa.record_batch({"id": ids, "item": [f"item-{i}" for i in ids]}, schema=SCHEMA)])
    return writer.prepare_commit()


def test_each_commit_is_one_snapshot_recording_the_sink_and_the_checkpoint(catalog):
    sink = _sink(catalog)
    sink.commit(_files(sink, [1, 2]) + _files(sink, [3], subtask=1), checkpoint_id=5)
    sink.commit(_files(sink, [4]), checkpoint_id=6)
    table = sink.table()
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
    summaries = [s.summary for s in table.snapshots()]
    assert [(s["chandy.app-id"], s["chandy.checkpoint-id"]) for s in summaries] == [
        (sink.app_id, "5"), (sink.app_id, "6")]
    assert sink.app_id.startswith("chandy:job:orders-committer:")
    assert sink.committed_checkpoint() == 6


def test_the_newest_checkpoint_is_this_sinks_among_other_writers_snapshots(catalog):
    mine, other = _sink(catalog), _sink(catalog, uid="other-committer")
    mine.commit(_files(mine, [1]), checkpoint_id=3)
    other.commit(_files(other, [2]), checkpoint_id=9)
    other.table().append(pa.table({"id": [7], "item": ["by hand"]}))  # a writer that records nothing
    assert (mine.committed_checkpoint(), other.committed_checkpoint()) == (3, 9)


def test_a_snapshot_rolled_back_is_not_taken_for_committed(catalog):
    sink = _sink(catalog)
    sink.commit(_files(sink, [1]), checkpoint_id=3)
    first = sink.table().current_snapshot().snapshot_id
    sink.commit(_files(sink, [2]), checkpoint_id=4)
    sink.table().manage_snapshots().rollback_to_snapshot(first).commit()
    assert sink.committed_checkpoint() == 3


def test_a_column_of_another_type_names_the_column_and_both_types(catalog):
    _sink(catalog)
    wrong = pa.schema([("id", pa.string()), ("item", pa.string())])
    with pytest.raises(ConfigurationError, match=r"column 'id' is int64 in the table and string in the stream"):
        _sink(catalog, wrong)


def test_a_column_the_table_lacks_is_named_with_the_fix(catalog):
    _sink(catalog)
    wider = SCHEMA.append(pa.field("price", pa.float64()))
    with pytest.raises(ConfigurationError, match=r"has no column 'price' \(stream type double\).*update_schema"):
        _sink(catalog, wider)


def test_a_partitioned_table_is_refused_before_the_job_starts(catalog):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.transforms import IdentityTransform

    loaded = load_catalog("default", **catalog)
    loaded.create_namespace("shop")
    table = loaded.create_table("shop.orders", schema=SCHEMA)
    with table.update_spec() as update:
        update.add_field("item", IdentityTransform(), "item")
    with pytest.raises(ConfigurationError, match="is partitioned .*unpartitioned Iceberg tables only"):
        _sink(catalog)
