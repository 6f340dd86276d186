"""Kafka in, the keyed reference job, Kafka out: records per second and end-to-end latency, exactly-once and
at-least-once, beside the limit (the same broker's produce and consume rates with ``confluent-kafka`` alone) and
Spark Structured Streaming's JVM count measured in the same run.

The job reads a topic of 4 partitions (values ``str(i % keys)``, written beforehand), counts per key with
``CountPerKey`` (checkpoints every second, parallelism 2) and writes ``"<key>,<count>"`` for every record to an
output topic with ``KafkaSink`` (one output record per input record). Its rate is input records over the job's
wall time, launch included. Every run's output is read back ``read_committed`` and checked against the
plain-Python reference: each key's counts 1..n, each exactly once.

Latency: records produced at half and at a quarter of the mode's measured rate, each stamped with its Kafka
timestamp (the sink writes the input record's timestamp on its output record), read back by a ``read_committed``
consumer: latency is the time it sees a record minus that stamp. Exactly-once output becomes visible when the
checkpoint that holds it completes and its transaction commits, so its latency is bounded below by the checkpoint
interval.

Spark Structured Streaming's Kafka source needs the ``spark-sql-kafka-0-10`` package, which is fetched from
Maven at run time; this machine reaches only PyPI, Debian and npm, so that baseline is reported as not
available rather than run.

The broker is the tests' (``tests/kafka_broker.py``: noida-db, a Kafka-protocol broker, on a free port), or the
cluster in ``CHANDY_TEST_KAFKA``.

    python -m benchmarks.kafka [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import statistics
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["main", "output_is_exact"]

PARTITIONS = 4
MODES = ("exactly_once", "at_least_once")
# Latency at half and a quarter of each mode's rate: on a 2-core machine the benchmark's own producer and reader
# and the broker compete with the job, so half load there is near saturation, and a quarter shows the floor.
LOADS = (0.5, 0.25)


def to_key(value: str) -> int:
    return int(value)


def as_line(key_and_count) -> str:
    return f"{key_and_count[0]},{key_and_count[1]}"


def by_key(key: int) -> int:
    return key


def output_is_exact(lines: list[bytes], records: int, keys: int) -> bool:
    """Whether ``lines`` (``b"<key>,<count>"``) are the reference's: for every key k of ``i % keys`` over
    ``records`` values, the counts 1..n(k), each once.

    >>> output_is_exact([b"0,1", b"1,1", b"0,2"], 3, 2), output_is_exact([b"0,1", b"0,1", b"1,1"], 3, 2)
    (True, False)
    """
    expected = collections.Counter((k, n) for k in range(min(keys, records))
                                   for n in range(1, records // keys + (1 if k < records % keys else 0) + 1))
    got = collections.Counter(tuple(int(x) for x in line.split(b",")) for line in lines)
    return got == expected


def _producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": "true", "linger.ms": "5"})


def produce_input(bootstrap: str, topic: str, records: int, keys: int) -> float:
    """Writes the job's input (record i to partition i % PARTITIONS) as fast as one producer can; records/s."""
    producer = _producer(bootstrap)
    started = time.perf_counter()
    for i in range(records):
        value = str(i % keys).encode()
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:  # librdkafka's queue is full: let it deliver
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "the broker did not take every record"
    return records / (time.perf_counter() - started)


def read_topic(bootstrap: str, topic: str, expected: int, timeout_s: float = 300, on_message=None) -> list[bytes]:
    """The values of ``topic`` (``read_committed``) once ``expected`` of them are there; ``on_message(message)`` is
    called for each as it arrives."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": "false",
                         "fetch.wait.max.ms": "10"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: {len(values)} of {expected} records after {timeout_s:.0f} s")
            for message in consumer.consume(10_000, 0.2):
                if message.error() is None:
                    values.append(message.value())
                    if on_message is not None:
                        on_message(message)
        return values
    finally:
        consumer.close()


def consume_rate(bootstrap: str, topic: str, records: int) -> float:
    started = time.perf_counter()
    read_topic(bootstrap, topic, records)
    return records / (time.perf_counter() - started)


def _declare_job(env, bootstrap: str, in_topic: str, out_topic: str, mode: str, stop_offsets: dict) -> None:
    from runtime.common import WatermarkStrategy
    from runtime.common.serialization import SimpleStringSchema
    from runtime.datastream.connectors.kafka import (
        DeliveryGuarantee,
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )
    from runtime.tools.demo import CountPerKey

    source = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(in_topic)
              .set_value_only_deserializer(SimpleStringSchema())
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.offsets(stop_offsets)).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(out_topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE if mode == "exactly_once"
                                    else DeliveryGuarantee.AT_LEAST_ONCE)
            .set_transactional_id_prefix(f"bench-{out_topic}").build())
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka-in")
        .map(to_key).key_by(by_key).process(CountPerKey()).map(as_line).sink_to(sink))


def run_job(spark, broker, mode: str, records: int, keys: int, parallelism: int, while_running=None) -> dict:
    """The job over ``records`` input records; with ``while_running(in_topic, client)`` the input is written by
    that hook while the job runs, else beforehand. The output is read back and checked."""
    from operators.kafka.partitions import KafkaTopicPartition
    from runtime import StreamExecutionEnvironment

    in_topic, out_topic = broker.topic("bench-in", PARTITIONS), broker.topic("bench-out", PARTITIONS)
    if while_running is None:
        produce_input(broker.bootstrap, in_topic, records, keys)
    stops = {KafkaTopicPartition(in_topic, p): records // PARTITIONS + (1 if p < records % PARTITIONS else 0)
             for p in range(PARTITIONS)}
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    with tempfile.TemporaryDirectory(prefix="chandy-bench-kafka-ck-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        _declare_job(env, broker.bootstrap, in_topic, out_topic, mode, stops)
        started = time.perf_counter()
        client = env.execute_async(f"benchmark-kafka-{mode}")
        hook_result = while_running(in_topic, out_topic, client) if while_running is not None else None
        result = client.get_job_execution_result()
        elapsed = time.perf_counter() - started
    lines = read_topic(broker.bootstrap, out_topic, records)
    exact = output_is_exact(lines, records, keys)
    return {"variant": f"chandy-kafka-{mode}", "records": records, "wall_s": round(elapsed, 3),
            "records_per_s": round(records / elapsed), "checkpoints": len(result.checkpoints),
            "restarts": result.restarts, "exact": exact, "measured": True, "while_running": hook_result}


def _wait_until_running(client, timeout_s: float = 120) -> None:
    """Until the job's first checkpoint completed: its readers are assigned their partitions and records flow (the
    launch before that is no latency of the pipeline)."""
    coordinator = client._run.coordinator
    deadline = time.monotonic() + timeout_s
    while not coordinator.completed_checkpoints():
        if client._run.ended or time.monotonic() > deadline:
            raise RuntimeError("the job did not complete a first checkpoint")
        time.sleep(0.01)


def _latency_hook(bootstrap: str, records: int, keys: int, rate: float):
    """While the job runs: produce ``records`` at ``rate`` per second, stamped with the time of producing, and
    read the output as it becomes visible; the latency percentiles in ms."""
    from benchmarks.latency import percentiles

    def hook(in_topic: str, out_topic: str, client) -> dict:
        latencies: list[float] = []
        _wait_until_running(client)

        def on_message(message) -> None:
            latencies.append(time.time() * 1000 - message.timestamp()[1])

        reader = threading.Thread(target=read_topic, args=(bootstrap, out_topic, records),
                                  kwargs={"on_message": on_message}, daemon=True)
        reader.start()
        producer = _producer(bootstrap)
        started = time.monotonic()
        for i in range(records):
            if i % 100 == 0:  # paced in steps of 100 records
                ahead = started + i / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                producer.poll(0)
            producer.produce(in_topic, value=str(i % keys).encode(), partition=i % PARTITIONS,
                             timestamp=int(time.time() * 1000))
        producer.flush(120)
        produced_s = time.monotonic() - started
        reader.join(300)
        return {"rate": round(rate), "achieved_rate": round(records / produced_s), "samples": len(latencies),
                **percentiles(sorted(latencies))}
    return hook


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kafka", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each mode (alternated)")
    parser.add_argument("--latency-seconds", type=float, default=None)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import ratio, steadiness_verdict, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness, describe_machine
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from tests.kafka_broker import start_broker

    records = args.records or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    latency_seconds = args.latency_seconds or (3 if args.quick else 15)
    steadiness = [cpu_steadiness()]
    broker = start_broker()
    with spark_session(args.parallelism) as spark:
        try:
            limit_topic = broker.topic("bench-limit", PARTITIONS)
            limits = {"produce_records_per_s": round(produce_input(broker.bootstrap, limit_topic, records, args.keys)),
                      "consume_records_per_s": round(consume_rate(broker.bootstrap, limit_topic, records))}
            run_job(spark, broker, "at_least_once", min(records, 20_000), args.keys, args.parallelism)  # warm-up
            runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
            for repeat in range(repeats):
                for mode in MODES if repeat % 2 == 0 else tuple(reversed(MODES)):
                    runs[mode].append(run_job(spark, broker, mode, records, args.keys, args.parallelism))
            medians = {mode: statistics.median(r["records_per_s"] for r in rows) for mode, rows in runs.items()}
            latency = {}
            for load in LOADS:
                for mode in MODES:
                    rate = medians[mode] * load
                    count = max(1000, int(rate * latency_seconds))
                    row = run_job(spark, broker, mode, count, args.keys, args.parallelism,
                                  while_running=_latency_hook(broker.bootstrap, count, args.keys, rate))
                    latency[f"{mode}@{load}"] = {**row.pop("while_running"), "exact": row["exact"],
                                                 "restarts": row["restarts"]}
            jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                        seconds=6 if args.quick else 20)
        finally:
            broker.stop()
    steadiness.append(cpu_steadiness())

    report = {
        "benchmark": "kafka", "quick": args.quick, "machine": describe_machine(),
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1], "verdict": steadiness_verdict(steadiness)},
        "records": records, "parallelism": args.parallelism, "partitions": PARTITIONS, "repeats": repeats,
        "broker": "CHANDY_TEST_KAFKA" if os.environ.get("CHANDY_TEST_KAFKA") else "noida-db (Kafka protocol)",
        "limits_confluent_kafka_alone": limits, "runs": runs, "median_records_per_s": medians,
        "over_consume_limit": {m: ratio(medians[m], limits["consume_records_per_s"]) for m in MODES},
        "over_produce_limit": {m: ratio(medians[m], limits["produce_records_per_s"]) for m in MODES},
        "spark_sss_jvm": jvm, "over_sss_jvm": {m: ratio(medians[m], jvm["records_per_s"]) for m in MODES},
        "spark_sss_kafka_source": "not available: spark-sql-kafka-0-10 comes from Maven, which this machine cannot "
                                  "reach",
        "latency_by_load": latency,
        "exact": all(r["exact"] for rows in runs.values() for r in rows) and all(l["exact"] for l in latency.values()),
    }
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    print(f"confluent-kafka alone: produce {limits['produce_records_per_s']:,}/s, consume "
          f"{limits['consume_records_per_s']:,}/s; SSS JVM count {jvm['records_per_s'] or 0:,}/s")
    for mode in MODES:
        print(f"{mode:14}: runs {[r['records_per_s'] for r in runs[mode]]}/s, median {medians[mode]:,.0f}/s = "
              f"{report['over_consume_limit'][mode]:.2f}x the consume limit, "
              f"{report['over_sss_jvm'][mode] or 0:.2f}x SSS JVM")
        for load in LOADS:
            lat = latency[f"{mode}@{load}"]
            print(f"    latency at {load:.0%} load ({lat['achieved_rate']:,}/s): p50 {lat['p50_ms']} ms, "
                  f"p99 {lat['p99_ms']} ms")
    print(f"exact: {report['exact']}")
    write_report(args.out, "kafka", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
