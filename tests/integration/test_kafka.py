"""Kafka in and out against a Kafka-protocol broker the session starts (tests/kafka_broker.py): consume, count
per key and produce exactly once through real failures (an exception in an operator, a worker SIGKILLed from
outside, one SIGKILLed between producing a transaction and committing it), restores at other parallelisms, and
event time per partition with an idle partition."""

import collections
import os
import random
import signal
import threading

import pytest

from operators import CollectSink
from runtime import RestartStrategies, StreamExecutionEnvironment, Types
from runtime.common import Duration, SimpleStringSchema, WatermarkStrategy
from runtime.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from runtime.datastream.window import TumblingEventTimeWindows
from tests.integration.chaos import ChaosMap, plan
from tests.integration.jobs import CountPerKey
from tests.integration.kafka_jobs import CountWindow, IntegerSchema, PausingKafkaSink
from tests.integration.paced import PacedSource
from tests.integration.waiting import wait_for

N = 12_000
KEYS = 37
EPOCH = 100_000  # event times of the windows test start here: a Kafka timestamp of 0 means "now" to a producer


def fill(kafka, partitions=4, n=N):
    topic = kafka.topic("numbers", partitions)
    kafka.produce(topic, [(str(i % KEYS), str(i), 1_700_000_000_000 + i) for i in range(n)],
                  partition_of=lambda i: i % partitions)
    return topic


def source_of(kafka, topic, group="counts", bounded=True):
    builder = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics(topic).set_group_id(group)
               .set_starting_offsets(KafkaOffsetsInitializer.earliest())
               .set_value_only_deserializer(SimpleStringSchema()))
    if bounded:
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    return builder.build()


def exactly_once_sink(kafka, topic, sink_class=KafkaSink, prefix="counts"):
    serializer = (KafkaRecordSerializationSchema.builder().set_topic(topic)
                  .set_value_serialization_schema(SimpleStringSchema()).build())
    sink = sink_class(kafka.bootstrap, serializer, DeliveryGuarantee.EXACTLY_ONCE, f"{prefix}-{topic}")
    return sink


def expected_counts(n=N):
    per_key = collections.Counter(i % KEYS for i in range(n))
    return collections.Counter(f"{k}:{c}" for k, total in per_key.items() for c in range(1, total + 1))


def counting_job(env, tmp_path, source, sink, chaos=None):
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    paced = PacedSource(source, per_checkpoint=N // 2 // 8, together=str(tmp_path / "paced"))
    numbers = env.from_source(paced, "numbers").uid("numbers").map(int, output_type=Types.LONG()).uid("parse")
    if chaos is not None:
        numbers = numbers.map(chaos).uid("chaos")
    numbers.key_by(lambda x: x % KEYS).process(CountPerKey()).uid("count") \
        .map(lambda kv: f"{kv[0]}:{kv[1]}", output_type=Types.STRING()).uid("format").sink_to(sink).uid("sink")


def committed_values(kafka, topic):
    return collections.Counter(value.decode() for _, _, _, value, _ in kafka.read_committed(topic))


@pytest.mark.parametrize("failure", ["exception", "kill", "kill-in-commit"])
def test_consume_count_and_produce_exactly_once_through_failures(spark, kafka, tmp_path, failure):
    numbers, counts = fill(kafka), kafka.topic("counts", 2)
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    chaos = None
    if failure == "exception":
        chaos = ChaosMap(plan(str(tmp_path / "chaos"), "raise"), "raise", "raise", after=N // 6)
    sink = exactly_once_sink(kafka, counts, PausingKafkaSink if failure == "kill-in-commit" else KafkaSink)
    if failure == "kill-in-commit":
        sink.pause_directory = plan(str(tmp_path / "pause"), "pause")
    counting_job(env, tmp_path, source_of(kafka, numbers), sink, chaos)
    client = env.execute_async(f"kafka-{failure}")
    master = client._run
    if failure == "kill":  # from outside, at a random moment after one to three completed checkpoints
        after = random.randint(1, 3)
        wait_for(lambda: len(master.coordinator.completed_checkpoints()) >= after or master.ended,
                 what=f"{after} completed checkpoints")
        pid = random.choice([r.pid for r in master.control.registrations.values()])
        os.kill(pid, signal.SIGKILL)
    if failure == "kill-in-commit":  # between producing a transaction's records and committing them
        paused = tmp_path / "pause"
        wait_for(lambda: any(name.startswith("paused-") for name in os.listdir(paused)), what="the paused commit")
        (name,) = [name for name in os.listdir(paused) if name.startswith("paused-")]
        os.kill(int(name.split("-")[1]), signal.SIGKILL)
    result = client.get_job_execution_result()
    assert result.restarts == 1
    assert committed_values(kafka, counts) == expected_counts()


def test_offsets_follow_restores_at_other_parallelisms_nothing_twice_nothing_skipped(spark, kafka, tmp_path):
    numbers = fill(kafka)
    source = source_of(kafka, numbers, group="rescale")
    read = []
    savepoint = None
    for parallelism, stop in ((2, True), (3, True), (1, False)):
        env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
        env.enable_checkpointing(200)
        env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / f"ck-{parallelism}"))
        sink = CollectSink("numbers")
        env.from_source(PacedSource(source, per_checkpoint=N // 20, together=str(tmp_path / f"paced-{parallelism}")),
                        "numbers").uid("numbers").sink_to(sink).uid("sink")
        client = env.execute_async(f"rescale-{parallelism}", restore_from=savepoint)
        if stop:
            wait_for(lambda: len(client._run.coordinator.completed_checkpoints()) >= 2, what="two checkpoints")
            savepoint = client.stop_with_savepoint(str(tmp_path / "savepoints"))
        result = client.get_job_execution_result()
        before, read = read, result.collected(sink)  # the collect sink keeps what the runs before collected
        assert len(read) > len(before), f"the run at parallelism {parallelism} read something"
    assert sorted(read, key=int) == [str(i) for i in range(N)], "every record once, across three parallelisms"
    # Completed checkpoints committed the offsets to the group, for monitoring.
    from confluent_kafka import Consumer, TopicPartition

    group = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "rescale"})
    committed = group.committed([TopicPartition(numbers, p) for p in range(4)], timeout=30)
    group.close()
    assert all(tp.offset > 0 for tp in committed)


def test_event_time_windows_per_partition_fire_past_an_idle_partition_and_stay_exact_after_a_kill(spark, kafka,
                                                                                                  tmp_path):
    topic, out = kafka.topic("events", 4), kafka.topic("windows", 1)
    # Partitions 0-2 each hold keys a/b with event times rising within the partition (not across partitions:
    # one watermark per partition keeps them all on time); partition 3 stays empty, and idle. After the kill and
    # the restore, a tick in each of partitions 0-2 moves event time past the windows.
    records = []
    for partition in range(3):
        for i in range(600):
            key = "ab"[i % 2]
            records.append((partition, (key, f"{key}-{partition}-{i}", EPOCH + 1_000 * (i // 6) + partition)))
    kafka.produce(topic, [r for _, r in records], partition_of=lambda i: records[i][0])
    expected = collections.Counter()
    for partition in range(3):
        for i in range(600):
            expected[f"{'ab'[i % 2]}@{(EPOCH + 1_000 * (i // 6) + partition) // 10_000}"] += 1
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    chaos = ChaosMap(plan(str(tmp_path / "chaos"), "kill"), "kill", "kill", after=200)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(500))
    keyed = KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics(topic) \
        .set_starting_offsets(KafkaOffsetsInitializer.earliest()).set_value_only_deserializer(SimpleStringSchema()) \
        .build()
    (env.from_source(keyed, strategy, "events").uid("events")
        .map(chaos).uid("chaos")
        .key_by(lambda value: value.split("-")[0])
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
        .process(CountWindow()).uid("windows")
        .sink_to(exactly_once_sink(kafka, out, prefix="windows")).uid("sink"))
    client = env.execute_async("kafka-windows")
    try:
        master = client._run
        # restarts counts the restart before the next attempt records what it restored: wait for both
        wait_for(lambda: master.restarts == 1 and len(master.restored_from) == 2
                 and master.restored_from[-1] is not None and master.coordinator.completed_checkpoints()
                 and master.coordinator.completed_checkpoints()[-1] > master.restored_from[-1], timeout=240,
                 what="the restart after the kill, and a checkpoint after it")
        kafka.produce(topic, [("tick", "tick", 1_000_000)] * 3, partition_of=lambda i: i)
        wait_for(lambda: sum(committed_values(kafka, out).values()) >= len(expected), timeout=240,
                 what="every window of the keys read (the watermark passes the idle partition)")
    finally:
        client.cancel()
    windows = committed_values(kafka, out)
    assert set(windows.values()) == {1}, "each window's result once"
    assert collections.Counter({w.rsplit("=", 1)[0]: int(w.rsplit("=", 1)[1]) for w in windows}) == expected


def test_partition_lag_skips_and_transactions_reach_the_rest_api_and_prometheus(spark, kafka, tmp_path):
    import json
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    numbers, counts = fill(kafka, n=400), kafka.topic("counts", 1)
    kafka.produce(numbers, [(None, "not a number", None)], partition_of=lambda i: 0)
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    source = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap).set_topics(numbers)
              .set_value_only_deserializer(IntegerSchema()).set_on_deserialization_error("skip").build())
    env.from_source(source, "numbers").uid("numbers").map(str, output_type=Types.STRING()).uid("format") \
        .sink_to(exactly_once_sink(kafka, counts, prefix="metrics")).uid("sink")
    client = env.execute_async("kafka-metrics")
    base, job = client.get_dashboard_url().split("/#/jobs/")

    def vertex(uid):
        details = json.load(urllib.request.urlopen(f"{base}/jobs/{job}"))
        return next(v for v in details["vertices"] if v["id"] == uid)["metrics"].get("connector") or {}

    try:
        wait_for(lambda: vertex("numbers").get("split-lag") == {f"{numbers}-{p}": 0 for p in range(4)}
                 and vertex("numbers").get("records-skipped") == 1,
                 what="every partition read to its end, one record skipped")
        wait_for(lambda: vertex("sink").get("transactions-committed", 0) > 0, what="a committed transaction")
        # Keys str(i % KEYS) and values str(i) of 400 records, and the one that does not deserialize (no key)
        read = sum(len(str(i % KEYS)) + len(str(i)) for i in range(400)) + len("not a number")
        written = sum(len(str(i)) for i in range(400))  # no keys
        wait_for(lambda: vertex("numbers").get("bytes-read") == read and vertex("sink").get("bytes-written") == written,
                 what="every record's bytes counted in and out")
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
    finally:
        client.cancel()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    lags = {s.labels["split"]: s.value for s in families["chandy_source_split_lag"].samples if s.labels["job"] == job}
    assert lags == {f"{numbers}-{p}": 0 for p in range(4)}
    assert any(s.value == 1 for s in families["chandy_source_records_skipped"].samples if s.labels["job"] == job)
    assert sum(s.value for s in families["chandy_source_bytes_read"].samples if s.labels["job"] == job) == read
    assert sum(s.value for s in families["chandy_sink_bytes_written"].samples if s.labels["job"] == job) == written
    assert sorted(int(v.decode()) for _, _, _, v, _ in kafka.read_committed(counts)) == list(range(400))
