"""PyFlink's Kafka example programs (``kafka_json_format.py``, ``kafka_csv_format.py``, ``kafka_avro_format.py``,
``kafka_bytearray_format.py``, and the legacy ``FlinkKafkaProducer`` / ``FlinkKafkaConsumer`` pair), with
``pyflink`` replaced by ``runtime`` in the imports, against the session's broker (on ``localhost:9092`` when that
port was free, as the examples assume). Their writing halves are as PyFlink's; their reading halves stop at the
end of what was written (``set_bounded``) and collect the records instead of printing them, so that each has an
answer to check; the legacy consumer, which cannot stop, runs until the records are there."""

import json
import os

from runtime.common import ByteArraySchema, Types, WatermarkStrategy
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream import StreamExecutionEnvironment
from runtime.datastream.connectors.kafka import (
    FlinkKafkaConsumer,
    FlinkKafkaProducer,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from runtime.datastream.formats.avro import AvroRowDeserializationSchema, AvroRowSerializationSchema
from runtime.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from runtime.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from tests.integration.kafka_jobs import LinesInFile
from tests.integration.waiting import wait_for

ROWS = [(1, 'hi'), (2, 'hello'), (3, 'hi'), (4, 'hello'), (5, 'hi'), (6, 'hello'), (6, 'hello')]


def write_rows(env, bootstrap, topic, serialization_schema):
    """The examples' write_to_kafka: a collection of rows into a topic."""
    type_info = Types.ROW([Types.INT(), Types.STRING()])
    ds = env.from_collection(ROWS, type_info=type_info)
    record_serializer = KafkaRecordSerializationSchema.builder() \
        .set_topic(topic) \
        .set_value_serialization_schema(serialization_schema) \
        .build()
    kafka_sink = (
        KafkaSink.builder()
        .set_record_serializer(record_serializer)
        .set_bootstrap_servers(bootstrap)
        .set_property("group.id", "test_group")
        .build()
    )
    # note that the output type of ds must be RowTypeInfo
    ds.sink_to(kafka_sink)
    env.execute()


def read_rows(env, bootstrap, topic, deserialization_schema):
    """The examples' read_from_kafka, up to the end of the topic."""
    kafka_source = (
        KafkaSource.builder()
        .set_topics(topic)
        .set_value_only_deserializer(deserialization_schema)
        .set_properties({'bootstrap.servers': bootstrap, 'group.id': 'test_group_1'})
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    ds = env.from_source(
        kafka_source,
        watermark_strategy=WatermarkStrategy.no_watermarks(),
        source_name="kafka source"
    )
    with ds.execute_and_collect() as results:
        return list(results)


def test_kafka_json_format(spark, kafka):
    env = StreamExecutionEnvironment.get_execution_environment()
    topic = kafka.topic("test_json_topic", 1)
    type_info = Types.ROW([Types.INT(), Types.STRING()])
    write_rows(env, kafka.bootstrap, topic, JsonRowSerializationSchema.Builder().with_type_info(type_info).build())
    deserialization_schema = JsonRowDeserializationSchema.Builder() \
        .type_info(Types.ROW([Types.INT(), Types.STRING()])) \
        .build()
    rows = read_rows(env, kafka.bootstrap, topic, deserialization_schema)
    assert [(row.f0, row.f1) for row in rows] == ROWS


def test_kafka_csv_format(spark, kafka):
    env = StreamExecutionEnvironment.get_execution_environment()
    topic = kafka.topic("test_csv_topic", 1)
    type_info = Types.ROW([Types.INT(), Types.STRING()])
    write_rows(env, kafka.bootstrap, topic, CsvRowSerializationSchema.Builder(type_info).build())
    rows = read_rows(env, kafka.bootstrap, topic, CsvRowDeserializationSchema.Builder(type_info).build())
    assert [tuple(row) for row in rows] == ROWS


AVRO_SCHEMA = """
    {
        "type": "record",
        "name": "TestRecord",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "name", "type": "string"}
        ]
    }"""


def test_kafka_avro_format(spark, kafka):
    env = StreamExecutionEnvironment.get_execution_environment()
    topic = kafka.topic("test_avro_topic", 1)
    write_rows(env, kafka.bootstrap, topic, AvroRowSerializationSchema(avro_schema_string=AVRO_SCHEMA))
    rows = read_rows(env, kafka.bootstrap, topic, AvroRowDeserializationSchema(avro_schema_string=AVRO_SCHEMA))
    assert [(row.id, row.name) for row in rows] == ROWS


def test_kafka_bytearray_format(spark, kafka):
    env = StreamExecutionEnvironment.get_execution_environment()
    topic = kafka.topic("test_bytearray_topic", 1)
    data = [(json.dumps({"id": 1, "country": "USA"}).encode("utf-8"),),
            (json.dumps({"id": 2, "country": "Canada"}).encode("utf-8"),),
            (json.dumps({"id": 3, "country": "Germany"}).encode("utf-8"),)]
    type_info = Types.ROW([Types.PRIMITIVE_ARRAY(Types.BYTE())])
    ds = env.from_collection(data, type_info=type_info)
    ds = ds.map(lambda x: x[0], output_type=Types.PRIMITIVE_ARRAY(Types.BYTE()))
    record_serializer = KafkaRecordSerializationSchema.builder() \
        .set_topic(topic) \
        .set_value_serialization_schema(ByteArraySchema()) \
        .build()
    ds.sink_to(KafkaSink.builder().set_record_serializer(record_serializer).set_bootstrap_servers(kafka.bootstrap)
               .build())
    env.execute()
    values = read_rows(env, kafka.bootstrap, topic, ByteArraySchema())
    assert [json.loads(v.decode("utf-8"))["country"] for v in values] == ["USA", "Canada", "Germany"]


def test_the_legacy_producer_and_consumer(spark, kafka, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    topic = kafka.topic("test_legacy_topic", 2)
    ds = env.from_collection(["a", "b", "c", "d"], type_info=Types.STRING())
    ds.add_sink(FlinkKafkaProducer(topic=topic, serialization_schema=SimpleStringSchema(),
                                   producer_config={'bootstrap.servers': kafka.bootstrap, 'group.id': 'test_group'}))
    env.execute()
    consumer = FlinkKafkaConsumer(topics=topic, deserialization_schema=SimpleStringSchema(),
                                  properties={'bootstrap.servers': kafka.bootstrap, 'group.id': 'test_group_1'})
    consumer.set_start_from_earliest()
    env.add_source(consumer).sink_to(LinesInFile(str(tmp_path / "lines")))
    client = env.execute_async("legacy consumer")

    def lines():
        folder = tmp_path / "lines"
        return sorted(line for name in (os.listdir(folder) if folder.exists() else ())
                      for line in open(folder / name).read().split())

    try:
        wait_for(lambda: len(lines()) >= 4, what="the four records, read by the legacy consumer")
    finally:
        client.cancel()
    assert lines() == ["a", "b", "c", "d"]
