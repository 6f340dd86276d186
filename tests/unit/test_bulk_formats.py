"""PyFlink's bulk file formats (Parquet, ORC, Avro, CSV with a schema) on Chandy's exactly-once FileSink and
FileSource.

No Spark here: built sinks are driven as the runtime drives them (a writer: open, write_batch, snapshot_state at the
barrier, notify_checkpoint_complete), their committed files read back by independent readers (pyarrow, fastavro,
the csv module); built sources' readers are polled, snapshotted mid-file and restored.
"""

import csv
import datetime
import decimal
import io
import os
import sys
import time

import cloudpickle
import fastavro
import pyarrow as pa
import pyarrow.orc
import pyarrow.parquet as pq
import pytest

from runtime.common import Configuration, Row, Types, WatermarkStrategy
from runtime.common.serialization import BulkWriterFactory, RowDataBulkWriterFactory
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.file_system import (
    BulkFormat,
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
    StreamingFileSink,
)
from runtime.datastream.formats.avro import AvroBulkWriters, AvroInputFormat, AvroSchema, GenericRecordAvroTypeInfo
from runtime.datastream.formats.csv import CsvBulkWriters, CsvReaderFormat, CsvSchema
from runtime.datastream.formats.orc import OrcBulkWriters
from runtime.datastream.formats.parquet import (
    AvroParquetReaders,
    AvroParquetWriters,
    ParquetBulkWriters,
    ParquetColumnarRowInputFormat,
)
from runtime.errors import ApiUsageError, ConfigurationError, MalformedRecordError, RecordEncodingError
from runtime.table import DataTypes

UTC = datetime.timezone.utc

# -- what the tests write ------------------------------------------------------------------------------------

ROW_TYPE = DataTypes.ROW([
    DataTypes.FIELD("char", DataTypes.CHAR(10)),
    DataTypes.FIELD("varchar", DataTypes.VARCHAR(10)),
    DataTypes.FIELD("binary", DataTypes.BINARY(10)),
    DataTypes.FIELD("bytes", DataTypes.BYTES()),
    DataTypes.FIELD("boolean", DataTypes.BOOLEAN()),
    DataTypes.FIELD("decimal", DataTypes.DECIMAL(2, 0)),
    DataTypes.FIELD("tinyint", DataTypes.TINYINT()),
    DataTypes.FIELD("int", DataTypes.INT().not_null()),
    DataTypes.FIELD("bigint", DataTypes.BIGINT()),
    DataTypes.FIELD("float", DataTypes.FLOAT()),
    DataTypes.FIELD("double", DataTypes.DOUBLE()),
    DataTypes.FIELD("date", DataTypes.DATE().bridged_to("java.sql.Date")),
    DataTypes.FIELD("time", DataTypes.TIME()),
    DataTypes.FIELD("timestamp", DataTypes.TIMESTAMP(3)),
    DataTypes.FIELD("timestamp_ltz", DataTypes.TIMESTAMP_LTZ(3)),
    DataTypes.FIELD("int_array", DataTypes.ARRAY(DataTypes.INT())),
    DataTypes.FIELD("map", DataTypes.MAP(DataTypes.STRING(), DataTypes.BIGINT())),
    DataTypes.FIELD("nested", DataTypes.ROW([DataTypes.FIELD("x", DataTypes.INT())])),
])


def rows(count: int, start: int = 0) -> list:
    return [Row(char="char", varchar=f"v{i}", binary=b"binary", bytes=bytes([i % 256]), boolean=i % 2 == 0,
                decimal=decimal.Decimal("1.5"), tinyint=i % 100, int=2147483647 - i, bigint=-9223372036854775808 + i,
                float=1.5, double=2e-308, date=datetime.date(1970, 1, 1) + datetime.timedelta(days=i),
                time=datetime.time(1, 1, 1, 500), timestamp=datetime.datetime(1970, 1, 2, 3, 4, 5, 600000 + i),
                timestamp_ltz=datetime.datetime(1970, 2, 3, 4, 5, 6, 700000, tzinfo=UTC), int_array=[i, i + 1],
                map={"k": i}, nested=Row(x=i))
            for i in range(start, start + count)]


def as_written(row: Row) -> dict:
    """What an independent Parquet reader gives back for ``row``: decimals rounded half up to the scale."""
    values = row.as_dict(recursive=True)
    values["decimal"] = decimal.Decimal("2")
    values["map"] = list(values["map"].items())
    return values


BASIC_AVRO = AvroSchema.parse_string("""{"type": "record", "name": "test", "fields": [
    {"name": "null", "type": "null"}, {"name": "boolean", "type": "boolean"}, {"name": "int", "type": "int"},
    {"name": "long", "type": "long"}, {"name": "float", "type": "float"}, {"name": "double", "type": "double"},
    {"name": "string", "type": "string"},
    {"name": "suit", "type": {"type": "enum", "name": "Suit", "symbols": ["SPADES", "HEARTS", "DIAMONDS"]}},
    {"name": "union", "type": ["int", "double", "null"]},
    {"name": "array", "type": {"type": "array", "items": {"type": "record", "name": "item", "fields": [
        {"name": "int", "type": "int"}, {"name": "double", "type": "double"}]}}},
    {"name": "map", "type": {"type": "map", "values": "long"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}""")


def generic_records(count: int, start: int = 0) -> list:
    unions = (1, 2.5, None)
    return [{"null": None, "boolean": i % 2 == 0, "int": i, "long": 10 ** 12 + i, "float": 2.0, "double": i / 4,
             "string": f"s{i}", "suit": ("SPADES", "HEARTS", "DIAMONDS")[i % 3], "union": unions[i % 3],
             "array": [{"int": i, "double": 0.5}], "map": {"a": i}, "day": datetime.date(2024, 1, 1 + i % 28)}
            for i in range(start, start + count)]


CSV_SCHEMA = (CsvSchema.builder()
              .add_number_column("id", DataTypes.INT())
              .add_string_column("name")
              .add_number_column("price", DataTypes.DECIMAL(4, 1))
              .add_boolean_column("ok")
              .add_array_column("tags", separator=";", element_type=DataTypes.STRING())
              .set_column_separator("|")
              .set_use_header()
              .build())


def csv_rows(count: int, start: int = 0) -> list:
    return [Row(id=i, name=f"n|{i}" if i % 2 else f"line\nbreak {i}", price=decimal.Decimal(i) / 4,
                ok=i % 3 == 0, tags=[f"t{i}", "u"])
            for i in range(start, start + count)]


def as_csv_row(row: Row) -> Row:
    return Row(id=row.id, name=row.name, price=decimal.Decimal(row.price).quantize(decimal.Decimal("0.1"),
                                                                                  decimal.ROUND_HALF_UP),
               ok=row.ok, tags=row.tags)


# -- driving sinks and sources ---------------------------------------------------------------------------------


def commit_by_a_checkpoint(sink, batches, checkpoint_id=1) -> list:
    """Write ``batches`` through the sink's writer, checkpoint, and complete the checkpoint; the committed paths.
    Before the completion, nothing may be visible."""
    sink.validate()
    writer = sink.create_writer(subtask_index=0, parallelism=1)
    writer.open(None)
    for batch in batches:
        writer.write_batch(batch)
    writer.snapshot_state(checkpoint_id)
    assert sink.committed_files() == []
    writer.notify_checkpoint_complete(checkpoint_id)
    writer.close()
    return sink.committed_files()


def poll_all(reader) -> list:
    records = []
    while (batch := reader.poll(4)) is not None:
        records.extend(batch)
    return records


def read_source(source) -> list:
    reader = source.create_reader(0, 1)
    reader.open(None)
    records = poll_all(reader)
    reader.close()
    return records


def read_resuming_at(source, cut: int) -> tuple[list, list]:
    """The first ``cut`` records, then the rest as a reader restored from a snapshot taken there reads them."""
    reader = source.create_reader(0, 1)
    reader.open(None)
    head = []
    while len(head) < cut:
        batch = reader.poll(cut - len(head))
        assert batch is not None, f"the file ended before record {cut}"
        head.extend(batch)
    state = cloudpickle.loads(cloudpickle.dumps(reader.snapshot_state()))
    reader.close()
    restored = cloudpickle.loads(cloudpickle.dumps(source)).create_reader(0, 1)
    restored.restore_state(state)
    restored.open(None)
    rest = poll_all(restored)
    restored.close()
    return head, rest


def open_file(sink, path):
    return sink.fs.open(path, "rb")


# -- each writer factory, read back independently --------------------------------------------------------------


def test_parquet_bulk_writers_write_rows_of_the_row_type(tmp_path):
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), ParquetBulkWriters.for_row_type(ROW_TYPE)).build()
    written = rows(5)
    (path,) = commit_by_a_checkpoint(sink, [written[:2], written[2:]])
    table = pq.read_table(open_file(sink, path))
    assert table.schema == ROW_TYPE.to_arrow_schema()
    assert table.to_pylist() == [as_written(row) for row in written]
    assert table.schema.field("timestamp").type == pa.timestamp("us")  # the wall clock, not an instant
    assert table.schema.field("timestamp_ltz").type.tz is not None


def test_orc_bulk_writers_write_rows_of_the_row_type(tmp_path):
    row_type = DataTypes.ROW([field for field in ROW_TYPE if field.name != "time"])  # ORC has no time of day
    properties = Configuration().set_string("orc.compress", "ZSTD").set_string("orc.bloom.filter.columns", "int")
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), OrcBulkWriters.for_row_type(row_type, properties)).build()
    written = [Row.of(row_type.field_names(), [row[name] for name in row_type.field_names()]) for row in rows(4)]
    (path,) = commit_by_a_checkpoint(sink, [written])
    table = pyarrow.orc.read_table(open_file(sink, path))
    read = [dict(record, timestamp=record["timestamp"].to_pydatetime(), timestamp_ltz=None)
            for record in table.to_pylist()]
    expected = [dict(as_written(row), timestamp_ltz=None) for row in written]
    assert read == expected
    assert table.column("timestamp_ltz").cast(pa.timestamp("us", tz="UTC")).to_pylist()[0] == \
        datetime.datetime(1970, 2, 3, 4, 5, 6, 700000, tzinfo=UTC)


def test_avro_bulk_writers_write_avro_data_files_of_generic_records(tmp_path):
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), AvroBulkWriters.for_generic_record(BASIC_AVRO)).build()
    written = generic_records(6)
    (path,) = commit_by_a_checkpoint(sink, [written[:3], written[3:]])
    with open_file(sink, path) as file:
        reader = fastavro.reader(file)
        assert reader.writer_schema["name"] == "test"
        assert list(reader) == written


def test_avro_parquet_writers_lay_records_out_as_parquet_avro(tmp_path):
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), AvroParquetWriters.for_generic_record(BASIC_AVRO)).build()
    written = generic_records(3)
    (path,) = commit_by_a_checkpoint(sink, [written])
    table = pq.read_table(open_file(sink, path))
    assert table.schema.field("union").type == pa.struct([("member0", pa.int32()), ("member1", pa.float64())])
    assert table.column("union").to_pylist() == [{"member0": 1, "member1": None}, {"member0": None, "member1": 2.5},
                                                 None]
    assert table.column("suit").to_pylist() == ["SPADES", "HEARTS", "DIAMONDS"]
    assert table.column("map").to_pylist() == [[("a", i)] for i in range(3)]
    assert table.column("day").type == pa.date32()


def test_csv_bulk_writers_write_a_header_and_typed_columns(tmp_path):
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), CsvBulkWriters.for_schema(CSV_SCHEMA)).build()
    written = csv_rows(4)
    (path,) = commit_by_a_checkpoint(sink, [written[:1], written[1:]])
    text = sink.fs.cat_file(path).decode()
    lines = list(csv.reader(io.StringIO(text), delimiter="|"))
    assert lines[0] == ["id", "name", "price", "ok", "tags"]
    assert lines[1:] == [[str(r.id), r.name, str(as_csv_row(r).price), "true" if r.ok else "false", ";".join(r.tags)]
                         for r in written]
    assert '"n|1"' in text  # the separator inside a value is quoted


def test_pyflinks_csv_bulk_writer_output():
    """PyFlink's own expectations (test_csv.py), where Python and Java agree on the text."""
    schema = (CsvSchema.builder().add_number_column("tinyint", DataTypes.TINYINT())
              .add_number_column("int", DataTypes.INT()).add_number_column("decimal", DataTypes.DECIMAL(2, 0))
              .add_boolean_column("boolean").add_string_column("string").build())
    out = io.BytesIO()
    CsvBulkWriters.for_schema(schema).create(out).add_elements([(127, 2147483647, decimal.Decimal("1.5"), True,
                                                                 "string")])
    assert out.getvalue() == b"127,2147483647,2,true,string\n"
    escaped = CsvSchema.builder().add_string_column("string").add_string_column("string2").set_escape_char("\\") \
        .build()
    out = io.BytesIO()
    CsvBulkWriters.for_schema(escaped).create(out).add_elements([("string,", '"string2"')])
    assert list(csv.reader(io.StringIO(out.getvalue().decode()), escapechar="\\")) == [["string,", '"string2"']]


def test_flinks_writer_settings_are_honoured(tmp_path):
    row_type = DataTypes.ROW([DataTypes.FIELD("n", DataTypes.BIGINT())])
    hadoop = Configuration().set_string("parquet.compression", "GZIP").set_string("parquet.enable.dictionary", "false")
    sink = FileSink.for_bulk_format(str(tmp_path / "parquet"), ParquetBulkWriters.for_row_type(row_type, hadoop)) \
        .build()
    (path,) = commit_by_a_checkpoint(sink, [[Row(n=1)]])
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "GZIP"
    properties = Configuration().set_string("orc.compress", "SNAPPY").set_string("orc.compress.size", "262144")
    sink = FileSink.for_bulk_format(str(tmp_path / "orc"), OrcBulkWriters.for_row_type(row_type, properties)).build()
    (path,) = commit_by_a_checkpoint(sink, [[Row(n=1)]])
    orc_file = pyarrow.orc.ORCFile(path)
    assert (orc_file.compression, orc_file.compression_size) == ("SNAPPY", 262144)


# -- each reader format, from the start and resumed mid-file ---------------------------------------------------


def parquet_source(path):
    return FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(ROW_TYPE, batch_size=3), path).build()


def test_parquet_columnar_rows_round_trip_and_resume_exactly(tmp_path):
    out = str(tmp_path / "out")
    first, second = rows(7), rows(5, start=7)
    sink = FileSink.for_bulk_format(out, ParquetBulkWriters.for_row_type(ROW_TYPE)).build()
    commit_by_a_checkpoint(sink, [first])
    writer_rows = rows(20, start=12)  # a file of several row groups, written by pyarrow itself
    pq.write_table(pa.Table.from_pylist([as_written(r) for r in writer_rows], schema=ROW_TYPE.to_arrow_schema()),
                   os.path.join(out, "zz-by-pyarrow.parquet"), row_group_size=6)
    commit_by_a_checkpoint(FileSink.for_bulk_format(out, ParquetBulkWriters.for_row_type(ROW_TYPE))
                           .with_output_file_config(OutputFileConfig("more", ".parquet")).build(), [second])
    rounded = [Row.of(ROW_TYPE.field_names(), [decimal.Decimal(2) if name == "decimal" else row[name]
                                               for name in ROW_TYPE.field_names()])
               for row in first + second + writer_rows]
    everything = read_source(parquet_source(out))
    assert sorted(everything, key=lambda r: r.varchar) == sorted(rounded, key=lambda r: r.varchar)
    assert type(everything[0]) is Row and everything[0].nested == Row(x=everything[0].nested.x)
    for cut in (1, 3, 7, 13, 18, len(everything) - 1):
        head, rest = read_resuming_at(parquet_source(out), cut)
        assert head + rest == everything, cut


def test_avro_parquet_records_round_trip_and_resume_exactly(tmp_path):
    out = str(tmp_path / "out")
    written = generic_records(9)
    sink = FileSink.for_bulk_format(out, AvroParquetWriters.for_generic_record(BASIC_AVRO)).build()
    commit_by_a_checkpoint(sink, [written[:4], written[4:]])
    source = FileSource.for_record_stream_format(AvroParquetReaders.for_generic_record(BASIC_AVRO), out).build()
    assert read_source(source) == written
    for cut in (1, 4, 8):
        head, rest = read_resuming_at(source, cut)
        assert (head, rest) == (written[:cut], written[cut:])


def test_csv_rows_round_trip_and_resume_exactly(tmp_path):
    out = str(tmp_path / "out")
    written = csv_rows(9)
    sink = FileSink.for_bulk_format(out, CsvBulkWriters.for_schema(CSV_SCHEMA)).build()
    commit_by_a_checkpoint(sink, [written[:5], written[5:]])
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(CSV_SCHEMA), out).build()
    expected = [as_csv_row(row) for row in written]
    assert read_source(source) == expected  # a quoted line break stays in its record
    for cut in (1, 2, 5, 8):
        head, rest = read_resuming_at(source, cut)
        assert (head, rest) == (expected[:cut], expected[cut:])


def test_avro_input_format_reads_avro_data_files_and_resumes_exactly(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    written = generic_records(25)
    with open(out / "blocks.avro", "wb") as file:  # many blocks: a resume skips whole ones
        fastavro.writer(file, BASIC_AVRO._parsed, written, sync_interval=200)
    source = AvroInputFormat(str(out), BASIC_AVRO).as_source()
    assert source.bounded and read_source(source) == written
    for cut in (1, 6, 13, 24):
        head, rest = read_resuming_at(source, cut)
        assert (head, rest) == (written[:cut], written[cut:])


def test_the_avro_reader_schema_resolves_what_the_file_was_written_with(tmp_path):
    reader_schema = AvroSchema.parse_string('{"type": "record", "name": "test", "fields": ['
                                            '{"name": "int", "type": "long"}, '
                                            '{"name": "added", "type": "string", "default": "none"}]}')
    with open(tmp_path / "a.avro", "wb") as file:
        fastavro.writer(file, BASIC_AVRO._parsed, generic_records(2))
    assert read_source(AvroInputFormat(str(tmp_path), reader_schema).as_source()) == \
        [{"int": 0, "added": "none"}, {"int": 1, "added": "none"}]


def test_pyflinks_csv_reader_cases(tmp_path):
    """The cases of PyFlink's test_csv.py: each schema reads its lines as PyFlink's test expects."""
    cases = [
        (CsvSchema.builder().add_number_column("tinyint", DataTypes.TINYINT())
         .add_number_column("float", DataTypes.FLOAT()).add_number_column("double", DataTypes.DOUBLE())
         .add_number_column("decimal", DataTypes.DECIMAL(2, 0)).add_boolean_column("boolean")
         .add_string_column("string").build(),
         "127,3e38,2e-308,1.5,true,string\n",
         [Row(tinyint=127, float=3e38, double=2e-308, decimal=decimal.Decimal(2), boolean=True, string="string")]),
        (CsvSchema.builder().add_array_column("number_array", separator=";", element_type=DataTypes.INT())
         .add_array_column("boolean_array", separator=":", element_type=DataTypes.BOOLEAN())
         .add_array_column("string_array", separator=",", element_type=DataTypes.STRING())
         .set_column_separator("|").disable_quote_char().build(),
         "1;2;3|true:false|a,b,c\n",
         [Row(number_array=[1, 2, 3], boolean_array=[True, False], string_array=["a", "b", "c"])]),
        (CsvSchema.builder().add_string_column("string").set_allow_comments().build(),
         "a\n# this is comment\nb\n", [Row(string="a"), Row(string="b")]),
        (CsvSchema.builder().add_string_column("string").add_number_column("number").set_use_header().build(),
         "h1,h2\nstring,123\n", [Row(string="string", number=123)]),
        (CsvSchema.builder().add_string_column("string").add_number_column("number").set_use_header()
         .set_strict_headers().build(),
         "string,number\nstring,123\n", [Row(string="string", number=123)]),
        (CsvSchema.builder().add_string_column("string").add_string_column("string2").set_column_separator("|")
         .set_quote_char("`").build(),
         "`string`|`string2`\n", [Row(string="string", string2="string2")]),
        (CsvSchema.builder().add_string_column("string").add_string_column("string2").set_escape_char("\\").build(),
         'string\\,,\\"string2\\"\n', [Row(string="string,", string2='"string2"')]),
    ]
    for number, (schema, text, expected) in enumerate(cases):
        (tmp_path / f"case{number}").mkdir()
        (tmp_path / f"case{number}" / "in.csv").write_text(text)
        source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema),
                                                     str(tmp_path / f"case{number}")).build()
        assert read_source(source) == expected, text
    copied = CsvSchema.builder().add_columns_from(cases[0][0]).build()
    assert copied.get_type_info() == cases[0][0].get_type_info()


def test_columns_are_matched_by_name_and_a_missing_one_is_none(tmp_path):
    pq.write_table(pa.table({"ID": [1, 2], "Name": ["a", "b"], "extra": [0.5, 0.5]}), tmp_path / "a.parquet")
    row_type = DataTypes.ROW([DataTypes.FIELD("name", DataTypes.STRING()), DataTypes.FIELD("id", DataTypes.INT()),
                              DataTypes.FIELD("absent", DataTypes.DOUBLE())])
    insensitive = ParquetColumnarRowInputFormat(row_type, is_case_sensitive=False)
    assert read_source(FileSource.for_bulk_file_format(insensitive, str(tmp_path)).build()) == \
        [Row(name="a", id=1, absent=None), Row(name="b", id=2, absent=None)]
    sensitive = FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), str(tmp_path)).build()
    assert read_source(sensitive) == [Row(name=None, id=None, absent=None)] * 2


@pytest.fixture
def shanghai_time(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_int96_instants_become_wall_clock_times_in_utc_or_the_local_zone(tmp_path, shanghai_time):
    noon_utc = datetime.datetime(2020, 1, 1, 12, 0)
    pq.write_table(pa.table({"ts": pa.array([noon_utc], pa.timestamp("us"))}), tmp_path / "a.parquet",
                   use_deprecated_int96_timestamps=True)  # as Spark, Hive and Flink write timestamps
    row_type = DataTypes.ROW([DataTypes.FIELD("ts", DataTypes.TIMESTAMP(3))])

    def read(utc: bool):
        bulk_format = ParquetColumnarRowInputFormat(row_type, is_utc_timestamp=utc)
        return read_source(FileSource.for_bulk_file_format(bulk_format, str(tmp_path)).build())

    assert read(True) == [Row(ts=noon_utc)]
    assert read(False) == [Row(ts=datetime.datetime(2020, 1, 1, 20, 0))]  # Shanghai is UTC+8


# -- exactly once ----------------------------------------------------------------------------------------------


WRITER_FACTORIES = {
    "parquet": (lambda: ParquetBulkWriters.for_row_type(ROW_TYPE), lambda: rows(3)),
    "avro-parquet": (lambda: AvroParquetWriters.for_generic_record(BASIC_AVRO), lambda: generic_records(3)),
    "avro": (lambda: AvroBulkWriters.for_generic_record(BASIC_AVRO), lambda: generic_records(3)),
    "csv": (lambda: CsvBulkWriters.for_schema(CSV_SCHEMA), lambda: csv_rows(3)),
    "orc": (lambda: OrcBulkWriters.for_row_type(DataTypes.ROW([DataTypes.FIELD("n", DataTypes.BIGINT())])),
            lambda: [Row(n=1), Row(n=2)]),
}


@pytest.mark.parametrize("name", sorted(WRITER_FACTORIES))
def test_pre_committed_parts_stay_invisible_until_the_checkpoint_completes(tmp_path, name):
    factory, records = WRITER_FACTORIES[name]
    out = str(tmp_path / "out")
    sink = FileSink.for_bulk_format(out, factory()).build()
    sink.validate()
    writer = sink.create_writer(subtask_index=0, parallelism=1)
    writer.open(None)
    writer.write_batch(records())
    writer.snapshot_state(1)  # the barrier: the part is closed and durable, under _inprogress/
    writer.write_batch(records())  # the next transaction, open
    assert sink.committed_files() == []
    assert os.listdir(os.path.join(out, "_inprogress"))
    assert read_source(FileSource.for_record_stream_format(StreamFormat.text_line_format(), out).build()) == []
    writer.notify_checkpoint_complete(1)
    assert len(sink.committed_files()) == 1  # checkpoint 1's part only: the second batch is not in it
    writer.snapshot_state(2)
    writer.notify_checkpoint_complete(2)
    assert len(sink.committed_files()) == 2
    writer.close()


@pytest.mark.parametrize("name", sorted(WRITER_FACTORIES))
def test_built_bulk_sinks_travel_pickled_and_write_after(tmp_path, name):
    factory, records = WRITER_FACTORIES[name]
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), factory()).build()
    sink.validate()
    copy = cloudpickle.loads(cloudpickle.dumps(sink))
    assert type(copy) is FileSink and copy.run_id == sink.run_id
    assert len(commit_by_a_checkpoint(copy, [records()])) == 1


def test_built_bulk_sources_travel_pickled(tmp_path):
    for source in (parquet_source(str(tmp_path)), AvroInputFormat(str(tmp_path), BASIC_AVRO).as_source(),
                   FileSource.for_record_stream_format(CsvReaderFormat.for_schema(CSV_SCHEMA), str(tmp_path)).build(),
                   FileSource.for_record_stream_format(AvroParquetReaders.for_generic_record(BASIC_AVRO),
                                                       str(tmp_path)).build()):
        copy = cloudpickle.loads(cloudpickle.dumps(source))
        assert type(copy) is type(source) and repr(copy.format) == repr(source.format)


# -- wrong inputs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, factory, record, message", [
    ("parquet", lambda: ParquetBulkWriters.for_row_type(ROW_TYPE), rows(1)[0].as_dict() | {"int": "many"},
     r"field 'int' \(INT NOT NULL\) cannot hold 'many' \(str\)"),
    ("parquet NOT NULL", lambda: ParquetBulkWriters.for_row_type(ROW_TYPE), rows(1)[0].as_dict() | {"int": None},
     r"field 'int' \(INT NOT NULL\) is NOT NULL, and the record has None there"),
    ("parquet wall clock", lambda: ParquetBulkWriters.for_row_type(ROW_TYPE),
     rows(1)[0].as_dict() | {"timestamp": datetime.datetime(2024, 1, 1, tzinfo=UTC)},
     r"field 'timestamp' \(TIMESTAMP\(3\)\) cannot hold datetime.datetime\(2024, 1, 1, 0, 0, tzinfo=.*naive"),
    ("parquet missing field", lambda: ParquetBulkWriters.for_row_type(ROW_TYPE), Row(char="c"),
     r"it has no field 'varchar'"),
    ("orc", lambda: OrcBulkWriters.for_row_type(DataTypes.ROW([DataTypes.FIELD("n", DataTypes.SMALLINT())])),
     Row(n=10 ** 6), r"field 'n' \(SMALLINT\) cannot hold 1000000 \(int\)"),
    ("avro", lambda: AvroBulkWriters.for_generic_record(BASIC_AVRO), generic_records(1)[0] | {"long": "x"},
     r"field 'test.long' \(long\) cannot hold 'x' \(str\)"),
    ("avro-parquet", lambda: AvroParquetWriters.for_generic_record(BASIC_AVRO),
     generic_records(1)[0] | {"suit": "JOKER"}, r"field 'test.suit' \(Suit\) cannot hold 'JOKER' \(str\)"),
    ("csv", lambda: CsvBulkWriters.for_schema(CSV_SCHEMA), csv_rows(1)[0].as_dict() | {"id": "seven"},
     r"column 'id' \(INT\) cannot hold 'seven' \(str\)"),
])
def test_a_record_that_does_not_fit_names_the_field_and_the_value(tmp_path, name, factory, record, message):
    sink = FileSink.for_bulk_format(str(tmp_path / "out"), factory()).build()
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    with pytest.raises(RecordEncodingError, match=message) as raised:
        writer.write_batch([record])
    assert "Fix the records" in str(raised.value) and not raised.value.retryable
    writer.close()


def test_malformed_files_name_the_file_and_the_place(tmp_path):
    (tmp_path / "bad.csv").write_text("id|name|price|ok|tags\n1|a|1.5|true|x\nseven|b|1|false|y\n")
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(CSV_SCHEMA), str(tmp_path)).build()
    with pytest.raises(MalformedRecordError, match=r"bad.csv, byte 37: .*column 'id' \(INT\) cannot hold 'seven'"
                                                   r".*: 'seven\|b\|1\|false\|y'"):
        read_source(source)
    pq.write_table(pa.table({"n": ["not a number"]}), tmp_path / "n.parquet")
    row_type = DataTypes.ROW([DataTypes.FIELD("n", DataTypes.INT())])
    parquet = FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), str(tmp_path / "n.parquet"))
    with pytest.raises(MalformedRecordError, match=r"n.parquet: column 'n' holds string, which cannot be read as "
                                                   r"the row type's field 'n' \(INT\)"):
        read_source(parquet.build())


def test_bulk_sinks_roll_at_checkpoints_only(tmp_path):
    builder = FileSink.for_bulk_format(str(tmp_path), ParquetBulkWriters.for_row_type(ROW_TYPE))
    sink = builder.build()
    assert (sink.max_part_bytes, sink.rollover_interval_ms) == (sys.maxsize, None)
    assert (sink.part_prefix, sink.part_suffix) == ("part", "")  # PyFlink's default OutputFileConfig
    assert builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()) is builder
    with pytest.raises(ConfigurationError, match=r"rolls its part files at checkpoints only.*"
                                                 r"RollingPolicy.on_checkpoint_rolling_policy\(\)"):
        builder.with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1024))
    with pytest.raises(ApiUsageError, match="expects a RollingPolicy"):
        builder.with_rolling_policy(60_000)
    with pytest.raises(ConfigurationError, match="does not merge small part files"):
        builder.enable_compact(object(), object())
    assert builder.disable_compact() is builder
    with pytest.deprecated_call():
        streaming = StreamingFileSink.for_bulk_format(str(tmp_path), AvroBulkWriters.for_generic_record(BASIC_AVRO)) \
            .build()
    assert streaming.max_part_bytes == sys.maxsize
    with pytest.raises(ConfigurationError, match="at checkpoints only"):
        StreamingFileSink.for_bulk_format(str(tmp_path), AvroBulkWriters.for_generic_record(BASIC_AVRO)) \
            .with_rolling_policy(RollingPolicy.default_rolling_policy())


@pytest.mark.parametrize("call, error, message", [
    (lambda: FileSink.for_bulk_format("out/", object()), ApiUsageError,
     r"expects a BulkWriterFactory: ParquetBulkWriters.for_row_type\(row_type\), .*CsvBulkWriters"),
    (lambda: StreamingFileSink.for_bulk_format("out/", "parquet"), ApiUsageError, "expects a BulkWriterFactory"),
    (lambda: FileSource.for_bulk_file_format(object(), "in/"), ApiUsageError,
     r"expects a BulkFormat: ParquetColumnarRowInputFormat\(row_type\)"),
    (lambda: FileSource.for_bulk_file_format(CsvReaderFormat.for_schema(CSV_SCHEMA), "in/"), ApiUsageError,
     "a StreamFormat: pass it to FileSource.for_record_stream_format"),
    (lambda: FileSource.for_record_stream_format(ParquetColumnarRowInputFormat(ROW_TYPE), "in/"), ApiUsageError,
     "pass it to FileSource.for_bulk_file_format"),
    (lambda: ParquetBulkWriters.for_row_type(Types.ROW_NAMED(["a"], [Types.INT()])), ApiUsageError,
     r"expects a RowType: DataTypes.ROW\(\["),
    (lambda: OrcBulkWriters.for_row_type(DataTypes.ROW([DataTypes.FIELD("t", DataTypes.TIME())])),
     ConfigurationError, "ORC has no type for a time of day.*field 't'"),
    (lambda: ParquetBulkWriters.for_row_type(ROW_TYPE, Configuration().set_string("fs.s3a.endpoint", "x")),
     ConfigurationError, r"'fs.s3a.endpoint' has no counterpart .* honours \['parquet.compression'"),
    (lambda: OrcBulkWriters.for_row_type(ROW_TYPE, Configuration().set_string("orc.compress", "LZO")),
     ConfigurationError, r"orc.compress = 'LZO'.* take one of"),
    (lambda: OrcBulkWriters.for_row_type(ROW_TYPE, Configuration().set_string("orc.compress.size", "1000")),
     ConfigurationError, r"orc.compress.size = '1000': .*multiple of 65536"),
    (lambda: ParquetColumnarRowInputFormat(ROW_TYPE, Configuration().set_string("parquet.x", "1")),
     ConfigurationError, "Leave hadoop_config out"),
    (lambda: ParquetColumnarRowInputFormat(ROW_TYPE, batch_size=0), ConfigurationError, "positive number of rows"),
    (lambda: AvroBulkWriters.for_generic_record('{"type": "record"}'), ApiUsageError,
     r"expects an AvroSchema \(AvroSchema.parse_string"),
    (lambda: AvroSchema.parse_string('"string"'), ConfigurationError, "must be a record"),
    (lambda: CsvSchema.builder().add_number_column("n", DataTypes.STRING()), ConfigurationError,
     "must be a number type"),
    (lambda: FileSource("in/", format=CsvReaderFormat.for_schema(CSV_SCHEMA).format, on_malformed="skip"),
     ConfigurationError, "applies to the line formats"),
    (lambda: StreamExecutionEnvironment.get_execution_environment().create_input("in/"), ApiUsageError,
     r"AvroInputFormat\(path, schema\)"),
])
def test_wrong_inputs_are_refused_naming_what_is_accepted(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_read_committed_points_bulk_sinks_at_a_reader(tmp_path):
    sink = FileSink.for_bulk_format(str(tmp_path), ParquetBulkWriters.for_row_type(ROW_TYPE)).build()
    with pytest.raises(ApiUsageError, match=r"RowDataBulkWriterFactory. Read committed_files\(\) with a FileSource"):
        sink.read_committed()


def test_the_factories_are_pyflinks_kinds():
    assert isinstance(ParquetBulkWriters.for_row_type(ROW_TYPE), RowDataBulkWriterFactory)
    assert ParquetBulkWriters.for_row_type(ROW_TYPE).get_row_type() == ROW_TYPE
    assert isinstance(CsvBulkWriters.for_schema(CSV_SCHEMA), RowDataBulkWriterFactory)
    for factory in (AvroBulkWriters.for_generic_record(BASIC_AVRO), AvroParquetWriters.for_generic_record(BASIC_AVRO)):
        assert isinstance(factory, BulkWriterFactory) and not isinstance(factory, RowDataBulkWriterFactory)
    assert isinstance(ParquetColumnarRowInputFormat(ROW_TYPE), BulkFormat)
    assert isinstance(CsvReaderFormat.for_schema(CSV_SCHEMA), StreamFormat)
    assert isinstance(AvroParquetReaders.for_generic_record(BASIC_AVRO), StreamFormat)
    assert GenericRecordAvroTypeInfo(BASIC_AVRO) == GenericRecordAvroTypeInfo(BASIC_AVRO)


# -- a PyFlink program, as its user writes it ------------------------------------------------------------------


def test_a_pyflink_program_with_bulk_formats_declares_its_job():
    from runtime.common import Types as UserTypes
    from runtime.datastream import StreamExecutionEnvironment as Environment
    from runtime.datastream.connectors.file_system import FileSink as Sink
    from runtime.datastream.connectors.file_system import FileSource as Source
    from runtime.datastream.formats.parquet import ParquetBulkWriters as Writers
    from runtime.table import DataTypes as Data

    env = Environment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(10_000)  # bulk parts roll and commit at checkpoints
    row_type = Data.ROW([Data.FIELD("word", Data.STRING()), Data.FIELD("count", Data.BIGINT())])
    row_type_info = UserTypes.ROW_NAMED(["word", "count"], [UserTypes.STRING(), UserTypes.LONG()])
    ds = env.from_collection([Row(word="to", count=1), Row(word="be", count=2)], type_info=row_type_info)
    ds.sink_to(Sink.for_bulk_format("out/", Writers.for_row_type(row_type)).build())

    parquet = Source.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), "out/").build()
    words = env.from_source(parquet, WatermarkStrategy.no_watermarks(), "parquet-source")
    schema = AvroSchema.parse_string('{"type": "record", "name": "Count", "fields": ['
                                     '{"name": "word", "type": "string"}, {"name": "count", "type": "long"}]}')
    words.map(lambda row: {"word": row.word, "count": row["count"]}, output_type=GenericRecordAvroTypeInfo(schema)) \
        .sink_to(Sink.for_bulk_format("avro-out/", AvroBulkWriters.for_generic_record(schema)).build())
    env.create_input(AvroInputFormat("avro-out/", schema)).print()

    names = [node.name for node in env.get_job_graph("bulk formats").operators]
    assert names == ["Collection Source", "Sink: FileSink(out/)", "parquet-source", "Map", "Sink: FileSink(avro-out/)",
                     "Custom Source", "Print to Std. Out"]
