"""The row formats of runtime.datastream.formats: JSON, CSV and Avro, both ways, with PyFlink's builders."""

import datetime
import decimal
import pickle

import pytest

from runtime.common.serialization import ByteArraySchema, RowFieldExtractorSchema, SimpleStringSchema
from runtime.datastream.formats.avro import AvroRowDeserializationSchema, AvroRowSerializationSchema
from runtime.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from runtime.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from runtime.errors import ConfigurationError, MalformedRecordError
from runtime.types import Row, Types

ORDER = Types.ROW_NAMED(
    ["id", "item", "price", "paid", "at", "day", "tags", "attributes", "customer", "amount"],
    [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.SQL_TIMESTAMP(), Types.SQL_DATE(),
     Types.LIST(Types.STRING()), Types.MAP(Types.STRING(), Types.INT()),
     Types.ROW_NAMED(["name", "since"], [Types.STRING(), Types.INT()]), Types.BIG_DEC()])
AN_ORDER = Row.of(ORDER.field_names, [7, "lamp", 19.5, True, datetime.datetime(2024, 5, 1, 12, 30, 15, 250000),
                                      datetime.date(2024, 5, 1), ["home", "light"], {"w": 40},
                                      Row.of(["name", "since"], ["ann", 2019]), decimal.Decimal("19.5")])


def test_json_round_trips_every_field_type_by_name():
    serializer = JsonRowSerializationSchema.builder().with_type_info(ORDER).build()
    deserializer = JsonRowDeserializationSchema.builder().type_info(ORDER).build()
    assert deserializer.deserialize(serializer.serialize(AN_ORDER)) == AN_ORDER
    record = deserializer.deserialize(b'{"id": "8", "paid": "false", "customer": {"name": "bo"}}')
    assert record.id == 8 and record.paid is False and record.customer == Row.of(["name", "since"], ["bo", None])
    assert record.item is None, "a missing field is None"


def test_json_errors_name_the_message_and_the_field_and_can_be_ignored():
    strict = JsonRowDeserializationSchema.builder().type_info(ORDER).fail_on_missing_field().build()
    with pytest.raises(MalformedRecordError, match="Could not find field with name 'item'"):
        strict.deserialize(b'{"id": 1}')
    plain = JsonRowDeserializationSchema.builder().type_info(ORDER).build()
    with pytest.raises(MalformedRecordError, match="field 'id' is not LONG"):
        plain.deserialize(b'{"id": "seven"}')
    with pytest.raises(MalformedRecordError, match="ignore_parse_errors"):
        plain.deserialize(b"{broken")
    lenient = JsonRowDeserializationSchema.builder().type_info(ORDER).ignore_parse_errors().build()
    assert lenient.deserialize(b"{broken") is None and lenient.deserialize(b'{"id": "seven"}').id is None
    with pytest.raises(ConfigurationError, match="contradict"):
        JsonRowDeserializationSchema.builder().type_info(ORDER).ignore_parse_errors().fail_on_missing_field().build()
    with pytest.raises(ConfigurationError, match="must be a row"):
        JsonRowDeserializationSchema.builder().type_info(Types.LONG()).build()


def test_json_schema_documents_give_the_row_type():
    schema = JsonRowDeserializationSchema.builder().json_schema(
        '{"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": '
        '{"type": "string"}}, "at": {"type": "string", "format": "date-time"}}}').build()
    assert schema.deserialize(b'{"n": 3, "tags": ["a"], "at": "2024-01-01T00:00:00Z"}') == \
        Row.of(["n", "tags", "at"], [3, ["a"], datetime.datetime(2024, 1, 1)])


def test_csv_round_trips_by_position_with_arrays_nested_rows_and_nulls():
    serializer = CsvRowSerializationSchema.Builder(ORDER).set_null_literal("NULL").build()
    deserializer = CsvRowDeserializationSchema.Builder(ORDER).set_null_literal("NULL").build()
    no_map = Row.of(ORDER.field_names, [*list(AN_ORDER)[:7], None, *list(AN_ORDER)[8:]])
    line = serializer.serialize(no_map)
    assert line.endswith(b"\n") and b"NULL" in line
    assert deserializer.deserialize(line) == no_map
    with pytest.raises(MalformedRecordError, match="Row length mismatch. 10 fields expected but was 2"):
        deserializer.deserialize(b"1,2")
    lenient = CsvRowDeserializationSchema.Builder(ORDER).set_ignore_parse_errors(True).build()
    assert lenient.deserialize(b"1,2") is None
    commented = CsvRowDeserializationSchema.Builder(Types.ROW([Types.INT()])).set_allow_comments(True).build()
    assert commented.deserialize(b"# a comment") is None and commented.deserialize(b"5") == Row.of(["f0"], [5])


def test_csv_options_follow_flinks_names():
    row_type = Types.ROW([Types.STRING(), Types.STRING()])
    serializer = (CsvRowSerializationSchema.Builder(row_type).set_field_delimiter("|").set_quote_character("'")
                  .set_line_delimiter("\r\n").build())
    assert serializer.serialize(("a|b", "c")) == b"'a|b'|c\r\n"
    assert CsvRowDeserializationSchema.Builder(row_type).set_field_delimiter("|").set_quote_character("'").build() \
        .deserialize(b"'a|b'|c\r\n") == Row.of(["f0", "f1"], ["a|b", "c"])
    with pytest.raises(ConfigurationError, match="one character"):
        CsvRowSerializationSchema.Builder(row_type).set_field_delimiter("||")
    with pytest.raises(ConfigurationError, match="line delimiter"):
        CsvRowSerializationSchema.Builder(row_type).set_line_delimiter(";")


AVRO = """{"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [{"name": "name", "type": "string"}]}},
    {"name": "referrer", "type": ["null", "Customer"]}]}"""


def test_avro_round_trips_by_position_or_name_and_pickles_for_the_executors():
    serializer = pickle.loads(pickle.dumps(AvroRowSerializationSchema(avro_schema_string=AVRO)))
    deserializer = pickle.loads(pickle.dumps(AvroRowDeserializationSchema(avro_schema_string=AVRO)))
    by_position = serializer.serialize((1, None, ["x"], Row(name="ann"), ("bo",)))
    by_name = serializer.serialize({"id": 1, "item": None, "tags": ["x"], "customer": {"name": "ann"},
                                    "referrer": {"name": "bo"}})
    assert by_position == by_name
    assert deserializer.deserialize(by_position) == Row.of(
        ["id", "item", "tags", "customer", "referrer"], [1, None, ["x"], Row(name="ann"), Row(name="bo")])
    with pytest.raises(MalformedRecordError, match="does not fit the Avro schema Order"):
        serializer.serialize((1, 2))
    with pytest.raises(ConfigurationError, match="Java SpecificRecord class"):
        AvroRowDeserializationSchema(record_class="com.acme.Order")
    with pytest.raises(ConfigurationError, match="does not parse"):
        AvroRowSerializationSchema(avro_schema_string='{"type": "record"}')


def test_plain_schemas_and_the_field_extractor():
    assert SimpleStringSchema().deserialize(SimpleStringSchema().serialize("héllo")) == "héllo"
    assert ByteArraySchema().serialize(bytearray(b"ab")) == b"ab"
    with pytest.raises(TypeError, match="holds a str, not bytes"):
        RowFieldExtractorSchema(0).serialize(Row("text"))
    with pytest.raises(ValueError):
        RowFieldExtractorSchema(-1)
