"""Programs written the way PyFlink's users write them (its examples' idioms: named rows read by attribute, one
declared stream executed several times, generic function classes subscripted with their types, a watermark
strategy without a timestamp assigner), with ``runtime`` in place of ``pyflink`` in the imports. Each answer is
compared with what PyFlink's semantics give."""

import json
import os
from typing import Iterable

from runtime.common import Encoder, Row, Time, Types, WatermarkStrategy
from runtime.common.watermark_strategy import TimestampAssigner
from runtime.datastream import ProcessWindowFunction, StreamExecutionEnvironment, WindowFunction
from runtime.datastream.connectors.file_system import FileSink
from runtime.datastream.connectors.number_seq import NumberSequenceSource
from runtime.datastream.window import CountWindow, TimeWindow, TumblingEventTimeWindows

PEOPLE = [(1, '{"name": "Ada", "tel": 100, "addr": {"country": "UK"}}'),
          (2, '{"name": "Bo", "tel": 200, "addr": {"country": "SE"}}'),
          (3, '{"name": "Cy", "tel": 300, "addr": {"country": "UK"}}')]


def committed_lines(directory) -> list[str]:
    lines = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if not name.startswith((".", "_")):
                with open(os.path.join(root, name)) as f:
                    lines.extend(f.read().splitlines())
    return sorted(lines)


def test_named_rows_by_attribute_and_one_stream_executed_three_times(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ds = env.from_collection(PEOPLE, type_info=Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()]))

    def raise_tel(data):
        person = json.loads(data.info)
        person["tel"] += 1
        return data.id, person["tel"]

    # First job: the declared stream through a map, into files, with execute().
    ds.map(raise_tel).sink_to(FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder()).build())
    env.execute()
    assert committed_lines(tmp_path / "out") == ["(1, 101)", "(2, 201)", "(3, 301)"]

    # Second and third jobs: the same stream, declared before the first execute(), read again.
    with ds.filter(lambda data: data.id == 1).map(raise_tel).execute_and_collect() as results:
        assert list(results) == [(1, 101)]
    by_country = ds.map(lambda data: (json.loads(data.info)["addr"]["country"], json.loads(data.info)["tel"]),
                        output_type=Types.ROW_NAMED(["country", "tel"], [Types.STRING(), Types.INT()])) \
        .key_by(lambda row: row.country) \
        .reduce(lambda a, b: Row(country=a.country, tel=a.tel + b.tel))
    with by_country.execute_and_collect() as results:
        rows = list(results)
    assert [(row.country, row.tel) for row in rows] == [("UK", 100), ("SE", 200), ("UK", 400)]
    assert all(isinstance(row, Row) and row[0] == row.country for row in rows)


class SumWindowFunction(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
        return [(key, sum(i[0] for i in inputs))]


class CountWindowProcessFunction(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        return [(key, context.window().start, context.window().end, len([e for e in elements]))]


class SecondFieldTimestamps(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return int(value[1])


def test_generic_window_functions_subscripted_with_their_types(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    words = env.from_collection([(1, 'hi'), (2, 'hello'), (3, 'hi'), (4, 'hello'), (5, 'hi'), (6, 'hello'),
                                 (6, 'hello')], type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
    sums = words.key_by(lambda x: x[1], key_type=Types.STRING()).count_window(3) \
        .apply(SumWindowFunction(), Types.TUPLE([Types.STRING(), Types.INT()]))
    with sums.execute_and_collect() as results:
        assert sorted(results) == [("hello", 12), ("hi", 9)]  # windows of 3; ('hello', 6) stays incomplete

    stamped = env.from_collection([('hi', 1), ('hi', 2), ('hi', 3), ('hi', 4), ('hi', 5), ('hi', 8), ('hi', 9),
                                   ('hi', 15)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    counts = stamped.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondFieldTimestamps())) \
        .key_by(lambda x: x[0], key_type=Types.STRING()) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5))) \
        .process(CountWindowProcessFunction(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()]))
    with counts.execute_and_collect() as results:
        assert sorted(results) == [("hi", 0, 5, 4), ("hi", 5, 10, 3), ("hi", 15, 20, 1)]


def test_a_watermark_strategy_without_an_assigner_keeps_what_the_records_have(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    numbers = env.from_source(NumberSequenceSource(1, 10_000), WatermarkStrategy.for_monotonous_timestamps(),
                              "numbers")
    with numbers.map(lambda n: n % 7).execute_and_collect() as results:
        got = sorted(results)
    assert got == sorted(n % 7 for n in range(1, 10_001))


def test_pyflinks_jdbc_sink_program_writes_its_books(spark, postgres):
    from tests.pyflink_jdbc_program import declare_books_job

    postgres.query("CREATE TABLE IF NOT EXISTS books (id int, title text, authors text, year int)")
    postgres.query("TRUNCATE books")
    env = declare_books_job(postgres.jdbc_url, postgres.user, postgres.password)
    env.execute()
    assert postgres.query("SELECT id, year FROM books ORDER BY id") == [(101, 2019), (102, 2018), (103, 2017),
                                                                      (104, 2017)]
