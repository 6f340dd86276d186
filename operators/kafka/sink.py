"""Writing a stream to Kafka topics: ``NONE``, ``AT_LEAST_ONCE`` or ``EXACTLY_ONCE``.

``NONE`` produces and never waits; ``AT_LEAST_ONCE`` also waits at every checkpoint barrier until the brokers
acknowledged everything sent before it (idempotent producer: no duplicates from librdkafka's own retries).

``EXACTLY_ONCE`` is a :class:`~operators.two_phase_commit.TwoPhaseCommitSink` whose transactions are Kafka
transactions, written ahead: a subtask keeps its records between two barriers, the barrier puts them in the
checkpoint, and when that checkpoint completes they are produced in one Kafka transaction and committed. The
transaction also commits, to a consumer group of the subtask's own (``<prefix>-<run>-<subtask>``), the
transaction's sequence number as an offset: written atomically with the records, it says which of the subtask's
transactions are in Kafka. A commit first reads it and skips a transaction that is already there, so committing
is idempotent, and a restore simply commits what its checkpoint had pending.

Why written ahead, not Flink's way (records produced into a transaction as they come, the transaction resumed
after a restart to commit it): librdkafka cannot resume another producer's transaction, which Flink's Java sink
does through the client's internals. So a checkpoint holds one interval's output of each subtask until it is
committed, and a transaction lasts as long as its commit, which produces one interval's output (see
:meth:`KafkaSink.check_checkpoint_interval` for ``transaction.timeout.ms``). Each subtask
has one transactional id, ``<prefix>-<run>-<subtask>``: opening it fences any earlier producer of that id (a
zombie of a failed attempt), and aborts its open transaction, so a ``read_committed`` reader is never held back
by one.

>>> from runtime.common.serialization import SimpleStringSchema
>>> schema = KafkaRecordSerializationSchema.builder().set_topic_selector(lambda r: f"t-{len(r)}") \\
...     .set_value_serialization_schema(SimpleStringSchema()).build()
>>> schema.serialize("five")
('t-4', None, b'five')
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from operators.kafka.client import (
    check_properties,
    client_config,
    error_text,
    for_role,
    unreachable_codes,
    with_log,
)
from operators.kafka.topics import TopicCreation, ensure_topics
from operators.sinks import DeliveryGuarantee, SinkWriter
from operators.two_phase_commit import RecoveredState, TransactionContext, TwoPhaseCommitSink
from runtime.errors import ConfigurationError, OutputCommitError, ServerUnreachableError
from runtime.protocol.records import timestamps_of

__all__ = ["KafkaSink", "KafkaRecordSerializationSchema", "KafkaRecordSerializationSchemaBuilder",
           "KafkaTopicSelector", "KafkaTransaction"]

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 60.0  # one Kafka call of a commit (init, send offsets, commit) may take this long
LIBRDKAFKA_TRANSACTION_TIMEOUT_MS = 60_000.0  # transaction.timeout.ms when the user sets none
FLUSH_TIMEOUT_S = 120.0  # a barrier's wait for the brokers' acknowledgements (at least once)
_MARKER_PARTITION = 0


class KafkaTopicSelector:
    """Chooses each record's topic (PyFlink's ``KafkaTopicSelector``): implement ``apply``."""

    def apply(self, data) -> str:
        raise NotImplementedError


class KafkaRecordSerializationSchema:
    """How a record becomes a Kafka record: its topic (fixed, or chosen per record), key (optional) and value.
    Build one with ``KafkaRecordSerializationSchema.builder()``."""

    def __init__(self, topic: str | None, topic_selector, key_schema, value_schema):
        self.topic = topic
        self.topic_selector = topic_selector
        self.key_schema = key_schema
        self.value_schema = value_schema

    @staticmethod
    def builder() -> "KafkaRecordSerializationSchemaBuilder":
        return KafkaRecordSerializationSchemaBuilder()

    def serialize(self, record) -> tuple[str, bytes | None, bytes]:
        """``(topic, key, value)`` of ``record``."""
        selector = self.topic_selector
        topic = self.topic if selector is None else (selector.apply(record) if isinstance(selector, KafkaTopicSelector)
                                                     else selector(record))
        key = self.key_schema.serialize(record) if self.key_schema is not None else None
        return topic, key, self.value_schema.serialize(record)


class KafkaRecordSerializationSchemaBuilder:
    def __init__(self):
        self._topic = None
        self._selector = None
        self._key = None
        self._value = None

    def set_topic(self, topic: str) -> "KafkaRecordSerializationSchemaBuilder":
        if self._selector is not None:
            raise ConfigurationError("Topic selector already set.")
        self._topic = topic
        return self

    def set_topic_selector(self, topic_selector) -> "KafkaRecordSerializationSchemaBuilder":
        if not (isinstance(topic_selector, KafkaTopicSelector) or callable(topic_selector)):
            raise TypeError("topic_selector must be KafkaTopicSelector or a callable")
        if self._topic is not None or self._selector is not None:
            raise ConfigurationError("Topic selector already set.")
        self._selector = topic_selector
        return self

    def set_key_serialization_schema(self, key_serialization_schema) -> "KafkaRecordSerializationSchemaBuilder":
        if self._key is not None:
            raise ConfigurationError("Key serializer already set.")
        self._key = key_serialization_schema
        return self

    def set_value_serialization_schema(self, value_serialization_schema) -> "KafkaRecordSerializationSchemaBuilder":
        if self._value is not None:
            raise ConfigurationError("Value serializer already set.")
        self._value = value_serialization_schema
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._value is None:
            raise ConfigurationError("No value serializer is configured: set_value_serialization_schema(...).")
        if self._topic is None and self._selector is None:
            raise ConfigurationError("No topic selector is configured: set_topic(...) or set_topic_selector(...).")
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._key, self._value)


@dataclass
class KafkaTransaction:
    """One subtask's records between two checkpoint barriers, kept in the checkpoint until they are in Kafka:
    ``(topic, key, value, timestamp ms or None)`` each."""

    run_id: str
    subtask: int
    sequence: int
    records: list = field(default_factory=list, repr=False)  # an interval's output: too long to show


class KafkaSink(TwoPhaseCommitSink):
    """Writes records to Kafka with ``serializer`` (a :class:`KafkaRecordSerializationSchema`). Built by PyFlink's
    ``KafkaSink.builder()`` (:mod:`runtime.datastream.connectors.kafka`)."""

    def __init__(self, bootstrap_servers: str | None, serializer: KafkaRecordSerializationSchema | None,
                 delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.NONE,
                 transactional_id_prefix: str | None = None, properties: dict | None = None,
                 create_topics: TopicCreation | None = None):
        self.properties = dict(properties or {})
        if bootstrap_servers:
            self.properties["bootstrap.servers"] = bootstrap_servers
        self.serializer = serializer
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.name = "KafkaSink"
        self.write_timestamps = True
        self.create_topics = create_topics  # a missing topic is created with this, when set
        self._clients = None  # this process's producers and marker readers (not pickled)
        self.committed = 0  # this process's transactions committed (skipped ones, already in Kafka, not counted)
        self.aborted = 0
        self.bytes_written = 0  # key and value bytes of the records in those transactions

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_clients"] = None
        return state

    # -- the driver ---------------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return self.properties.get("bootstrap.servers", "")

    def producer_config(self) -> dict:
        config = client_config(self.properties)
        config.setdefault("partitioner", "murmur2_random")  # the Java client's: the same key, the same partition
        if self.delivery_guarantee is not DeliveryGuarantee.NONE:
            config.setdefault("enable.idempotence", "true")
        return config

    def validate(self) -> None:
        if not self.properties.get("bootstrap.servers"):
            raise ConfigurationError("KafkaSink: set_bootstrap_servers('host:9092,...') is missing.")
        if self.serializer is None:
            raise ConfigurationError("KafkaSink: set_record_serializer(KafkaRecordSerializationSchema.builder()..."
                                     "build()) is missing.")
        if self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE and not self.transactional_id_prefix:
            raise ConfigurationError("KafkaSink: EXACTLY_ONCE delivery guarantee requires a transactionalIdPrefix to "
                                     "be set: set_transactional_id_prefix('<unique per job on this cluster, stable "
                                     "across its restarts>').")
        config = self.producer_config()
        check_properties(config, "KafkaSink", "producer")
        if self.serializer.topic is not None:
            ensure_topics(config, [self.serializer.topic], self.create_topics, "KafkaSink")
        super().validate()

    def check_checkpoint_interval(self, interval_ms: float | None) -> None:
        """Driver, before launch: warn when the user's ``transaction.timeout.ms`` is shorter than a commit may take
        (the brokers abort a transaction open longer, and the commit fails): one step's timeout, or twice the
        checkpoint interval, since a commit produces one interval's output in one transaction, and that takes about
        as long as the interval when the brokers take the output only as fast as the job makes it."""
        if not self.commits_on_checkpoints:
            return
        timeout_ms = float(self.properties.get("transaction.timeout.ms", LIBRDKAFKA_TRANSACTION_TIMEOUT_MS))
        setting = "" if "transaction.timeout.ms" in self.properties else " (librdkafka's default)"
        needed = [(COMMIT_TIMEOUT_S * 1000, f"the sink's commit timeout ({COMMIT_TIMEOUT_S * 1000:.0f} ms, which one "
                   "step of a commit may take)")]
        if interval_ms:
            needed.append((2 * interval_ms, f"twice the checkpoint interval ({interval_ms:.0f} ms)"))
        short = [(ms, what) for ms, what in needed if timeout_ms < ms]
        if short:
            log.warning("KafkaSink: transaction.timeout.ms is %.0f ms%s, below %s: the brokers abort a transaction open "
                        "longer, and a commit they abort fails the attempt (its restart commits it again). Raise it "
                        "to at least %.0f ms with set_property('transaction.timeout.ms', ...) (the brokers' "
                        "transaction.max.timeout.ms caps it, 15 minutes by default).", timeout_ms, setting,
                        " and ".join(what for _, what in short), max(ms for ms, _ in short))

    @property
    def commits_on_checkpoints(self) -> bool:
        return self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        if self.commits_on_checkpoints:
            return super().create_writer(subtask_index, parallelism)
        return _ProducingWriter(self, self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE)

    def merge_results(self, results: list):
        """Driver, end of a bounded job: exactly once commits what no checkpoint did (and says how many
        transactions); otherwise every record was sent already, and this is how many."""
        if self.commits_on_checkpoints:
            return super().merge_results(results)
        return sum(results)

    # -- records ------------------------------------------------------------------------------------------

    def encode(self, records: list) -> list:
        """``(topic, key, value, timestamp)`` of each record: the record's event time becomes the Kafka record's
        timestamp, as Flink's sink writes it."""
        serialize = self.serializer.serialize
        stamps = timestamps_of(records) if self.write_timestamps else None
        if stamps is None:
            return [(*serialize(record), None) for record in records]
        return [(*serialize(record), stamp) for record, stamp in zip(records, stamps)]

    # -- transactions (EXACTLY_ONCE) ----------------------------------------------------------------------

    def transactional_id(self, run_id: str, subtask: int) -> str:
        return f"{self.transactional_id_prefix}-{run_id}-{subtask}"

    def begin_transaction(self, context: TransactionContext) -> KafkaTransaction:
        # The subtask's first transaction opens its transactional id, fencing any earlier producer of it (and
        # aborting what that one left open) before anything of this attempt is committed.
        self._committer().producer(self.transactional_id(context.run_id, context.subtask))
        return KafkaTransaction(context.run_id, context.subtask, context.sequence)

    def write(self, transaction: KafkaTransaction, records: list) -> None:
        transaction.records.extend(self.encode(records))

    def pre_commit(self, transaction: KafkaTransaction) -> None:
        """Nothing to do: the records go into the checkpoint with the pending transaction."""

    def commit(self, transaction: KafkaTransaction) -> None:
        """Produce and commit ``transaction`` in one Kafka transaction, unless it is there already."""
        if transaction.records and self._committer().commit(transaction):
            self.committed += 1
            self.bytes_written += _record_bytes(transaction.records)

    def abort(self, transaction: KafkaTransaction) -> None:
        transaction.records.clear()
        self.aborted += 1

    def metrics(self) -> dict:
        return {"transactions-committed": self.committed, "transactions-aborted": self.aborted,
                "bytes-written": self.bytes_written}

    def recover(self, state: RecoveredState) -> None:
        """Commit what the checkpoint had pending; then fence the transactional ids of subtasks the job no longer
        has (their producers may have left a transaction open, which would hold ``read_committed`` readers back)."""
        super().recover(state)
        committer = self._committer()
        for subtask in sorted(state.next_sequence):
            committer.producer(self.transactional_id(state.run_id, subtask))

    def _committer(self) -> "_Committer":
        if self._clients is None:
            self._clients = _Committer(self)
        return self._clients

    def close_clients(self) -> None:
        if self._clients is not None:
            self._clients.close()
            self._clients = None


class _Committer:
    """One process's transactional producers (one per transactional id) and marker readers (one per group)."""

    def __init__(self, sink: KafkaSink):
        self.sink = sink
        self.producers: dict = {}
        self.broker_error = _BrokerErrors()
        self.readers: dict = {}

    def producer(self, transactional_id: str):
        from confluent_kafka import KafkaException, Producer

        producer = self.producers.get(transactional_id)
        if producer is None:
            config = for_role(self.sink.producer_config(), "producer")
            config["transactional.id"] = transactional_id
            producer = Producer(with_log(config, error_cb=self.broker_error))
            try:
                producer.init_transactions(COMMIT_TIMEOUT_S)  # fences earlier producers of the id, aborts their open one
            except KafkaException as exc:
                raise ServerUnreachableError(f"KafkaSink: opening transactional id {transactional_id!r} on "
                                             f"{self.sink.bootstrap_servers} failed: {error_text(exc)}"
                                             f"{self.broker_error.since()}") from None
            self.producers[transactional_id] = producer
        return producer

    def reader(self, group: str):
        from confluent_kafka import Consumer

        reader = self.readers.get(group)
        if reader is None:
            config = for_role(client_config(self.sink.properties), "consumer")
            config.update({"group.id": group, "enable.auto.commit": "false", "isolation.level": "read_committed"})
            reader = self.readers[group] = Consumer(with_log(config))
        return reader

    def commit(self, transaction: KafkaTransaction) -> bool:
        """Whether it committed (False: the transaction was in Kafka already)."""
        from confluent_kafka import KafkaException, TopicPartition

        transactional_id = self.sink.transactional_id(transaction.run_id, transaction.subtask)
        group = transactional_id  # the consumer group whose offset marks this subtask's committed transactions
        marker_topic = transaction.records[0][0]
        producer = self.producer(transactional_id)
        reader = self.reader(group)
        done = transaction.sequence + 1
        try:
            (marker,) = reader.committed([TopicPartition(marker_topic, _MARKER_PARTITION)], timeout=COMMIT_TIMEOUT_S)
            if marker.offset >= done:
                log.info("KafkaSink: transaction %d of %s is in Kafka already", transaction.sequence, transactional_id)
                return False
            producer.begin_transaction()
            for topic, key, value, timestamp in transaction.records:
                _produce(producer, topic, key, value, timestamp)
            producer.send_offsets_to_transaction([TopicPartition(marker_topic, _MARKER_PARTITION, done)],
                                                 reader.consumer_group_metadata(), COMMIT_TIMEOUT_S)
            self.commit_transaction(producer)
            return True
        except KafkaException as exc:
            error = exc.args[0]
            self.producers.pop(transactional_id, None)  # whatever state it is in, the next commit opens a new one
            if getattr(error, "txn_requires_abort", lambda: False)():
                try:
                    producer.abort_transaction(COMMIT_TIMEOUT_S)
                except KafkaException:
                    pass
            if getattr(error, "code", lambda: None)() in _fenced_codes():
                raise OutputCommitError(
                    f"KafkaSink: the transactional id {transactional_id!r} was taken over by another producer: "
                    "another job writes with the same transactional id prefix and run (one restored from the same "
                    "checkpoint or savepoint while this one runs?). Stop one of them, or give each job its own "
                    "set_transactional_id_prefix(...).") from None
            try:
                producer.poll(0)  # serves the error callbacks queued meanwhile: librdkafka's reason for a timeout
            except KafkaException:  # a fatal error: the one in hand says it
                pass
            raise ServerUnreachableError(f"KafkaSink: committing transaction {transaction.sequence} of "
                                         f"{transactional_id} to {self.sink.bootstrap_servers} failed: "
                                         f"{error_text(exc)}{self.broker_error.since()} (the restart commits it "
                                         "again)") from None

    def commit_transaction(self, producer) -> None:
        """The last step: the records and the marker become visible together."""
        producer.commit_transaction(COMMIT_TIMEOUT_S)

    def close(self) -> None:
        for reader in self.readers.values():
            try:
                reader.close()
            except Exception:  # closing is best effort: the process ends soon
                pass
        self.readers.clear()
        self.producers.clear()


def _produce(producer, topic: str, key, value, timestamp, on_delivery=None) -> None:
    """One record into librdkafka's queue (with its timestamp, when it has one), waiting while the queue is full."""
    extra = {} if on_delivery is None else {"on_delivery": on_delivery}
    if timestamp is not None:
        extra["timestamp"] = timestamp
    while True:
        try:
            producer.produce(topic, value, key, **extra)
            return
        except BufferError:  # librdkafka's queue is full: let it send, then go on
            producer.poll(0.05)


class _BrokerErrors:
    """A producer's error callback: keeps librdkafka's newest words about brokers it cannot reach, which its
    timeouts do not repeat ("Timed out", "Local: Message timed out"), with when they came: an error names them
    only while they are recent, not a disconnect long past. Other client errors are logged only."""

    RECENT_S = 2 * COMMIT_TIMEOUT_S  # a failing call waited at most about this long: older words are another story

    def __init__(self):
        self.text = ""
        self.at = float("-inf")
        self.logged = float("-inf")

    def __call__(self, error) -> None:
        now = time.monotonic()
        if error.code() in unreachable_codes():
            self.text, self.at = error.str(), now
        if now - self.logged >= 10.0:  # librdkafka reports every failed reconnect: a few a second
            self.logged = now
            log.warning("KafkaSink: %s", error.str())

    def since(self) -> str:
        recent = self.text and time.monotonic() - self.at <= self.RECENT_S
        return f" (librdkafka: {self.text})" if recent else ""


def _record_bytes(records) -> int:
    """Key and value bytes of encoded records, as Kafka holds them."""
    return sum(len(value) + (len(key) if key is not None else 0) for _, key, value, _ in records)


def _fenced_codes():
    from confluent_kafka import KafkaError

    return (KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED)


class _ProducingWriter(SinkWriter):
    """``NONE`` and ``AT_LEAST_ONCE``: produce as records come; at least once also waits for the brokers'
    acknowledgements at every barrier and at the end. A record the brokers refuse for good fails the job."""

    def __init__(self, sink: KafkaSink, flush_at_barriers: bool):
        self.sink = sink
        self.flush_at_barriers = flush_at_barriers
        self.producer = None
        self.failure: str | None = None
        self.sent = 0
        self.bytes_written = 0
        self.broker_error = _BrokerErrors()

    def open(self, runtime_context) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(with_log(for_role(self.sink.producer_config(), "producer"),
                                          error_cb=self.broker_error))

    def _delivered(self, error, message) -> None:
        if error is not None and self.failure is None:
            self.failure = f"{error.str()} (topic {message.topic()})"

    def _check(self) -> None:
        if self.failure is not None:
            raise ServerUnreachableError(f"KafkaSink: the brokers at {self.sink.bootstrap_servers} refused a record: "
                                         f"{self.failure}")

    def write_batch(self, records: list) -> None:
        self._check()
        producer, delivered = self.producer, self._delivered
        encoded = self.sink.encode(records)
        for topic, key, value, timestamp in encoded:
            _produce(producer, topic, key, value, timestamp, delivered)
        self.sent += len(records)
        self.bytes_written += _record_bytes(encoded)
        producer.poll(0)

    def _flush(self, why: str) -> None:
        left = self.producer.flush(FLUSH_TIMEOUT_S)
        if left:
            raise ServerUnreachableError(f"KafkaSink: {left} records were not acknowledged within "
                                         f"{FLUSH_TIMEOUT_S:.0f} s ({why}) by the brokers at "
                                         f"{self.sink.bootstrap_servers}{self.broker_error.since()}: check that they "
                                         "run and that the executors can reach them.")
        self._check()

    def snapshot_state(self, checkpoint_id: int):
        if self.flush_at_barriers:
            self._flush(f"at checkpoint {checkpoint_id}")
        return []

    def finish(self) -> None:
        self._flush("at the end of the input")

    def result(self) -> int:
        return self.sent

    def metrics(self) -> dict:
        return {"records-sent": self.sent, "bytes-written": self.bytes_written}

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(5)
            self.producer = None
