"""A Kafka-protocol broker for the tests, and what the tests do with topics.

The session starts one broker (the pip package ``noida-db``, a Kafka-protocol server: topics and partitions,
consumer groups, transactions with ``read_committed``, fencing) in a data directory of its own, on
``localhost:9092`` when that port is free (PyFlink's examples assume it), else on a free port. With the
environment variable ``CHANDY_TEST_KAFKA=host:port`` the same tests run against that cluster instead (a real
Kafka), and nothing is started.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

__all__ = ["KafkaBroker", "start_broker", "EXTERNAL_ENV"]

EXTERNAL_ENV = "CHANDY_TEST_KAFKA"


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise RuntimeError("no free port")


class KafkaBroker:
    """A running broker: ``bootstrap`` is its address."""

    def __init__(self, bootstrap: str, data_dir: str | None):
        self.bootstrap = bootstrap
        self.data_dir = data_dir  # None: not ours to stop

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def topic(self, prefix: str, partitions: int) -> str:
        """A new topic, unique to the caller, with ``partitions`` partitions. Kept forever: retention goes by the
        records' timestamps, and tests write timestamps of their own (a week old, and Kafka would delete them)."""
        from confluent_kafka.admin import NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin = self.admin()  # kept while its futures resolve: a destroyed client fails them
        for future in admin.create_topics([NewTopic(name, partitions, 1, config={"retention.ms": "-1"})]).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while len(admin.list_topics(timeout=10).topics.get(name).partitions or {}) < partitions:
            assert time.monotonic() < deadline, f"topic {name} did not get its partitions"
            time.sleep(0.05)
        return name

    def produce(self, topic: str, records, partition_of=None) -> None:
        """``records``: ``(key, value, timestamp ms)`` each (bytes or str key/value); ``partition_of(i)`` picks the
        i-th record's partition (default: by key)."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": "true",
                             "partitioner": "murmur2_random"})
        for i, (key, value, timestamp) in enumerate(records):
            extra = {} if partition_of is None else {"partition": partition_of(i)}
            producer.produce(topic, value=_bytes(value), key=_bytes(key), timestamp=timestamp or 0, **extra)
            if i % 10_000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0, "the test broker did not take every record"

    def read_committed(self, topic: str) -> list[tuple]:
        """Every committed record of ``topic`` now, as ``(partition, offset, key, value, timestamp)``, in each
        partition's order."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                             "isolation.level": "read_committed", "enable.auto.commit": "false",
                             "enable.partition.eof": "true"})
        try:
            partitions = sorted(self.admin().list_topics(timeout=10).topics[topic].partitions)
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            records, ended = [], set()
            deadline = time.monotonic() + 60
            while len(ended) < len(partitions):
                assert time.monotonic() < deadline, f"reading {topic} took more than 60 s"
                for message in consumer.consume(1000, 0.5):
                    if message.error() is not None:
                        if message.error().code() == -191:  # _PARTITION_EOF
                            ended.add(message.partition())
                        continue
                    records.append((message.partition(), message.offset(), message.key(), message.value(),
                                    message.timestamp()[1]))
            return records
        finally:
            consumer.close()

    def stop(self) -> None:
        if self.data_dir is not None:
            subprocess.run([_noida(), "down", "--data-dir", self.data_dir], capture_output=True, timeout=60)
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _bytes(value):
    return value.encode() if isinstance(value, str) else value


def _noida() -> str:
    return os.path.join(os.path.dirname(sys.executable), "noida-db")


def start_broker(private: bool = False) -> KafkaBroker:
    """The session's broker; ``private``: one of the caller's own, on a free port (always ``noida-db``), for a test
    that stops it."""
    external = os.environ.get(EXTERNAL_ENV)
    if external and not private:
        return KafkaBroker(external, None)
    for attempt in range(3):
        data_dir = tempfile.mkdtemp(prefix="chandy-kafka-")
        port = _free_port(0 if private or attempt else 9092)
        out = subprocess.run([_noida(), "up", "--data-dir", data_dir, "--only", "kafka", "--kafka-port", str(port),
                              "--host", "127.0.0.1"], capture_output=True, text=True, timeout=120)
        broker = KafkaBroker(f"localhost:{port}", data_dir)
        if out.returncode == 0:
            break
        broker.stop()
        # The port was free when probed and taken before the broker bound it: the other pytest-xdist worker's
        # session broker, starting at the same moment, is the usual taker. Another free port will do.
        if "already in use" not in out.stdout + out.stderr or attempt == 2:
            raise RuntimeError(f"noida-db did not start: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    deadline = time.monotonic() + 60
    while True:
        try:
            broker.admin().list_topics(timeout=5)
            return broker
        except Exception:
            if time.monotonic() > deadline:
                broker.stop()
                raise
            time.sleep(0.1)
