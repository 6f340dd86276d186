"""librdkafka clients from a Kafka connector's properties, and the errors of an unreachable cluster.

Properties are Kafka's client properties, which librdkafka mostly shares with the Java client. Those only the
Java client or Flink's connector knows are taken out: the connector's own settings (partition discovery,
offset commits, the client id prefix) by the connector, the Java (de)serializer classes (the schemas do that
here) with a note. Anything librdkafka does not know either is a ConfigurationError naming it, before the job
starts.

>>> client_config({"bootstrap.servers": "k:9092", "key.deserializer": "org.apache...StringDeserializer",
...                "fetch.min.bytes": 1})
{'bootstrap.servers': 'k:9092', 'fetch.min.bytes': '1'}
"""

from __future__ import annotations

import logging

from runtime.errors import ConfigurationError

__all__ = ["client_config", "for_role", "with_log", "CONNECTOR_KEYS", "METADATA_TIMEOUT_S", "error_text", "check_properties"]

log = logging.getLogger(__name__)

# Flink's Kafka connector settings: the connector acts on them; they are no client properties.
CONNECTOR_KEYS = frozenset({"partition.discovery.interval.ms", "commit.offsets.on.checkpoint", "client.id.prefix",
                            "register.consumer.metrics", "flink.partition-discovery.interval-millis"})
# The Java client's own settings, meaningless to librdkafka (the connector's schemas turn records into bytes).
_JAVA_ONLY = frozenset({"key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
                        "partitioner.class", "interceptor.classes", "metric.reporters", "security.providers"})
METADATA_TIMEOUT_S = 15.0  # how long the driver waits for the cluster before saying it does not answer
# What one kind of client takes and another warns about (librdkafka shares one configuration among them).
_CONSUMER_ONLY = frozenset({
    "group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store", "isolation.level",
    "auto.offset.reset", "auto.commit.interval.ms", "fetch.min.bytes", "fetch.wait.max.ms", "fetch.max.bytes",
    "max.partition.fetch.bytes", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "partition.assignment.strategy", "enable.partition.eof", "check.crcs", "queued.min.messages",
    "queued.max.messages.kbytes"})
_PRODUCER_ONLY = frozenset({
    "acks", "request.required.acks", "enable.idempotence", "transactional.id", "transaction.timeout.ms",
    "partitioner", "linger.ms", "queue.buffering.max.ms", "batch.size", "batch.num.messages", "compression.type",
    "compression.codec", "message.send.max.retries", "retries", "queue.buffering.max.messages",
    "queue.buffering.max.kbytes", "delivery.timeout.ms", "message.timeout.ms",
    "max.in.flight.requests.per.connection", "max.in.flight"})


def client_config(properties: dict) -> dict:
    """The librdkafka configuration for ``properties`` (values as strings, connector and Java-only keys out)."""
    dropped = sorted(k for k in properties if k in _JAVA_ONLY)
    if dropped:
        log.info("Kafka connector: the Java client's %s mean nothing here (the connector's schemas make the bytes); "
                 "ignored", ", ".join(dropped))
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in properties.items()
            if k not in CONNECTOR_KEYS and k not in _JAVA_ONLY}


def for_role(config: dict, role: str) -> dict:
    """``config`` without what a ``role`` (``consumer``, ``producer``, ``admin``) client would warn about.

    >>> for_role({"bootstrap.servers": "k:9092", "group.id": "g", "acks": "all"}, "admin")
    {'bootstrap.servers': 'k:9092'}
    """
    drop = {"consumer": _PRODUCER_ONLY, "producer": _CONSUMER_ONLY, "admin": _CONSUMER_ONLY | _PRODUCER_ONLY}[role]
    return {k: v for k, v in config.items() if k not in drop}


def with_log(config: dict, **callbacks) -> dict:
    """``config`` with librdkafka's own log lines going to Python's logging (``operators.kafka.librdkafka``), not
    straight to the process's stderr, and ``callbacks`` (e.g. ``error_cb``)."""
    return {**config, "logger": _librdkafka_log, **callbacks}


_librdkafka_log = logging.getLogger("operators.kafka.librdkafka")


def error_text(exc: BaseException) -> str:
    """librdkafka's own words for an error."""
    error = exc.args[0] if getattr(exc, "args", None) else exc
    text = getattr(error, "str", None)
    return text() if callable(text) else str(error)


def check_properties(config: dict, what: str, role: str) -> None:
    """Make a ``role`` (``consumer`` or ``producer``) client of ``config`` once: librdkafka refuses properties it
    does not know, or values that do not parse, at once. ConfigurationError naming them."""
    from confluent_kafka import Consumer, KafkaException, Producer

    try:
        client = (Consumer if role == "consumer" else Producer)(with_log(for_role(config, role)))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ConfigurationError(f"{what}: the Kafka client refuses its properties: {error_text(exc)}. Properties are "
                                 "librdkafka's (mostly the same as the Java client's; see librdkafka's "
                                 "CONFIGURATION.md).") from None
    if role == "consumer":
        client.close()


def unreachable_codes() -> tuple:
    """librdkafka's error codes that say no broker can be reached (down, unresolvable, connection lost)."""
    from confluent_kafka import KafkaError

    return KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE
