"""The Kafka connector's parts against the session's Kafka-protocol broker, without Spark: readers and their
checkpointed offsets, offsets initializers, partition assignment, errors that name the problem and the fix."""

import collections
import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.kafka import topics as topics_module
from operators.kafka.partitions import owner
from runtime.common.serialization import SimpleStringSchema
from runtime.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from runtime.datastream.formats.json import JsonRowDeserializationSchema
from runtime.errors import ApiUsageError, ConfigurationError, MalformedRecordError, ServerUnreachableError
from runtime.types import Types


@given(st.text(min_size=1, max_size=20), st.integers(1, 64), st.integers(1, 16))
def test_every_partition_has_exactly_one_reader_at_any_parallelism(topic, partitions, parallelism):
    owners = [owner(topic, p, parallelism) for p in range(partitions)]
    assert all(0 <= o < parallelism for o in owners)
    counts = collections.Counter(owners)
    assert max(counts.values()) - min(counts.get(s, 0) for s in range(parallelism)) <= 1 or partitions < parallelism


def builder(kafka, topic):
    return (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics(topic)
            .set_value_only_deserializer(SimpleStringSchema()))


def read_all(reader, limit=10_000) -> list:
    got = []
    for _ in range(400):
        batch = reader.poll(limit)
        if batch is None:
            return got
        got.extend(zip(batch, batch.timestamps, batch.splits))
    raise AssertionError("the reader did not end")


def test_readers_split_the_partitions_and_a_restore_at_another_parallelism_resumes_each_exactly(kafka):
    topic = kafka.topic("restore", 5)
    kafka.produce(topic, [(None, str(i), 1_000 + i) for i in range(500)], partition_of=lambda i: i % 5)
    source = builder(kafka, topic).set_bounded(KafkaOffsetsInitializer.latest()).build()
    source.validate()
    readers = [source.create_reader(s, 2) for s in range(2)]
    first = []
    for reader in readers:
        reader.open(None)
        batch = reader.poll(37)  # part of the input, then a checkpoint
        first.extend(batch)
        assert set(batch.splits) <= set(reader.assigned_splits())
    union = [split for reader in readers for split in reader.snapshot_state()]
    for reader in readers:
        reader.close()
    rest = []
    for subtask in range(3):
        reader = source.create_reader(subtask, 3)
        reader.restore_state(union)
        reader.open(None)
        rest.extend(record for record, _, _ in read_all(reader))
        reader.close()
    assert sorted(first + rest, key=int) == [str(i) for i in range(500)]


def test_records_carry_their_partition_and_kafka_timestamp(kafka):
    topic = kafka.topic("stamps", 2)
    kafka.produce(topic, [(None, "a", 5_000), (None, "b", 6_000)], partition_of=lambda i: i)
    reader = builder(kafka, topic).set_bounded(KafkaOffsetsInitializer.latest()).build().create_reader(0, 1)
    reader.source.validate()
    reader.open(None)
    assert sorted(read_all(reader)) == [("a", 5_000, f"{topic}-0"), ("b", 6_000, f"{topic}-1")]
    assert sorted(reader.backlogged_splits()) == [], "read to the end"


def test_starting_offsets_earliest_latest_timestamp_committed_and_given(kafka):
    topic = kafka.topic("starts", 1)
    kafka.produce(topic, [(None, str(i), 10_000 + 1_000 * i) for i in range(10)])
    partition = KafkaTopicPartition(topic, 0)

    def first_record(initializer, group=None):
        b = builder(kafka, topic).set_starting_offsets(initializer).set_bounded(KafkaOffsetsInitializer.latest())
        if group is not None:
            b.set_group_id(group)
        source = b.build()
        source.validate()
        reader = source.create_reader(0, 1)
        reader.open(None)
        records = read_all(reader)
        reader.close()
        return records[0][0] if records else None

    assert first_record(KafkaOffsetsInitializer.earliest()) == "0"
    assert first_record(KafkaOffsetsInitializer.latest()) is None
    assert first_record(KafkaOffsetsInitializer.timestamp(13_500)) == "4"
    assert first_record(KafkaOffsetsInitializer.offsets({partition: 7})) == "7"
    assert first_record(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST), "fresh") == "0"
    with pytest.raises(ConfigurationError, match="no committed offset .*committed_offsets\\(KafkaOffsetResetStrategy"):
        first_record(KafkaOffsetsInitializer.committed_offsets(), "fresh-2")


def test_a_completed_checkpoint_commits_the_offsets_to_the_users_group(kafka):
    topic = kafka.topic("commits", 1)
    kafka.produce(topic, [(None, str(i), None) for i in range(20)])
    source = builder(kafka, topic).set_group_id("monitored").build()
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    got = []
    while len(got) < 20:
        got.extend(reader.poll(7) or [])
    reader.snapshot_taken(4, reader.snapshot_state())
    reader.notify_checkpoint_complete(4)
    reader.close()
    resumed = builder(kafka, topic).set_group_id("monitored").set_starting_offsets(
        KafkaOffsetsInitializer.committed_offsets()).set_bounded(KafkaOffsetsInitializer.latest()).build()
    resumed.validate()
    reader = resumed.create_reader(0, 1)
    reader.open(None)
    assert read_all(reader) == [], "the group's offset is the end: nothing left"


def test_a_record_that_does_not_deserialize_names_topic_partition_and_offset_or_is_skipped(kafka):
    topic = kafka.topic("malformed", 1)
    kafka.produce(topic, [(None, '{"n": 1}', None), (None, "not json", None), (None, '{"n": 3}', None)])
    schema = JsonRowDeserializationSchema.builder().type_info(Types.ROW_NAMED(["n"], [Types.INT()])).build()

    def reader_of(action):
        source = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics(topic)
                  .set_value_only_deserializer(schema).set_bounded(KafkaOffsetsInitializer.latest())
                  .set_on_deserialization_error(action).build())
        source.validate()
        reader = source.create_reader(0, 1)
        reader.open(None)
        return reader

    with pytest.raises(MalformedRecordError, match=f"offset 1 of topic {topic}, partition 0 does not deserialize"):
        read_all(reader_of("fail"))
    skipping = reader_of("skip")
    assert [r.n for r, _, _ in read_all(skipping)] == [1, 3] and skipping.skipped == 1


def test_partitions_added_later_are_found_and_read_from_their_beginning(kafka):
    from confluent_kafka.admin import NewPartitions

    topic = kafka.topic("grows", 1)
    kafka.produce(topic, [(None, "old", None)])
    source = builder(kafka, topic).set_property("partition.discovery.interval.ms", "50").build()
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    got = []
    while "old" not in got:
        got.extend(reader.poll(10))
    admin = kafka.admin()
    for future in admin.create_partitions([NewPartitions(topic, 2)]).values():
        future.result(30)
    kafka.produce(topic, [(None, "new", None)], partition_of=lambda i: 1)
    for _ in range(400):
        got.extend(reader.poll(10))
        if "new" in got:
            break
    assert got == ["old", "new"] and f"{topic}-1" in reader.assigned_splits()


def test_settings_that_cannot_work_fail_before_the_job_with_the_fix(kafka, monkeypatch):
    with pytest.raises(ApiUsageError, match="already set for consumption"):
        KafkaSource.builder().set_topics("a").set_topic_pattern("b.*")
    with pytest.raises(ConfigurationError, match="set_value_only_deserializer"):
        KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics("x").build().validate()
    with pytest.raises(ConfigurationError, match="does not exist .* Create it first .*set_create_missing_topics.*"
                                                 "set_topic_pattern"):
        builder(kafka, "no-such-topic").build().validate()
    with pytest.raises(ConfigurationError, match='No such configuration property: "no.such.property"'):
        builder(kafka, "x").set_property("no.such.property", "1").build().validate()
    with pytest.raises(ConfigurationError, match="set_group_id"):
        builder(kafka, "x").set_starting_offsets(KafkaOffsetsInitializer.committed_offsets()).build().validate()
    monkeypatch.setattr(topics_module, "METADATA_TIMEOUT_S", 1.0)
    with pytest.raises(ServerUnreachableError, match="127.0.0.1:9 does not answer within 1 s"):
        KafkaSource.builder().set_bootstrap_servers("127.0.0.1:9").set_topics("x") \
            .set_value_only_deserializer(SimpleStringSchema()).build().validate()
    serializer = KafkaRecordSerializationSchema.builder().set_topic("absent") \
        .set_value_serialization_schema(SimpleStringSchema()).build()
    with pytest.raises(ConfigurationError, match="requires a transactionalIdPrefix"):
        KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_record_serializer(serializer) \
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).build().validate()
    with pytest.raises(ConfigurationError, match="topic 'absent' does not exist"):
        KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_record_serializer(serializer).build().validate()
    with pytest.raises(ConfigurationError, match="No value serializer"):
        KafkaRecordSerializationSchema.builder().set_topic("t").build()
    with pytest.raises(ConfigurationError, match="num_partitions must be a positive int"):
        KafkaSink.builder().set_create_missing_topics(num_partitions=0)


def test_missing_topics_are_created_only_when_the_builder_asks(kafka):
    out_topic, in_topic = f"created-out-{uuid.uuid4().hex[:8]}", f"created-in-{uuid.uuid4().hex[:8]}"
    serializer = KafkaRecordSerializationSchema.builder().set_topic(out_topic) \
        .set_value_serialization_schema(SimpleStringSchema()).build()
    sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_record_serializer(serializer)
    with pytest.raises(ConfigurationError, match=f"topic '?{out_topic}'? does not exist"):
        sink.build().validate()
    assert out_topic not in kafka.admin().list_topics(timeout=10).topics
    sink.set_create_missing_topics(num_partitions=3, replication_factor=1).build().validate()
    builder(kafka, in_topic).set_create_missing_topics(2).build().validate()
    topics = kafka.admin().list_topics(timeout=10).topics
    assert len(topics[out_topic].partitions) == 3 and len(topics[in_topic].partitions) == 2


def test_the_exactly_once_sink_commits_each_transaction_once_however_often_it_is_told(kafka, caplog):
    from operators.two_phase_commit import TransactionContext

    topic = kafka.topic("twice", 2)
    sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_transactional_id_prefix("twice") \
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_record_serializer(
            KafkaRecordSerializationSchema.builder().set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema()).build()).build()
    sink.validate()
    transaction = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(transaction, ["a", "b"])
    caplog.set_level(logging.INFO, logger="operators.kafka.sink")
    sink.commit(transaction)
    sink.commit(transaction)  # a restore commits the checkpoint's pending transactions again
    sink.close_clients()
    sink.commit(transaction)  # from another process: a new producer, fencing the old, reads the marker
    assert sorted(value for _, _, _, value, _ in kafka.read_committed(topic)) == [b"a", b"b"]
    assert "is in Kafka already" in caplog.text


class _CountingConsumer:
    """A real consumer, with its assignment calls counted."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.calls = collections.Counter()

    def __getattr__(self, name):
        attribute = getattr(self.consumer, name)
        if name in ("assign", "incremental_assign", "incremental_unassign"):
            self.calls[name] += 1
        return attribute


def test_a_partition_that_reaches_its_end_leaves_the_others_fetching(kafka):
    topic = kafka.topic("ends", 3)
    kafka.produce(topic, [(None, str(i), None) for i in range(600)], partition_of=lambda i: i % 3 if i < 300 else 2)
    stops = {KafkaTopicPartition(topic, p): (100, 100, 400)[p] for p in range(3)}
    reader = builder(kafka, topic).set_bounded(KafkaOffsetsInitializer.offsets(stops)).build().create_reader(0, 1)
    reader.source.validate()
    reader.open(None)
    reader.consumer = spy = _CountingConsumer(reader.consumer)
    assert sorted(int(value) for value, _, _ in read_all(reader, limit=50)) == list(range(600))
    # Each finished partition leaves the assignment alone; none is assigned again (which would drop what the
    # consumer fetched of the others and stall them).
    assert spy.calls == {"incremental_unassign": 3}
    assert spy.consumer.assignment() == []


def test_a_bounded_read_ends_past_the_commit_markers_of_a_transactional_producer(kafka):
    from confluent_kafka import Producer

    topic = kafka.topic("transactional", 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"writer-{topic}"})
    producer.init_transactions(30)
    for batch in range(3):  # each commit leaves a marker at the end of the partitions it wrote to
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, value=str(batch * 4 + i).encode(), partition=i % 2)
        producer.commit_transaction(30)
    reader = builder(kafka, topic).set_bounded(KafkaOffsetsInitializer.latest()).build().create_reader(0, 1)
    reader.source.validate()
    reader.open(None)
    assert sorted(int(value) for value, _, _ in read_all(reader)) == list(range(12))
    assert reader.poll(100) is None, "every partition reached its stopping offset, markers included"


def test_a_sink_whose_transactional_id_another_producer_took_fails_naming_the_id(kafka):
    import copy

    from operators.two_phase_commit import TransactionContext
    from runtime.errors import OutputCommitError

    topic = kafka.topic("fenced", 1)
    sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_transactional_id_prefix("fenced") \
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_record_serializer(
            KafkaRecordSerializationSchema.builder().set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema()).build()).build()
    sink.validate()
    twin = copy.deepcopy(sink)  # the same job restored elsewhere from the same savepoint: same run, same ids
    first = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(first, ["a"])
    sink.commit(first)
    other = twin.begin_transaction(TransactionContext(sink.run_id, 0, 1, 1))  # opens the id: fences the first
    twin.write(other, ["b"])
    twin.commit(other)
    late = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 2))
    sink.write(late, ["c"])
    with pytest.raises(OutputCommitError, match=f"transactional id 'fenced-{sink.run_id}-0' was taken over"):
        sink.commit(late)
    assert sorted(value for _, _, _, value, _ in kafka.read_committed(topic)) == [b"a", b"b"]


def poll_until(reader, done, what: str, limit: int = 100) -> list:
    """Poll ``reader`` until ``done(records so far)``; a minute without it fails (never the machine's speed)."""
    import time

    got, deadline = [], time.monotonic() + 60
    while not done(got):
        assert time.monotonic() < deadline, f"no {what} within 60 s: {got[:20]}"
        got.extend(reader.poll(limit) or [])
    return got


def out_of_range_reader(kafka, topic, offset, strategy):
    partition = KafkaTopicPartition(topic, 0)
    source = builder(kafka, topic).set_starting_offsets(
        KafkaOffsetsInitializer.offsets({partition: offset}, strategy)).build()
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    return reader


def _deleted_below(kafka, topic, offset):
    from confluent_kafka import TopicPartition

    admin = kafka.admin()
    for future in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        future.result(30)


@pytest.mark.parametrize("where", ["past the end", "below the log start"])
def test_an_out_of_range_offset_with_reset_strategy_none_fails_at_once_naming_it_and_the_fix(kafka, where):
    from runtime.errors import is_retryable

    topic = kafka.topic("none-reset", 1)
    kafka.produce(topic, [(None, str(i), None) for i in range(10)])
    if where == "below the log start":
        _deleted_below(kafka, topic, 5)
    offset, valid = (100, "holds offsets 0 to 9") if where == "past the end" else (2, "holds offsets 5 to 9")
    reader = out_of_range_reader(kafka, topic, offset, KafkaOffsetResetStrategy.NONE)
    with pytest.raises(ConfigurationError) as failure:
        poll_until(reader, lambda got: False, "error")
    reader.close()
    message = str(failure.value)
    assert f"offset {offset} of topic {topic}, partition 0 is out of range (the partition {valid}" in message
    assert "committed_offsets(KafkaOffsetResetStrategy.EARLIEST)" in message
    assert not is_retryable(failure.value), "a restart would meet the same offset"


@pytest.mark.parametrize("where", ["past the end", "below the log start"])
def test_an_out_of_range_offset_follows_the_reset_strategy_and_checkpoints_where_the_reader_is(kafka, caplog, where):
    topic = kafka.topic("earliest-reset", 1)
    kafka.produce(topic, [(None, str(i), None) for i in range(10)])
    first = 0
    if where == "below the log start":
        first = 5
        _deleted_below(kafka, topic, first)
    offset = 100 if where == "past the end" else 2
    caplog.set_level(logging.WARNING, logger="operators.kafka.source")
    reader = out_of_range_reader(kafka, topic, offset, KafkaOffsetResetStrategy.EARLIEST)
    got = poll_until(reader, lambda got: len(got) >= 10 - first, "records after the reset")
    assert got == [str(i) for i in range(first, 10)]
    assert reader.snapshot_state() == [(topic, 0, 10, None)], "the checkpoint holds the offset after the last read"
    said = "past the partition's end" if where == "past the end" else "no longer retained"
    assert f"position {offset} of {topic}-0 is {said}" in caplog.text and "EARLIEST" in caplog.text
    state = reader.snapshot_state()
    reader.close()
    kafka.produce(topic, [(None, "10", None), (None, "11", None)])
    restored = builder(kafka, topic).set_starting_offsets(
        KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): offset}, KafkaOffsetResetStrategy.EARLIEST)
    ).set_bounded(KafkaOffsetsInitializer.latest()).build().create_reader(0, 1)
    restored.source.validate()
    restored.restore_state(state)
    restored.open(None)
    assert [value for value, _, _ in read_all(restored)] == ["10", "11"], "nothing read twice, nothing skipped"


def test_bytes_of_keys_and_values_are_counted_in_and_out(kafka):
    from operators.two_phase_commit import TransactionContext

    topic, out = kafka.topic("bytes-in", 2), kafka.topic("bytes-out", 1)
    kafka.produce(topic, [("key", "value", None), (None, "v", None), ("k2", "not counted twice", None)],
                  partition_of=lambda i: i % 2)
    reader = builder(kafka, topic).set_bounded(KafkaOffsetsInitializer.latest()).build().create_reader(0, 1)
    reader.source.validate()
    reader.open(None)
    assert len(read_all(reader)) == 3
    assert reader.metrics()["bytes-read"] == len("keyvalue") + len("v") + len("k2not counted twice")

    def sink_of(guarantee):
        serializer = KafkaRecordSerializationSchema.builder().set_topic(out) \
            .set_key_serialization_schema(SimpleStringSchema()).set_value_serialization_schema(SimpleStringSchema())
        sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_delivery_guarantee(guarantee) \
            .set_transactional_id_prefix(f"bytes-{out}").set_record_serializer(serializer.build()).build()
        sink.validate()
        return sink

    writer = sink_of(DeliveryGuarantee.AT_LEAST_ONCE).create_writer(0, 1)
    writer.open(None)
    writer.write_batch(["ab", "cde"])
    writer.finish()
    assert writer.metrics()["bytes-written"] == 2 * len("abcde")  # each record its own key
    writer.close()
    sink = sink_of(DeliveryGuarantee.EXACTLY_ONCE)
    transaction = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(transaction, ["fghi"])
    assert sink.metrics()["bytes-written"] == 0, "counted when committed, not before"
    sink.commit(transaction)
    sink.commit(transaction)  # already in Kafka: not written again, not counted again
    assert sink.metrics()["bytes-written"] == 2 * len("fghi")
    sink.close_clients()
    assert sum(len(k) + len(v) for _, _, k, v, _ in kafka.read_committed(out)) == 2 * len("abcde") + 2 * len("fghi")


@pytest.fixture
def lost_broker():
    """A broker of the test's own, to stop while clients use it."""
    from tests.kafka_broker import start_broker

    broker = start_broker(private=True)
    yield broker
    broker.stop()


def test_brokers_lost_while_reading_fail_the_reader_after_the_deadline_naming_them(lost_broker, monkeypatch):
    from operators.kafka import source as source_module

    topic = lost_broker.topic("lost", 1)
    lost_broker.produce(topic, [(None, str(i), None) for i in range(3)])
    reader = builder(lost_broker, topic).build().create_reader(0, 1)
    reader.source.validate()
    reader.open(None)
    assert poll_until(reader, lambda got: len(got) == 3, "records") == ["0", "1", "2"]
    monkeypatch.setattr(source_module, "UNREACHABLE_AFTER_S", 0.5)
    lost_broker.stop()
    with pytest.raises(ServerUnreachableError) as failure:
        poll_until(reader, lambda got: False, "failure")  # nothing arrives any more: only the deadline can end it
    message = str(failure.value)
    assert f"the brokers at {lost_broker.bootstrap} have not answered for 0.5 s (librdkafka: " in message
    assert "Connection refused" in message or "transport" in message.lower()
    reader.close()


def test_brokers_lost_while_writing_fail_the_sink_naming_them_and_librdkafkas_reason(lost_broker, monkeypatch):
    from operators.kafka import sink as sink_module
    from operators.two_phase_commit import TransactionContext

    topic = lost_broker.topic("lost-out", 1)

    def sink_of(guarantee):
        serializer = KafkaRecordSerializationSchema.builder().set_topic(topic) \
            .set_value_serialization_schema(SimpleStringSchema()).build()
        sink = KafkaSink.builder().set_bootstrap_servers(lost_broker.bootstrap).set_delivery_guarantee(guarantee) \
            .set_transactional_id_prefix(f"lost-{topic}").set_record_serializer(serializer).build()
        sink.validate()
        return sink

    writer = sink_of(DeliveryGuarantee.AT_LEAST_ONCE).create_writer(0, 1)
    writer.open(None)
    exactly_once = sink_of(DeliveryGuarantee.EXACTLY_ONCE)
    transaction = exactly_once.begin_transaction(TransactionContext(exactly_once.run_id, 0, 1, 0))
    exactly_once.write(transaction, ["b"])
    monkeypatch.setattr(sink_module, "FLUSH_TIMEOUT_S", 1.0)
    monkeypatch.setattr(sink_module, "COMMIT_TIMEOUT_S", 1.0)
    lost_broker.stop()
    writer.write_batch(["a"])
    acknowledged = f"1 records were not acknowledged within 1 s \\(at checkpoint 1\\) by the brokers at " \
        f"{lost_broker.bootstrap}"
    with pytest.raises(ServerUnreachableError, match=f"{acknowledged} \\(librdkafka: "):
        writer.snapshot_state(1)
    with pytest.raises(ServerUnreachableError, match=f"committing transaction 0 of lost-{topic}-.* to "
                                                     f"{lost_broker.bootstrap} failed: .*librdkafka: "):
        exactly_once.commit(transaction)


def test_a_new_topic_matching_the_pattern_is_found_while_reading_and_read_from_its_beginning(kafka):
    run = uuid.uuid4().hex[:8]
    first = kafka.topic(f"pattern-{run}-a", 1)
    kafka.produce(first, [(None, "a", None)])
    source = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topic_pattern(f"pattern-{run}-.*")
              .set_value_only_deserializer(SimpleStringSchema())
              .set_property("partition.discovery.interval.ms", "50").build())
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    assert poll_until(reader, lambda got: "a" in got, "the first topic's record") == ["a"]
    other = kafka.topic(f"other-{run}", 1)  # not matching: never read
    kafka.produce(other, [(None, "other", None)])
    second = kafka.topic(f"pattern-{run}-b", 2)
    kafka.produce(second, [(None, "b0", None), (None, "b1", None)], partition_of=lambda i: i)
    got = poll_until(reader, lambda got: len(got) >= 2, "the new topic's records")
    reader.close()
    assert sorted(got) == ["b0", "b1"]
    assert sorted(reader.assigned_splits()) == [f"{first}-0", f"{second}-0", f"{second}-1"]


def test_set_partitions_reads_those_partitions_only(kafka):
    topic = kafka.topic("chosen", 3)
    kafka.produce(topic, [(None, f"p{i % 3}-{i}", None) for i in range(9)], partition_of=lambda i: i % 3)
    source = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap)
              .set_partitions({KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 2)})
              .set_value_only_deserializer(SimpleStringSchema()).set_bounded(KafkaOffsetsInitializer.latest()).build())
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    got = read_all(reader)
    assert sorted(value for value, _, _ in got) == ["p0-0", "p0-3", "p0-6", "p2-2", "p2-5", "p2-8"]
    assert sorted(reader.assigned_splits()) == [f"{topic}-0", f"{topic}-2"]


def test_set_unbounded_stops_at_the_offsets_yet_never_ends(kafka):
    topic = kafka.topic("unbounded", 1)
    kafka.produce(topic, [(None, str(i), None) for i in range(5)])
    source = builder(kafka, topic).set_unbounded(
        KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 2})).build()
    source.validate()
    assert not source.bounded
    reader = source.create_reader(0, 1)
    reader.open(None)
    assert poll_until(reader, lambda got: len(got) >= 2, "records before the stop") == ["0", "1"]
    kafka.produce(topic, [(None, "5", None)])
    for _ in range(5):  # a bounded source would say None (the end) here
        assert reader.poll(100) == []
    assert reader.snapshot_state() == [(topic, 0, 2, 2)] and reader.backlogged_splits() == []
    reader.close()


def java_murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java producer picks for ``key``: Utils.toPositive(Utils.murmur2(key)) % partitions,
    written out from the Java source, independently of librdkafka."""
    m, h = 0x5BD1E995, (0x9747B28C ^ len(key)) & 0xFFFFFFFF
    whole = len(key) // 4 * 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(key[i:i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_keys_are_written_with_their_bytes_to_the_partition_a_java_producer_picks(kafka):
    signed = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536, b"abc": 479470107}
    for key, value in signed.items():  # Kafka's own test vectors for Utils.murmur2
        assert java_murmur2_partition(key, 2**31 - 1) == (value & 0x7FFFFFFF) % (2**31 - 1)
    topic = kafka.topic("keyed", 5)
    serializer = KafkaRecordSerializationSchema.builder().set_topic(topic) \
        .set_key_serialization_schema(KeyOf()).set_value_serialization_schema(SimpleStringSchema()).build()
    sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_record_serializer(serializer) \
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE).build()
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    values = [f"user-{i}:{i}" for i in range(40)]
    writer.write_batch(values)
    writer.finish()
    writer.close()
    written = kafka.read_committed(topic)
    assert sorted(value.decode() for _, _, _, value, _ in written) == sorted(values)
    for partition, _, key, value, _ in written:
        assert key == value.decode().split(":")[0].encode()
        assert partition == java_murmur2_partition(key, 5), key
    assert len({partition for partition, *_ in written}) > 1, "keys spread over partitions"


class KeyOf:
    """The part of ``user:n`` before the colon, as the key."""

    def serialize(self, record: str) -> bytes:
        return record.split(":")[0].encode()


def test_read_committed_by_default_hides_an_aborted_transactions_records(kafka):
    from confluent_kafka import Producer

    topic = kafka.topic("aborted-in", 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"writer-{topic}"})
    producer.init_transactions(30)
    for value, commit in (("aborted", False), ("committed", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value.encode())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def values(reader_builder):
        reader = reader_builder.set_bounded(KafkaOffsetsInitializer.latest()).build().create_reader(0, 1)
        reader.source.validate()
        reader.open(None)
        got = [value for value, _, _ in read_all(reader)]
        reader.close()
        return got

    assert values(builder(kafka, topic)) == ["committed"]
    # The same records, read uncommitted: the aborted one is there to hide
    assert values(builder(kafka, topic).set_property("isolation.level", "read_uncommitted")) == ["aborted", "committed"]


def test_the_exactly_once_sink_counts_the_transactions_it_commits_and_aborts(kafka):
    topic = kafka.topic("aborted-out", 1)
    sink = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_transactional_id_prefix(f"count-{topic}") \
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_record_serializer(
            KafkaRecordSerializationSchema.builder().set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema()).build()).build()
    sink.validate()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch(["kept"])
    writer.snapshot_state(1)
    writer.notify_checkpoint_complete(1)
    writer.write_batch(["lost"])  # the attempt fails before the next checkpoint
    writer.close()
    assert writer.metrics()["transactions-committed"] == 1 and writer.metrics()["transactions-aborted"] == 1
    assert [value for _, _, _, value, _ in kafka.read_committed(topic)] == [b"kept"]


@pytest.mark.parametrize("timeout_ms, interval_ms, short, needed", [
    (30_000, 1_000, ["the sink's commit timeout (60000 ms"], 60_000),
    (90_000, 60_000, ["twice the checkpoint interval (60000 ms)"], 120_000),
    (20_000, 15_000, ["the sink's commit timeout (60000 ms", "twice the checkpoint interval (15000 ms)"], 60_000),
    (900_000, 60_000, [], None),
    (None, 1_000, [], None),  # librdkafka's default (60 s) fits a commit of a short interval's output
    (None, 600_000, ["twice the checkpoint interval (600000 ms)"], 1_200_000),  # but not of a long one's
])
def test_a_transaction_timeout_a_commit_may_outlast_is_warned_about_once_at_job_start(
        kafka, monkeypatch, caplog, timeout_ms, interval_ms, short, needed):
    class SparkStarted(Exception):
        pass

    def no_spark(slots):
        raise SparkStarted()

    from runtime import StreamExecutionEnvironment

    monkeypatch.setattr("runtime.datastream.stream_execution_environment.obtain_spark_session", no_spark)
    topic = kafka.topic("txn-timeout", 1)
    builder_ = KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap).set_transactional_id_prefix(topic) \
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_record_serializer(
            KafkaRecordSerializationSchema.builder().set_topic(topic)
            .set_value_serialization_schema(SimpleStringSchema()).build())
    if timeout_ms is not None:
        builder_.set_property("transaction.timeout.ms", str(timeout_ms))
    env = StreamExecutionEnvironment.get_execution_environment().enable_checkpointing(interval_ms)
    env.from_collection(["a"], type_info=Types.STRING()).sink_to(builder_.build())
    caplog.set_level(logging.WARNING, logger="operators.kafka.sink")
    with pytest.raises(SparkStarted):
        env.execute("txn-timeout")
    warnings = [r.getMessage() for r in caplog.records if "transaction.timeout.ms" in r.getMessage()]
    if not short:
        assert warnings == []
        return
    assert len(warnings) == 1, warnings
    setting = f"{timeout_ms} ms" if timeout_ms is not None else "60000 ms (librdkafka's default)"
    assert f"transaction.timeout.ms is {setting}, below " in warnings[0]
    assert all(part in warnings[0] for part in short)
    assert f"Raise it to at least {needed} ms with set_property('transaction.timeout.ms', ...)" in warnings[0]
