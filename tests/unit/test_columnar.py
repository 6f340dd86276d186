"""The columnar path without Spark: vectorised key groups, batch operators, routing, and API errors."""

import collections

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.columnar import (
    BatchesToRowsOperator,
    KeyedRunningAggregateOperator,
    MapBatchesOperator,
    RowsToBatchesOperator,
    infer_output_schema,
)
from operators.context import SubtaskInfo
from runtime import StreamExecutionEnvironment
from runtime.graph.job_graph import ChainEdge, Partitioner
from runtime.keys.arrow_key_groups import column_key_groups, column_subtasks
from runtime.keys.key_groups import assign_to_key_group, key_group_range, subtask_for_key
from runtime.network.codec import ColumnarCodec
from runtime.network.record_writer import ColumnarEdgeWriter
from state_backends.heap import HeapKeyedStateBackend

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(INT64, min_size=1, max_size=200), st.integers(min_value=1, max_value=1 << 15))
def test_int64_column_key_groups_equal_the_record_paths(values, max_parallelism):
    groups = column_key_groups(pa.array(values, pa.int64()), max_parallelism).to_pylist()
    assert groups == [assign_to_key_group(v, max_parallelism) for v in values]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1), min_size=1, max_size=100),
       st.integers(min_value=1, max_value=64))
def test_int32_column_subtasks_equal_the_record_paths(values, parallelism):
    max_p = 128 if parallelism <= 64 else 256
    subtasks = column_subtasks(pa.array(values, pa.int32()), max_p, parallelism).tolist()
    assert subtasks == [subtask_for_key(v, max_p, parallelism) for v in values]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=8), min_size=1, max_size=100))
def test_string_column_key_groups_equal_the_record_paths(values):
    assert column_key_groups(pa.array(values), 128).to_pylist() == [assign_to_key_group(v, 128) for v in values]


def test_a_null_key_is_refused_by_name():
    with pytest.raises(ValueError, match="must not contain nulls"):
        column_key_groups(pa.array([1, None], pa.int64()), 128)


def _keyed(operator, parallelism=1, subtask=0, max_p=128):
    backend = HeapKeyedStateBackend(max_p, key_group_range(max_p, parallelism, subtask))
    operator.setup(SubtaskInfo(operator.name, subtask, parallelism, max_p, 0), backend)
    operator.open()
    return backend


SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


@pytest.mark.parametrize("value_column", [None, "v"])
@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 12), st.integers(-50, 50)), min_size=1, max_size=60),
                        min_size=1, max_size=8))
def test_running_count_and_sum_equal_a_plain_python_reference(value_column, batches):
    operator = KeyedRunningAggregateOperator("agg", "k", value_column, SCHEMA)
    backend = _keyed(operator)
    totals, expected, got = collections.Counter(), [], []
    for rows in batches:
        for k, v in rows:
            totals[k] += 1 if value_column is None else v
            expected.append((k, totals[k]))
        (out,) = operator.process_batch([pa.RecordBatch.from_pylist([{"k": k, "v": v} for k, v in rows],
                                                                    schema=SCHEMA)])
        got.extend(zip(out.column(0).to_pylist(), out.column(1).to_pylist()))
    assert got == expected  # input order kept, every running value exact
    assert backend.get_many(operator.state_name, list(totals)) == list(totals.values())


def test_a_float_key_column_counts_every_nan_as_one_key_across_batches():
    schema = pa.schema([("k", pa.float64()), ("v", pa.int64())])
    operator = KeyedRunningAggregateOperator("agg", "k", None, schema)
    _keyed(operator)
    nan = float("nan")
    counts = []
    for keys in ([nan, 1.5, nan, -0.0], [nan, 0.0, nan]):
        (out,) = operator.process_batch([pa.RecordBatch.from_pylist([{"k": k, "v": 0} for k in keys], schema=schema)])
        counts.append(out.column(1).to_pylist())
    assert counts == [[1, 1, 2, 1], [3, 2, 4]]  # the NaNs count 1, 2, 3, 4; -0.0 and 0.0 are one key


def test_a_running_sum_that_overflows_raises_instead_of_wrapping():
    operator = KeyedRunningAggregateOperator("agg", "k", "v", SCHEMA)
    _keyed(operator)
    batch = pa.RecordBatch.from_pylist([{"k": 1, "v": (1 << 63) - 1}, {"k": 1, "v": 1}], schema=SCHEMA)
    with pytest.raises(pa.ArrowInvalid, match="overflow"):
        operator.process_batch([batch])


def test_a_snapshot_taken_between_batches_holds_the_state_at_that_point():
    """Copy-on-write through put_many: the batch after the barrier must not leak into the snapshot."""
    operator = KeyedRunningAggregateOperator("agg", "k", None, SCHEMA)
    backend = _keyed(operator)
    batch = pa.RecordBatch.from_pylist([{"k": k % 50, "v": 0} for k in range(1000)], schema=SCHEMA)
    operator.process_batch([batch])
    snapshot = backend.snapshot()
    operator.process_batch([batch])  # touches every key group before the snapshot is serialised
    restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    for group, payload in snapshot.serialized():
        restored.restore_key_group(group, payload)
    assert {k: v for _, k, v in restored.entries("count")} == {k: 20 for k in range(50)}
    assert set(backend.get_many("count", list(range(50)))) == {40}


def test_map_batches_infers_its_schema_and_rejects_a_batch_that_breaks_it():
    schema = pa.schema([("value", pa.int64())])
    doubled = infer_output_schema(lambda b: {"twice": pc.multiply(b["value"], 2)}, schema, "m")
    assert doubled == pa.schema([("twice", pa.int64())])
    operator = MapBatchesOperator("m", lambda b: {"twice": pc.cast(b["value"], pa.float64())}, doubled)
    with pytest.raises(TypeError, match=r"schema \[twice: double\].*declared schema \[twice: int64\]"):
        operator.process_batch([pa.record_batch({"value": [1]})])
    with pytest.raises(TypeError, match="Could not infer the output schema.*schema=pa.schema"):
        infer_output_schema(lambda b: b["missing"], schema, "m")

    class NeedsOpen:
        def open(self, runtime_context):
            self.factor = 2

        def __call__(self, batch):
            return {"v": pc.multiply(batch["value"], self.factor)}

    with pytest.raises(TypeError, match=r"has an open\(\) method.*schema="):
        infer_output_schema(NeedsOpen(), schema, "m")


def test_rows_and_batches_convert_both_ways():
    schema = pa.schema([("k", pa.string()), ("n", pa.int64())])
    (batch,) = RowsToBatchesOperator("in", schema).process_batch([("a", 1), ("b", 2)])
    assert batch.schema == schema
    assert BatchesToRowsOperator("out").process_batch([batch]) == [("a", 1), ("b", 2)]
    (one,) = RowsToBatchesOperator("in", pa.schema([("v", pa.int64())])).process_batch([4, 5])
    assert BatchesToRowsOperator("out").process_batch([one]) == [4, 5]
    (by_name,) = RowsToBatchesOperator("in", schema).process_batch([{"n": 3, "k": "c"}])
    assert by_name.to_pylist() == [{"k": "c", "n": 3}]


class _Sent:
    def __init__(self):
        self.batches = []

    def send(self, batches):
        self.batches.extend(batches)


def test_columnar_hash_routing_sends_each_row_to_its_key_groups_subtask_in_order():
    edge = ChainEdge(0, 0, 1, Partitioner("hash", key_column="k"), None, 1, 3, schema=SCHEMA)
    channels = {t: _Sent() for t in range(3)}
    writer = ColumnarEdgeWriter(edge, 0, channels, batch_rows=10_000, max_parallelism=128)
    rows = [{"k": i % 97, "v": i} for i in range(5000)]
    writer.emit([pa.RecordBatch.from_pylist(rows, schema=SCHEMA)])
    assert not any(c.batches for c in channels.values())  # below batch_rows: buffered
    writer.flush()
    for target, channel in channels.items():
        received = [r for b in channel.batches for r in b.to_pylist()]
        assert received == [r for r in rows if subtask_for_key(r["k"], 128, 3) == target]


def test_columnar_codec_merges_a_buffer_into_one_batch():
    codec = ColumnarCodec(SCHEMA)
    merged = codec.encode([pa.RecordBatch.from_pylist([{"k": 1, "v": 2}], schema=SCHEMA)] * 3)
    assert merged.num_rows == 3 and codec.decode(merged) == [merged]
    assert codec.empty.num_rows == 0 and codec.empty.schema == SCHEMA


def test_record_and_columnar_apis_say_which_one_to_use():
    env = StreamExecutionEnvironment.get_execution_environment()
    columnar = env.from_sequence(0, 9, columnar=True)
    with pytest.raises(TypeError, match=r"map\(\) works on records.*map_batches\(\).*to_rows\(\)"):
        columnar.map(lambda x: x)
    with pytest.raises(TypeError, match=r"key column, one of \['value'\]"):
        columnar.key_by(lambda b: b)
    with pytest.raises(TypeError, match="needs an integer column"):
        columnar.map_batches(lambda b: {"f": pc.cast(b["value"], pa.float64())}).key_by("f").sum("f")
    records = env.from_sequence(0, 9)
    with pytest.raises(TypeError, match=r"map_batches\(\) works on columnar streams.*to_columnar"):
        records.map_batches(lambda b: b)
    with pytest.raises(TypeError, match="count\\(\\) works on columnar streams"):
        records.key_by(lambda x: x).count()
    with pytest.raises(TypeError, match="union\\(\\) needs streams of the same kind"):
        columnar.union(records)
    assert columnar.to_rows().get_schema() is None
    assert records.to_columnar(pa.schema([("v", pa.int64())])).get_schema().names == ["v"]
