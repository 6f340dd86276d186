import dataclasses

import pyarrow as pa
import pytest

from runtime.errors import RecordEncodingError, StateUsageError
from runtime.keys.key_groups import assign_to_key_group, key_group_range
from runtime.network.codec import RecordCodec
from runtime.types import Row, Types
from state_backends import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float


def roundtrip(codec, records):
    batch = codec.encode(records)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, codec.schema) as writer:
        writer.write_batch(batch)
    reader = pa.ipc.open_stream(sink.getvalue())
    return codec.decode(reader.read_next_batch())


def test_untyped_records_of_many_python_types_roundtrip():
    records = [(1, "a"), {"k": [1, 2]}, Reading("s1", 2.5), None, b"x" * 3_000_000, 7, 1.5, "text",
               Row.of(["a", "b"], [1, 2])]
    out = roundtrip(RecordCodec(None), records)
    assert out == records
    assert out[-1].a == 1


@pytest.mark.parametrize("type_info,records", [
    (Types.LONG(), [1, -2, 2 ** 62]),
    (Types.STRING(), ["a", "", "ü"]),
    (Types.DOUBLE(), [0.5, -1e300]),
    (Types.BOOLEAN(), [True, False]),
    (Types.LIST(Types.INT()), [[1, 2], []]),
])
def test_scalar_typed_edges_use_typed_columns(type_info, records):
    codec = RecordCodec(type_info)
    assert codec.typed and codec.schema.field(0).type == type_info.to_arrow()
    assert roundtrip(codec, records) == records


def test_tuple_typed_edges_fall_back_to_pickle_and_keep_tuples():
    codec = RecordCodec(Types.TUPLE([Types.STRING(), Types.LONG()]))
    assert roundtrip(codec, [("a", 1)]) == [("a", 1)]


def test_a_record_that_does_not_fit_its_declared_type_is_named():
    with pytest.raises(RecordEncodingError, match="my-map.*LONG"):
        RecordCodec(Types.LONG(), "my-map").encode([1, "two"])


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return acc[0] + value, acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]


def test_heap_state_is_scoped_to_the_current_key_and_stored_by_key_group():
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    value = backend.get_state(ValueStateDescriptor("v"))
    items = backend.get_state(ListStateDescriptor("l"))
    mapping = backend.get_state(MapStateDescriptor("m"))
    total = backend.get_state(ReducingStateDescriptor("r", lambda a, b: a + b))
    average = backend.get_state(AggregatingStateDescriptor("a", Average()))
    for key in ("x", "y"):
        backend.set_current_key(key)
        for i in range(3):
            value.update(f"{key}{i}")
            items.add(i)
            mapping.put(i, key)
            total.add(i)
            average.add(i)
    backend.set_current_key("x")
    assert value.value() == "x2" and list(items.get()) == [0, 1, 2] and mapping.get(1) == "x"
    assert total.get() == 3 and average.get() == 1.0
    value.clear()
    assert value.value() is None
    backend.set_current_key("z")
    assert value.value() is None and list(items.get()) == [] and mapping.is_empty()
    groups = {group for group, _, _ in backend.entries("l")}
    assert groups == {assign_to_key_group("x", 128), assign_to_key_group("y", 128)}


def test_a_state_name_cannot_change_kind():
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    backend.get_state(ValueStateDescriptor("s"))
    with pytest.raises(StateUsageError, match="own name"):
        backend.get_state(ListStateDescriptor("s"))


def test_print_sink_prefixes_like_flink(capsys):
    from operators import PrintSink

    PrintSink().create_writer(0, 1).write_batch([1])
    PrintSink().create_writer(1, 2).write_batch([(2, "b")])
    PrintSink("out").create_writer(0, 3).write_batch(["c"])
    assert capsys.readouterr().out == "1\n2> (2, 'b')\nout:1> c\n"


def test_keyed_reduce_state_is_exact_at_a_snapshot_between_batches():
    from operators.builtins import KeyedReduceOperator
    from operators.context import SubtaskInfo

    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    reduce = KeyedReduceOperator("sum", None, lambda a, b: a + b, key_selector=lambda x: x % 3)
    reduce.setup(SubtaskInfo("sum", 0, 1, 128, 0), backend)
    reduce.open()
    assert reduce.process_batch([1, 2, 3, 4]) == [1, 2, 3, 5]
    snapshot = backend.snapshot()
    assert reduce.process_batch([6, 7]) == [9, 12]
    restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    for group, payload in snapshot.serialized():
        restored.restore_key_group(group, payload)
    assert sorted((k, v) for _, k, v in restored.entries("reduce")) == [(0, 3), (1, 5), (2, 2)]
    assert sorted((k, v) for _, k, v in backend.entries("reduce")) == [(0, 9), (1, 12), (2, 2)]
