"""Row (PyFlink's ``pyflink.common.Row``), RowKind, the time types, and how their edges encode."""

import collections
import copy
import datetime as dt
import pickle
from decimal import Decimal

import cloudpickle
import pyarrow as pa
import pytest

from runtime.errors import RecordEncodingError
from runtime.network.codec import RecordCodec
from runtime.protocol.records import TimestampedBatch
from runtime.types import Row, RowKind, Types

UTC = dt.timezone.utc
WORD_COUNT = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])


def roundtrip(codec, records):
    """Through an Arrow IPC stream, as records cross to another subtask."""
    batch = codec.encode(records)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, codec.schema) as writer:
        writer.write_batch(batch)
    return codec.decode(pa.ipc.open_stream(sink.getvalue()).read_next_batch())


def deleted(row):
    row.set_row_kind(RowKind.DELETE)
    return row


# -- Row: construction and access ------------------------------------------------------------------------------


def test_a_row_is_made_from_positions_or_from_names_in_the_order_given():
    positional, named = Row(1, "a"), Row(b=1, a="x")
    assert list(positional) == [1, "a"] and len(positional) == 2
    assert list(named) == [1, "x"] and named.as_dict() == {"b": 1, "a": "x"}
    assert list(Row()) == []
    with pytest.raises(ValueError, match="Can not use both args and kwargs"):
        Row(1, a=2)


def test_fields_are_read_by_index_slice_name_and_attribute():
    row = Row(word="spark", count=3, ok=True)
    assert (row[0], row[-1], row[0:2]) == ("spark", True, ["spark", 3])
    assert (row["count"], row.count, row.word) == (3, 3, "spark")
    assert row.get_fields_by_names(["ok", "word"]) == [True, "spark"]


def test_unknown_fields_raise_key_and_value_errors_naming_the_fields():
    row = Row(word="spark")
    with pytest.raises(KeyError, match=r"'count' is not a field of this Row; its fields are \['word'\]"):
        row["count"]
    with pytest.raises(ValueError):  # what PyFlink raises
        row["count"] = 1
    with pytest.raises(KeyError, match="no field names"):
        Row(1)["word"]
    with pytest.raises(AttributeError, match="no field 'count'"):
        row.count
    with pytest.raises(AttributeError):
        row._private
    with pytest.raises(IndexError):
        row[1]
    with pytest.raises(KeyError, match=r"\['count'\] do not exist"):
        row.get_fields_by_names(["count"])


def test_membership_checks_names_of_a_named_row_and_values_of_a_positional_one():
    assert "word" in Row(word="spark") and "spark" not in Row(word="spark")
    assert "spark" in Row("spark") and 0 not in Row("spark")


def test_a_row_of_names_makes_named_rows_like_a_class():
    Point = Row("x", "y")
    assert repr(Point) == "<Row('x', 'y')>" and "x" in Point
    point = Point(1, 2)
    assert point == Row(x=1, y=2) and point.x == 1 and repr(point) == "Row(x=1, y=2)"
    assert Point(1).as_dict() == {"x": 1}  # fewer values than names, as PyFlink allows
    with pytest.raises(ValueError, match="expected 2 values but got"):
        Point(1, 2, 3)


def test_rows_are_mutable_by_index_and_name_but_not_by_attribute():
    row = Row(a=1, b=2)
    row[0] = 5
    row["b"] += 1
    assert row == Row(a=5, b=3)
    with pytest.raises(AttributeError):  # as in PyFlink
        row.a = 7
    with pytest.raises(AttributeError):
        row.new_field = 7
    row.set_field_names(["x", "y"])
    assert row.x == 5 and row.as_dict() == {"x": 5, "y": 3}


def test_row_kind_defaults_to_insert_and_prints_as_flink_does():
    row = Row(1)
    assert row.get_row_kind() is RowKind.INSERT
    row.set_row_kind(RowKind.UPDATE_AFTER)
    assert row.get_row_kind() is RowKind.UPDATE_AFTER
    assert [str(kind) for kind in RowKind] == ["+I", "-U", "+U", "-D"]
    assert [kind.value for kind in RowKind] == [0, 1, 2, 3]


def test_repr_names_the_fields_or_marks_a_positional_row():
    assert repr(Row(a=1, b="x")) == "Row(a=1, b='x')"
    assert repr(Row(1, "x")) == "<Row(1, 'x')>"
    assert repr(Row(k=Row(1))) == "Row(k=<Row(1)>)"


def test_as_dict_converts_nested_rows_only_when_recursive():
    row = Row(key=1, value=Row(name="a"), many=[Row(n=1)], by={"k": Row(n=2)})
    assert row.as_dict() == {"key": 1, "value": Row(name="a"), "many": [Row(n=1)], "by": {"k": Row(n=2)}}
    assert row.as_dict(recursive=True) == {"key": 1, "value": {"name": "a"}, "many": [{"n": 1}],
                                           "by": {"k": {"n": 2}}}
    with pytest.raises(TypeError, match="without field names"):
        Row(1).as_dict()


# -- Row: equality, hashing, pickling -------------------------------------------------------------------------


def test_equality_takes_in_values_names_and_kind_and_never_equals_a_tuple():
    assert Row(a=1, b=2) == Row(a=1, b=2) and Row(1, 2) == Row(1, 2)
    assert Row(a=1, b=2) != Row(b=1, a=2)
    assert Row(a=1) != Row(1)
    assert Row(a=1) != deleted(Row(a=1))
    assert Row(1, 2) != (1, 2) and (1, 2) != Row(1, 2) and Row(1, 2) != [1, 2]


def test_the_hash_is_the_hash_of_the_values_so_rows_work_as_dict_keys():
    assert hash(Row(a=1, b="x")) == hash(Row(1, "x")) == hash((1, "x"))
    counts = {Row(a=1): "one"}
    assert counts[Row(a=1)] == "one" and Row(1) not in counts and len({Row(1), Row(1), Row(2)}) == 2


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_rows_pickle_with_names_and_kind(dumps):
    for row in [Row(a=1, b=[2]), Row(1, "x"), deleted(Row(a=None)), Row(nested=Row(1))]:
        back = pickle.loads(dumps(row))
        assert back == row and repr(back) == repr(row) and back.get_row_kind() is row.get_row_kind()
    back = pickle.loads(dumps(Row(a=1)))
    back["a"] = 2  # still mutable
    assert back.a == 2
    assert len(pickle.dumps(Row(word="spark", count=3), protocol=5)) < 90


def test_copies_do_not_share_values_and_row_of_still_builds_rows():
    row = Row(a=[1])
    shallow, deep = copy.copy(row), copy.deepcopy(row)
    shallow[0] = "changed"
    deep["a"].append(2)
    assert row == Row(a=[1]) and shallow.a == "changed" and deep.a == [1, 2]
    old_style = Row.of(("a", "b"), (1, 2))  # how Rows were pickled before: Row.of(names, tuple of values)
    old_style[0] = 5
    assert old_style == Row(a=5, b=2)


def test_row_and_row_kind_are_exported_where_pyflink_has_them():
    import runtime
    import runtime.common
    import runtime.common.types

    assert runtime.Row is runtime.common.Row is runtime.common.types.Row is Row
    assert runtime.RowKind is runtime.common.RowKind is runtime.common.types.RowKind is RowKind


# -- Types -----------------------------------------------------------------------------------------------------


def test_time_types_map_to_arrow_types_exact_to_the_microsecond():
    assert Types.SQL_TIMESTAMP().to_arrow() == pa.timestamp("us")
    assert Types.INSTANT().to_arrow() == pa.timestamp("us", tz="+00:00")
    assert Types.SQL_DATE().to_arrow() == pa.date32()
    assert Types.SQL_TIME().to_arrow() == pa.time64("us")
    assert Types.BIG_DEC().to_arrow() == pa.binary()  # pickled: Arrow's decimals have a fixed scale


def test_row_types_are_rows_named_f0_f1_by_default_and_tuples_are_not():
    row = Types.ROW([Types.INT(), Types.STRING()])
    assert row.field_names == ("f0", "f1") and row.is_row
    assert WORD_COUNT.is_row and not Types.TUPLE([Types.INT()]).is_row and not Types.LONG().is_row


# -- Codec: Row edges -----------------------------------------------------------------------------------------


def test_row_named_edges_deliver_rows_named_as_declared_from_rows_tuples_and_lists():
    Pair = collections.namedtuple("Pair", "w c")
    codec = RecordCodec(WORD_COUNT)
    assert codec.rows and codec.row_columns and not codec.typed
    out = roundtrip(codec, [Row(word="a", count=1), Row(count=2, word="b"), Row("c", 3), ("d", 4), ["e", 5],
                            Pair("f", 6), Row(word=None, count=None)])
    assert out == [Row(word=w, count=c) for w, c in zip("abcdef", range(1, 7))] + [Row(word=None, count=None)]
    assert all(type(r) is Row for r in out) and out[0].word == "a"
    out[0][1] = 10  # arrives mutable
    assert out[0].count == 10


def test_row_edges_name_fields_f0_f1_and_keep_row_kinds():
    codec = RecordCodec(Types.ROW([Types.INT(), Types.STRING()]))
    out = roundtrip(codec, [Row(1, "a"), deleted(Row(2, "b")), (3, "c")])
    assert out == [Row(f0=1, f1="a"), deleted(Row(f0=2, f1="b")), Row(f0=3, f1="c")]
    assert [r.get_row_kind() for r in out] == [RowKind.INSERT, RowKind.DELETE, RowKind.INSERT]


def test_rows_with_fields_arrow_cannot_return_unchanged_travel_pickled_and_nested_rows_are_named():
    inner = Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.INT()])
    codec = RecordCodec(Types.ROW_NAMED(["id", "point", "blob", "price"],
                                        [Types.LONG(), inner, Types.PICKLED_BYTE_ARRAY(), Types.BIG_DEC()]))
    assert codec.rows and not codec.row_columns
    out = roundtrip(codec, [(1, (2, 3), {"any": object.__name__}, Decimal("1.50")),
                            deleted(Row(id=2, point=deleted(Row(y=5, x=4)), blob=None, price=None)),
                            (3, None, None, None)])
    assert out == [Row(id=1, point=Row(x=2, y=3), blob={"any": "object"}, price=Decimal("1.50")),
                   deleted(Row(id=2, point=deleted(Row(x=4, y=5)), blob=None, price=None)),
                   Row(id=3, point=None, blob=None, price=None)]
    assert str(out[0].price) == "1.50"


@pytest.mark.parametrize("columns", [True, False])
def test_row_edges_keep_event_timestamps(columns):
    codec = RecordCodec(WORD_COUNT if columns else Types.ROW_NAMED(["blob"], [Types.PICKLED_BYTE_ARRAY()]))
    assert codec.row_columns is columns
    records = [("a", 1), ("b", 2)] if columns else [("a",), ("b",)]
    out = roundtrip(codec, TimestampedBatch.of(records, [1_000, None]))
    assert type(out) is TimestampedBatch and out.timestamps == [1_000, None] and type(out[0]) is Row


def test_rows_pickled_as_objects_on_an_untyped_edge_survive_too():
    out = roundtrip(RecordCodec(None), [Row(a=1), deleted(Row(2))])
    assert out == [Row(a=1), deleted(Row(2))]


def test_a_row_of_time_fields_round_trips_exactly():
    codec = RecordCodec(Types.ROW_NAMED(["at", "when", "day", "clock"], [
        Types.SQL_TIMESTAMP(), Types.INSTANT(), Types.SQL_DATE(), Types.SQL_TIME()]))
    assert codec.row_columns
    record = Row(at=dt.datetime(2024, 2, 29, 23, 59, 59, 999_999), when=dt.datetime(2024, 1, 1, 12, tzinfo=UTC),
                 day=dt.date(2024, 2, 29), clock=dt.time(23, 59, 59, 1))
    assert roundtrip(codec, [record, Row(at=None, when=None, day=None, clock=None)]) == [
        record, Row(at=None, when=None, day=None, clock=None)]


# -- Codec: time edges ----------------------------------------------------------------------------------------


def test_sql_timestamp_edges_carry_naive_datetimes_exactly():
    values = [dt.datetime(2024, 1, 1, 12, 0, 0, 1_500), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59,
                                                                                            59, 999_999), None]
    codec = RecordCodec(Types.SQL_TIMESTAMP())
    assert codec.typed
    out = roundtrip(codec, values)
    assert out == values and all(v is None or (type(v) is dt.datetime and v.tzinfo is None) for v in out)


def test_instant_edges_carry_aware_datetimes_and_deliver_them_in_utc():
    plus_two = dt.timezone(dt.timedelta(hours=2))
    values = [dt.datetime(2024, 1, 1, 12, 0, 0, 7, tzinfo=plus_two), dt.datetime(2024, 1, 1, tzinfo=UTC), None]
    out = roundtrip(RecordCodec(Types.INSTANT()), values)
    assert out == values  # the same points in time
    assert out[0] == dt.datetime(2024, 1, 1, 10, 0, 0, 7, tzinfo=UTC) and out[0].tzinfo is UTC
    assert out[1].tzinfo is UTC and out[2] is None


def test_date_and_time_edges_round_trip_exactly():
    dates = [dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(9999, 12, 31), None]
    times = [dt.time(0, 0), dt.time(23, 59, 59, 999_999), None]
    assert roundtrip(RecordCodec(Types.SQL_DATE()), dates) == dates
    out = roundtrip(RecordCodec(Types.SQL_TIME()), times)
    assert out == times and type(out[0]) is dt.time


def test_big_decimals_travel_pickled_and_keep_their_exact_value():
    values = [Decimal("1.50"), Decimal("1E+50"), Decimal("-0.000000000000000000000001")]
    codec = RecordCodec(Types.BIG_DEC())
    assert not codec.typed
    assert [str(v) for v in roundtrip(codec, values)] == ["1.50", "1E+50", "-1E-24"]


def test_time_edges_keep_event_timestamps():
    out = roundtrip(RecordCodec(Types.SQL_DATE()), TimestampedBatch.of([dt.date(2024, 1, 1)], [5]))
    assert out == [dt.date(2024, 1, 1)] and out.timestamps == [5]


# -- Codec: records that do not fit ---------------------------------------------------------------------------


@pytest.mark.parametrize("type_info,value,fix", [
    (Types.SQL_TIMESTAMP(), dt.datetime(2024, 1, 1, tzinfo=UTC), r"declare Types\.INSTANT\(\)"),
    (Types.SQL_TIMESTAMP(), 1_700_000_000_000, "naive datetime.datetime values"),
    (Types.SQL_TIMESTAMP(), dt.date(2024, 1, 1), "naive datetime.datetime values"),
    (Types.INSTANT(), dt.datetime(2024, 1, 1), r"value\.replace\(tzinfo=timezone\.utc\)"),
    (Types.INSTANT(), "2024-01-01T00:00:00Z", "timezone-aware"),
    (Types.SQL_DATE(), dt.datetime(2024, 1, 1, 12), r"value\.date\(\)"),
    (Types.SQL_DATE(), 19_000, "datetime.date values"),
    (Types.SQL_TIME(), dt.time(1, tzinfo=UTC), "naive datetime.time"),
    (Types.SQL_TIME(), 3_600, "naive datetime.time"),
])
def test_a_value_that_does_not_fit_a_time_edge_is_named_with_the_fix(type_info, value, fix):
    with pytest.raises(RecordEncodingError, match=f"'emit-times' declared output_type={type_info!r}.*{fix}"):
        RecordCodec(type_info, "emit-times").encode([None, value])


@pytest.mark.parametrize("record,message", [
    (("a",), r"\('a',\) has 1 fields where the declared type has 2: \['word', 'count'\]"),
    (Row(word="a", n=1), r"has the fields \['word', 'n'\] where the declared type has \['word', 'count'\]"),
    ({"word": "a", "count": 1}, r"\(builtins.dict\) where a Row, or a tuple of the 2 fields"),
    (None, "where a Row, or a tuple"),
    (("a", "one"), "field 'count': .*Fix the records or the declared output_type"),
    (Row(word=1, count=1), "field 'word': "),
])
def test_a_record_that_does_not_fit_a_row_edge_is_named(record, message):
    with pytest.raises(RecordEncodingError, match=f"Operator 'counts' declared output_type=ROW_NAMED.*{message}"):
        RecordCodec(WORD_COUNT, "counts").encode([("ok", 1), record])


def test_a_time_field_of_a_row_that_does_not_fit_is_named_with_its_field():
    codec = RecordCodec(Types.ROW_NAMED(["at"], [Types.SQL_TIMESTAMP()]), "stamp")
    with pytest.raises(RecordEncodingError, match="field 'at': .*Types.INSTANT"):
        codec.encode([Row(at=dt.datetime(2024, 1, 1, tzinfo=UTC))])
