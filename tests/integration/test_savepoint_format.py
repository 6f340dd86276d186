"""The committed savepoint of metadata format 2 (docs/savepoint-format.md): its keyed state is in typed tables that
pyarrow reads without Chandy, it reads as the state its job had, and a job restored from it ends exact. Any later
Chandy must keep passing these.

``python -m tests.integration.test_savepoint_format DIRECTORY`` wrote it (a job of this module stopped with a
savepoint while both source subtasks were mid-input)."""

from __future__ import annotations

import ast
import os
import pickle
import shutil
import sys

import pyarrow as pa
import pyarrow.dataset as ds

from operators import CollectSink, DiscardingSink, KeyedProcessFunction, SequenceSource
from runtime.common import Row, Types
from runtime.state_api import SavepointReader
from state_backends import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor


FORMAT_2 = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "savepoints", "format-2")
N, KEYS = 10_000, 37
SPAN = Types.ROW_NAMED(["low", "high"], [Types.LONG(), Types.LONG()])


class TypedState(KeyedProcessFunction):
    """Per key (x % 37): its count, its three largest values, counts by parity, the span of its values as a Row,
    and, untyped, the set of residues mod 3 it saw. Each holds the same whatever order two source subtasks' records
    arrive in. Emits every state after each record."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.largest = runtime_context.get_list_state(ListStateDescriptor("largest", Types.LONG()))
        self.by_parity = runtime_context.get_map_state(MapStateDescriptor("by_parity", Types.STRING(), Types.LONG()))
        self.span = runtime_context.get_state(ValueStateDescriptor("span", SPAN))
        self.residues = runtime_context.get_state(ValueStateDescriptor("residues"))

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        largest = sorted(list(self.largest.get()) + [value])[-3:]
        self.largest.update(largest)
        parity = "even" if value % 2 == 0 else "odd"
        self.by_parity.put(parity, (self.by_parity.get(parity) or 0) + 1)
        span = self.span.value()
        self.span.update(Row(low=value, high=value) if span is None
                         else Row(low=min(span.low, value), high=max(span.high, value)))
        self.residues.update((self.residues.value() or frozenset()) | {value % 3})
        yield ctx.get_current_key(), count, largest, dict(self.by_parity.items()), self.span.value(), \
            self.residues.value()


def reference(values) -> dict:
    """``{state: {key: entry}}`` after ``values``, in plain Python."""
    states = {name: {} for name in ("count", "largest", "by_parity", "span", "residues")}
    for value in values:
        key = value % KEYS
        states["count"][key] = states["count"].get(key, 0) + 1
        states["largest"][key] = sorted(states["largest"].get(key, []) + [value])[-3:]
        parity = states["by_parity"].setdefault(key, {})
        name = "even" if value % 2 == 0 else "odd"
        parity[name] = parity.get(name, 0) + 1
        low, high = states["span"].get(key, (value, value))
        states["span"][key] = (min(low, value), max(high, value))
        states["residues"][key] = states["residues"].get(key, frozenset()) | {value % 3}
    states["span"] = {k: Row(low=low, high=high) for k, (low, high) in states["span"].items()}
    return states


def job(env, source, sink):
    env.from_source(source, "numbers").uid("numbers").key_by(lambda x: x % KEYS).process(TypedState()) \
        .uid("typed").sink_to(sink).uid("sink")
    return sink


def _read_so_far(savepoint: SavepointReader) -> list[int]:
    """The values the savepoint's two source subtasks had read: each position is ``[(next, end, step)]``."""
    values = []
    for subtask, (start, end) in enumerate([(0, N // 2), (N // 2, N)]):
        position = savepoint.checkpoint.operator("numbers").source_positions[subtask]
        (next_value, split_end, _), = ast.literal_eval(position)
        assert split_end == end
        values.extend(range(start, next_value))
    return values


def test_the_committed_format_2_savepoint_holds_typed_tables_that_read_as_its_jobs_state():
    reader = SavepointReader.read(FORMAT_2)
    read = _read_so_far(reader)
    assert 0 < len(read) < N, "taken while the job was reading"
    expected = reference(read)
    for name, entries in expected.items():
        table = reader.keyed_state("typed", name)
        got = dict(zip(table.column("key").to_pylist(), table.column(table.column_names[1]).to_pylist()))
        if table.column_names[1] == "value_pickled":  # sets and Rows: the reader gives their pickled bytes
            got = {k: pickle.loads(v) for k, v in got.items()}
        elif name == "by_parity":  # a map column: pairs
            got = {k: dict(v) for k, v in got.items()}
        assert got == entries, name

    typed = {"count": pa.int64(), "largest": pa.list_(pa.int64()), "by_parity": pa.map_(pa.string(), pa.int64()),
             "span": SPAN.to_arrow()}
    handles = reader.checkpoint.operator("typed").handles
    for handle in handles:
        assert {t.state for t in handle.tables} == set(expected), "every keyed state in a table"
    for name, arrow_type in typed.items():
        directory = os.path.dirname(os.path.join(FORMAT_2, next(t.path for t in handles[0].tables if t.state == name)))
        table = ds.dataset(directory, format="arrow").to_table()
        assert table.schema.field("value").type == arrow_type, name
        assert table.column("value_pickled").null_count == table.num_rows, f"{name}: every entry typed"
        assert table.schema.field("key").type == pa.int64()
    count = ds.dataset(os.path.dirname(os.path.join(FORMAT_2, handles[0].tables[0].path)), format="arrow")
    assert count.schema.field("key_group").type == pa.int32()


def test_the_committed_format_2_savepoint_restores_and_its_job_ends_exact(env, tmp_path):
    savepoint = shutil.copytree(FORMAT_2, tmp_path / "format-2")
    read = _read_so_far(SavepointReader.read(str(savepoint)))
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = job(env, SequenceSource(0, N - 1), CollectSink("states"))
    result = env.execute("format-2", restore_from=str(savepoint))
    emitted = list(result.collected(sink))
    assert len(emitted) == N - len(read), "only the records after the savepoint"
    final = {}
    for key, count, largest, by_parity, span, residues in emitted:
        if count > final.get(key, (0,))[0]:
            final[key] = (count, largest, by_parity, span, residues)
    expected = reference(range(N))
    assert final == {key: tuple(expected[name][key] for name in ("count", "largest", "by_parity", "span", "residues"))
                     for key in range(KEYS)}


def write_savepoint(directory: str) -> None:
    """Run the job until two checkpoints completed, both sources mid-input, and stop it with a savepoint moved to
    ``directory``."""
    import tempfile

    from runtime.datastream import StreamExecutionEnvironment
    from tests.integration.paced import PacedSource
    from tests.integration.waiting import wait_for

    work = tempfile.mkdtemp()
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(work, "ck"))
    job(env, PacedSource(SequenceSource(0, N - 1), per_checkpoint=1000, together=os.path.join(work, "paced")),
        DiscardingSink())
    client = env.execute_async("format-2")
    wait_for(lambda: len(client._run.coordinator.completed_checkpoints()) >= 2, what="two checkpoints")
    savepoint = client.stop_with_savepoint(os.path.join(work, "savepoints"))
    client.get_job_execution_result()
    shutil.move(savepoint.removeprefix("file://"), directory)
    print(f"wrote {directory}")


if __name__ == "__main__":
    write_savepoint(sys.argv[1])
