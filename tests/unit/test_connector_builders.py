"""PyFlink's connector builders make Chandy's own FileSource / FileSink, and the connectors Chandy lacks say so.

No Spark here: the built sources' readers and the built sinks' transactions are driven directly.
"""

import importlib
import os
import pickle
import re
import sys
import warnings

import pytest

import operators.file_sink
import operators.file_source
from operators.two_phase_commit import TransactionContext
from runtime.common.serialization import Encoder, SimpleStringSchema
from runtime.common.watermark_strategy import WatermarkStrategy
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors import (
    BucketAssigner,
    FileEnumeratorProvider,
    FileSink,
    FileSource,
    FileSplitAssignerProvider,
    NumberSequenceSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
    StreamingFileSink,
)
from runtime.settings.durations import Duration, Time
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.not_provided import MISSING_MODULES, MISSING_NAMES, NotProvidedError
from runtime.types import Row

TEXT = StreamFormat.text_line_format()


def read_all(source, parallelism=1):
    """Every record the source's readers return, subtask by subtask, until each says it is done."""
    records = []
    for subtask in range(parallelism):
        reader = source.create_reader(subtask, parallelism)
        reader.open(None)
        while (batch := reader.poll(3)) is not None:
            records.extend(batch)
        reader.close()
    return records


def committed_text(sink, batches):
    """Write ``batches`` as one transaction, commit it, and return the committed part files' names and bytes."""
    sink.validate()
    transaction = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    for batch in batches:
        sink.write(transaction, batch)
    sink.pre_commit(transaction)
    sink.commit(transaction)
    return [(os.path.basename(path), sink.fs.cat_file(path)) for path in sink.committed_files()]


# -- FileSource ------------------------------------------------------------------------------------------------


def test_the_source_builder_makes_a_chandy_file_source_with_its_settings(tmp_path):
    builder = FileSource.for_record_stream_format(TEXT, str(tmp_path))
    bounded = builder.build()
    assert isinstance(bounded, operators.file_source.FileSource)
    assert (bounded.format, bounded.bounded, bounded.continuous) == ("text", True, False)
    assert bounded.url == "file://" + str(tmp_path)

    watching = builder.monitor_continuously(Duration.of_seconds(5)).build()
    assert (watching.continuous, watching.bounded, watching.discovery_interval_ms) == (True, False, 5000)
    assert builder.monitor_continuously(Time.milliseconds(250)).build().discovery_interval_ms == 250
    assert builder.process_static_file_set().build().bounded is True


def test_enumerators_and_split_assigners_are_accepted_without_changing_the_source(tmp_path):
    plain = FileSource.for_record_stream_format(TEXT, str(tmp_path)).build()
    tuned = (FileSource.for_record_stream_format(TEXT, str(tmp_path))
             .set_file_enumerator(FileEnumeratorProvider.default_splittable_file_enumerator())
             .set_split_assigner(FileSplitAssignerProvider.locality_aware_split_assigner())
             .build())
    assert vars(tuned) == vars(plain)
    with pytest.raises(ApiUsageError, match="FileEnumeratorProvider"):
        FileSource.for_record_stream_format(TEXT, str(tmp_path)).set_file_enumerator("recursive")


@pytest.mark.parametrize("call, message", [
    (lambda: FileSource.for_record_stream_format(TEXT, "a.txt", "b.txt"), "got 2 paths.*glob.*union"),
    (lambda: FileSource.for_record_stream_format(TEXT), "needs the path"),
    (lambda: FileSource.for_record_stream_format(TEXT, ""), "needs the path"),
    (lambda: StreamFormat.text_line_format("ISO-8859-1"), "UTF-8 only.*iconv -f ISO-8859-1"),
    (lambda: StreamFormat.text_line_format("no-such-charset"), "unknown charset"),
    (lambda: FileSource.for_record_stream_format(TEXT, "in/").monitor_continuously(Duration.zero()), "positive"),
])
def test_what_the_source_cannot_honour_is_refused_with_the_fix(call, message):
    with pytest.raises(ConfigurationError, match=message):
        call()


def test_a_stream_format_is_required():
    with pytest.raises(ApiUsageError, match="StreamFormat.text_line_format"):
        FileSource.for_record_stream_format("text", "in/")


def test_a_built_source_reads_each_line_as_a_str_without_its_line_break(tmp_path):
    (tmp_path / "a.txt").write_bytes("héllo wörld\r\nsecond, with a comma\n{\"not\": \"json\"}\nno newline".encode())
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_bytes(b"42\n")
    (tmp_path / "_hidden.txt").write_bytes(b"never read\n")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format("utf-8"), str(tmp_path)).build()

    records = read_all(source)
    assert records == ["héllo wörld", "second, with a comma", '{"not": "json"}', "no newline", "42"]
    assert all(type(record) is str for record in records)
    assert sorted(read_all(source, parallelism=3)) == sorted(records)  # each file read by exactly one subtask


def test_blank_lines_are_records_as_in_pyflink(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\n\n   \r\ntwo\n")
    source = FileSource.for_record_stream_format(TEXT, str(tmp_path)).build()
    assert read_all(source) == ["one", "", "   ", "two"]


def test_a_source_over_a_sinks_directory_reads_only_committed_parts(tmp_path):
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    committed_text(sink, [["committed"]])
    pending = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 1))
    sink.write(pending, ["in progress"])
    sink.pre_commit(pending)
    assert os.listdir(tmp_path / "out" / "_inprogress")
    assert read_all(FileSource.for_record_stream_format(TEXT, str(tmp_path / "out")).build()) == ["committed"]


# -- FileSink --------------------------------------------------------------------------------------------------


def test_the_sink_builder_defaults_to_pyflinks_default_rolling_policy(tmp_path):
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    assert isinstance(sink, operators.file_sink.FileSink)
    assert (sink.format, sink.max_part_bytes, sink.rollover_interval_ms) == ("text", 128 << 20, 60_000)
    assert (sink.part_prefix, sink.part_suffix) == ("part", "")  # PyFlink's default OutputFileConfig
    assert sink.url == "file://" + str(tmp_path / "out")


def test_rolling_policies_map_onto_part_size_and_age(tmp_path):
    builder = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
    sized = builder.with_rolling_policy(RollingPolicy.default_rolling_policy(
        part_size=1024, rollover_interval=Duration.of_minutes(5), inactivity_interval=1000)).build()
    assert (sized.max_part_bytes, sized.rollover_interval_ms) == (1024, 300_000)
    on_checkpoint = builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
    assert (on_checkpoint.max_part_bytes, on_checkpoint.rollover_interval_ms) == (sys.maxsize, None)


def test_options_that_do_not_change_the_output_are_accepted(tmp_path):
    plain = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    tuned = (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
             .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
             .with_bucket_check_interval(10_000)
             .disable_compact()
             .build())
    assert vars(tuned) == vars(plain)


def row_builder():
    return FileSink.for_row_format("out/", Encoder.simple_string_encoder())


@pytest.mark.parametrize("call, message", [
    (lambda: FileSink.for_row_format("out/", Encoder.simple_string_encoder("UTF-16")), "UTF-8 only"),
    (lambda: row_builder().with_bucket_assigner(BucketAssigner.date_time_bucket_assigner()),
     "no bucket directories.*base_path_bucket_assigner"),
    (lambda: row_builder().with_output_file_config(OutputFileConfig("_hidden", "")).build(), "not start with"),
    (lambda: row_builder().enable_compact(object(), object()), "does not merge small part files"),
    (lambda: RollingPolicy.default_rolling_policy(part_size=0), "positive number of bytes"),
    (lambda: RollingPolicy.default_rolling_policy(rollover_interval=0), "positive"),
    (lambda: row_builder().with_bucket_check_interval(-1), "negative"),
])
def test_what_the_sink_cannot_honour_is_refused_with_the_fix(call, message):
    with pytest.raises(ConfigurationError, match=message):
        call()


def test_only_the_simple_string_encoder_is_taken():
    class Json(Encoder):
        def encode(self, element):
            return b"{}\n"

    with pytest.raises(ApiUsageError, match="simple_string_encoder"):
        FileSink.for_row_format("out/", Json("UTF-8"))
    with pytest.raises(ApiUsageError, match="simple_string_encoder"):
        FileSink.for_row_format("out/", SimpleStringSchema())
    with pytest.raises(ApiUsageError, match="RollingPolicy"):
        row_builder().with_rolling_policy(60_000)


def test_a_built_sink_writes_str_of_each_record_and_a_newline(tmp_path):
    records = [1, "a", "é", {"k": [1, 2]}, (1, "x"), None, Row(1, "a"), ""]
    sink = FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build()
    (name, data), = committed_text(sink, [records[:3], records[3:]])
    assert data == b"".join(Encoder.simple_string_encoder().encode(r) for r in records)
    assert data == "".join(f"{r}\n" for r in records).encode("utf-8")
    assert re.fullmatch(r"part-[0-9a-f]+-0-0-0", name)


def test_a_built_sink_names_its_parts_by_the_output_file_config(tmp_path):
    config = OutputFileConfig.builder().with_part_prefix("events").with_part_suffix(".log").build()
    sink = (FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
            .with_output_file_config(config).with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1))
            .build())
    parts = committed_text(sink, [["a"], ["b"]])
    assert [name.replace(sink.run_id, "<run>") for name, _ in parts] == ["events-<run>-0-0-0.log",
                                                                        "events-<run>-0-0-1.log"]
    assert sink.read_committed() == ["a", "b"]


def test_a_built_sink_rolls_its_parts_at_the_part_size(tmp_path):
    sink = (FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=8)).build())
    parts = committed_text(sink, [["0123456789"], ["a"], ["b"]])
    assert [data for _, data in parts] == [b"0123456789\n", b"a\nb\n"]  # full at 11 bytes: the next write rolls


def test_streaming_file_sink_is_the_same_sink_and_warns_it_is_deprecated(tmp_path):
    builder = StreamingFileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
    with pytest.warns(DeprecationWarning, match="use FileSink"):
        sink = builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
    assert isinstance(sink, operators.file_sink.FileSink) and sink.max_part_bytes == sys.maxsize
    assert committed_text(sink, [["x"]])[0][1] == b"x\n"


def test_built_sources_and_sinks_survive_pickling_to_the_executors(tmp_path):
    source = FileSource.for_record_stream_format(TEXT, str(tmp_path)).monitor_continuously(Duration.of_millis(50)) \
        .build()
    copy = pickle.loads(pickle.dumps(source))
    assert type(copy) is FileSource and vars(copy) == vars(source)
    with pytest.deprecated_call():
        streaming = StreamingFileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unpickling runs no constructor: no deprecation warning on the executors
        for sink in (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build(), streaming):
            copy = pickle.loads(pickle.dumps(sink))
            assert type(copy) is type(sink) and copy.max_part_bytes == sink.max_part_bytes


def test_pyflinks_file_pipeline_declares_a_job():
    env = StreamExecutionEnvironment.get_execution_environment()
    source = FileSource.for_record_stream_format(TEXT, "in/").build()
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
    lines.map(str.upper).sink_to(FileSink.for_row_format("out/", Encoder.simple_string_encoder()).build())
    names = [node.name for node in env.get_job_graph("files").operators]
    assert names[0] == "lines" and names[-1] == "Sink: FileSink(out/)"


# -- NumberSequenceSource --------------------------------------------------------------------------------------


def test_number_sequence_source_is_bounded_and_inclusive_at_any_parallelism():
    source = NumberSequenceSource(1, 100)
    assert source.bounded
    for parallelism in (1, 3, 7):
        assert sorted(read_all(source, parallelism)) == list(range(1, 101))
    assert read_all(NumberSequenceSource(5, 5)) == [5]
    for start, end in ((5, 4), (1, None), (1.5, 3)):
        with pytest.raises(ConfigurationError):
            NumberSequenceSource(start, end)


def test_number_sequence_source_with_a_watermark_strategy_declares_a_job():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "numbers").print()
    assert [node.name for node in env.get_job_graph("numbers").operators][0] == "numbers"


def test_number_sequence_source_streams_are_longs_as_in_pyflink_unless_given_a_type():
    """Flink's NumberSequenceSource produces LONG: the stream has that type (its edges carry an Arrow int64
    column), and from_source's own type_info still wins."""
    from runtime.types import Types

    env = StreamExecutionEnvironment.get_execution_environment()
    numbers = env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "numbers")
    assert numbers.get_type() == Types.LONG()
    stamped = env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.for_monotonous_timestamps()
                              .with_timestamp_assigner(lambda n, _: n), "stamped")
    assert stamped.get_type() == Types.LONG(), "the timestamp assigner keeps the source's type"
    assert env.from_source(NumberSequenceSource(1, 100), "as ints", Types.INT()).get_type() == Types.INT()


# -- what Chandy deliberately lacks ----------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(MISSING_MODULES))
def test_a_missing_connector_says_why_and_what_to_use_instead(module):
    for _ in range(2):  # a failed import leaves nothing behind in sys.modules: the second one says it again
        with pytest.raises(NotProvidedError) as raised:
            importlib.import_module(module)
        message = str(raised.value)
        assert isinstance(raised.value, ImportError) and raised.value.name == module
        assert message.startswith(f"Chandy does not provide {module} (PyFlink's ")
        assert "Why: " in message and "Instead: " in message
        assert "sink_to" in message or "from_source" in message or "union" in message


def test_every_connector_module_either_works_or_is_missing_on_purpose():
    import runtime.datastream.connectors as package

    names = {f"{package.__name__}.{file[:-3]}" for file in os.listdir(os.path.dirname(package.__file__))
             if file.endswith(".py") and file != "__init__.py"}
    working = {f"{package.__name__}.{name}"
               for name in ("base", "delta", "file_system", "iceberg", "jdbc", "kafka", "number_seq", "postgres")}
    assert names - working == set(MISSING_MODULES)


@pytest.mark.parametrize("module, name", [(module, name) for module, names in sorted(MISSING_NAMES.items())
                                          for name in sorted(names)])
def test_a_missing_name_says_why_and_what_to_use_instead(module, name):
    with pytest.raises(NotProvidedError, match=rf"^Chandy does not provide {module}\.{name} .* Instead: "):
        exec(f"from {module} import {name}", {})


def test_names_neither_provided_nor_missing_on_purpose_are_ordinary_attribute_errors():
    import runtime.datastream.connectors as connectors

    assert not hasattr(connectors, "NoSuchConnector")
    with pytest.raises(ImportError, match="cannot import name 'NoSuchConnector'") as raised:
        exec("from runtime.datastream.connectors import NoSuchConnector", {})
    assert not isinstance(raised.value, NotProvidedError)


# -- serialization ---------------------------------------------------------------------------------------------


def test_simple_string_schema_round_trips_in_its_charset():
    for charset, data in (("UTF-8", b"caf\xc3\xa9"), ("ISO-8859-1", b"caf\xe9")):
        schema = SimpleStringSchema(charset)
        assert schema.deserialize(data) == "café" and schema.serialize("café") == data
    assert SimpleStringSchema().deserialize(bytearray(b"x")) == "x"
    with pytest.raises(ConfigurationError, match="unknown charset"):
        SimpleStringSchema("EBCDIC-42")


def test_a_paced_source_releases_a_millisecond_of_records_at_a_time_not_each_as_it_falls_due(monkeypatch):
    """A poll of a few records every few microseconds cost the loop around it more than the records: a paced
    source waits until a millisecond's worth is due (one record, at rates below 1,000/s), and says how long."""
    import types

    import operators.sources
    from operators import SequenceSource

    now, slept = [100.0], []
    monkeypatch.setattr(operators.sources, "time", types.SimpleNamespace(monotonic=lambda: now[0],
                                                                         sleep=slept.append))
    fast = SequenceSource(0, None, records_per_second=100_000).create_reader(0, 1)
    slow = SequenceSource(0, None, records_per_second=500).create_reader(0, 1)
    assert fast.poll(10**6) == [] and slow.poll(10**6) == []
    now[0] += 0.0005  # 50 of the fast source's records are due: not yet a millisecond's 100
    assert fast.poll(10**6) == [] and slept[-1] == pytest.approx(0.0005)
    now[0] += 0.0005
    assert fast.poll(10**6) == list(range(100))
    assert slow.poll(10**6) == [] and slept[-1] == pytest.approx(0.002)  # 0.5 of a record due: wait for 1
    now[0] += 0.001
    assert slow.poll(10**6) == [0]
    fewer = SequenceSource(0, None, records_per_second=100_000).create_reader(0, 1)
    assert fewer.poll(40) == []
    now[0] += 0.0002  # 20 due
    assert fewer.poll(40) == [] and slept[-1] == pytest.approx(0.0002)  # asked for fewer: those are the step
    now[0] += 0.0002
    assert fewer.poll(40) == list(range(40))


def test_a_sequence_sources_rate_is_the_whole_sources_split_across_its_subtasks(monkeypatch):
    """``records_per_second`` means the whole source, as Flink's ``RateLimiterStrategy.perSecond``: four subtasks
    read a quarter each. A clock the test moves stands in for time."""
    import types

    import operators.sources
    from operators import SequenceSource

    now = [100.0]
    monkeypatch.setattr(operators.sources, "time", types.SimpleNamespace(monotonic=lambda: now[0],
                                                                         sleep=lambda seconds: None))
    for end in (10**6, None):
        readers = [SequenceSource(0, end, records_per_second=1_000).create_reader(i, 4) for i in range(4)]
        assert all(reader.poll(10**6) == [] for reader in readers), "nothing before any time has passed"
        now[0] += 2.0
        assert [len(reader.poll(10**6)) for reader in readers] == [500] * 4, "2 s at 1,000/s: 2,000 in all"
