"""PyFlink's ``pyflink.datastream.connectors.kafka``: ``KafkaSource`` and ``KafkaSink`` with PyFlink's builders, on
librdkafka (``confluent-kafka``), exactly once.

The builders make Chandy's :class:`operators.kafka.source.KafkaSource` and :class:`operators.kafka.sink.KafkaSink`
(the classes here are those with PyFlink's static ``builder()`` added). Properties are Kafka client properties
(librdkafka's, mostly the same as the Java client's); the Java client's (de)serializer classes are ignored, since
the schemas turn records into bytes here.

>>> from runtime.common.serialization import SimpleStringSchema
>>> source = (KafkaSource.builder().set_bootstrap_servers("localhost:9092").set_topics("orders", "refunds")
...           .set_group_id("audit").set_starting_offsets(KafkaOffsetsInitializer.earliest())
...           .set_value_only_deserializer(SimpleStringSchema()).build())
>>> source.describe_subscription(), source.bounded
("topics ['orders', 'refunds']", False)
>>> sink = (KafkaSink.builder().set_bootstrap_servers("localhost:9092")
...         .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic("counts")
...                                .set_value_serialization_schema(SimpleStringSchema()).build())
...         .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix("counts").build())
>>> sink.delivery_guarantee
<DeliveryGuarantee.EXACTLY_ONCE: 'EXACTLY_ONCE'>

Differences from PyFlink to know about: ``set_on_deserialization_error("skip")`` is Chandy's (skip records that
do not deserialize, counted, instead of failing the job); ``isolation.level`` defaults to ``read_committed``; the
exactly-once sink keeps each checkpoint's records in the checkpoint until they are committed (see
:mod:`operators.kafka.sink` for why).
"""

from __future__ import annotations

import warnings
from typing import Any

from operators.kafka import sink as _sink
from operators.kafka import source as _source
from operators.kafka.offsets import KafkaOffsetResetStrategy, KafkaOffsetsInitializer
from operators.kafka.partitions import KafkaTopicPartition
from operators.kafka.sink import KafkaRecordSerializationSchema, KafkaRecordSerializationSchemaBuilder, KafkaTopicSelector
from operators.kafka.topics import TopicCreation
from operators.sinks import DeliveryGuarantee
from runtime.errors import ApiUsageError, ConfigurationError

__all__ = ["KafkaSource", "KafkaSourceBuilder", "KafkaSink", "KafkaSinkBuilder", "KafkaTopicPartition",
           "KafkaOffsetsInitializer", "KafkaOffsetResetStrategy", "KafkaRecordSerializationSchema",
           "KafkaRecordSerializationSchemaBuilder", "KafkaTopicSelector", "DeliveryGuarantee", "FlinkKafkaConsumer",
           "FlinkKafkaProducer", "Semantic"]


class _PropertiesAndTopics:
    """What both builders take alike: client properties, and whether to create missing topics."""

    _properties: dict
    _create_topics: TopicCreation | None

    def set_property(self, key: str, value: str):
        self._properties[key] = value
        return self

    def set_create_missing_topics(self, num_partitions: int = -1, replication_factor: int = -1):
        """Chandy's own: create the topics that do not exist yet before the job starts (``-1``: the cluster's
        default), instead of failing on them."""
        self._create_topics = TopicCreation(num_partitions, replication_factor)
        return self


class KafkaSourceBuilder(_PropertiesAndTopics):
    """PyFlink's builder of a :class:`KafkaSource`: the bootstrap servers, one subscription (topics, a pattern or
    partitions) and a deserializer are needed; the rest has Flink's defaults (earliest offsets, unbounded)."""

    def __init__(self):
        self._properties: dict[str, Any] = {}
        self._topics = self._pattern = self._partitions = None
        self._deserializer = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping = None
        self._bounded = False
        self._on_error = "fail"
        self._create_topics = None

    def _subscribe(self, mode: str) -> None:
        taken = [name for name, value in (("topics", self._topics), ("topic pattern", self._pattern),
                                          ("partitions", self._partitions)) if value is not None]
        if taken:
            raise ApiUsageError(f"Cannot use {mode} for consumption because {taken[0]} are already set for "
                                "consumption: a KafkaSource subscribes one way.")

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSourceBuilder":
        self._properties["bootstrap.servers"] = bootstrap_servers
        return self

    def set_group_id(self, group_id: str) -> "KafkaSourceBuilder":
        self._properties["group.id"] = group_id
        return self

    def set_topics(self, *topics: str) -> "KafkaSourceBuilder":
        self._subscribe("topics")
        if len(topics) == 1 and isinstance(topics[0], (list, tuple)):
            topics = tuple(topics[0])
        self._topics = list(topics)
        return self

    def set_topic_pattern(self, topic_pattern: str) -> "KafkaSourceBuilder":
        self._subscribe("a topic pattern")
        self._pattern = topic_pattern
        return self

    def set_partitions(self, partitions) -> "KafkaSourceBuilder":
        self._subscribe("partitions")
        partitions = set(partitions)
        if not all(isinstance(p, KafkaTopicPartition) for p in partitions):
            raise ConfigurationError("set_partitions() takes KafkaTopicPartition(topic, partition) values.")
        self._partitions = partitions
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        self._starting = _initializer(starting_offsets_initializer, "set_starting_offsets")
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """Stop at these offsets, yet stay an unbounded source (Flink's CONTINUOUS_UNBOUNDED)."""
        self._stopping = _initializer(stopping_offsets_initializer, "set_unbounded")
        self._bounded = False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> "KafkaSourceBuilder":
        """A bounded source: the job ends once every partition reached these offsets."""
        self._stopping = _initializer(stopping_offsets_initializer, "set_bounded")
        self._bounded = True
        return self

    def set_value_only_deserializer(self, deserialization_schema) -> "KafkaSourceBuilder":
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> "KafkaSourceBuilder":
        self._properties["client.id.prefix"] = prefix
        return self


    def set_properties(self, props: dict) -> "KafkaSourceBuilder":
        self._properties.update(props)
        return self

    def set_on_deserialization_error(self, action: str) -> "KafkaSourceBuilder":
        """Chandy's: ``"fail"`` (the default) or ``"skip"`` records whose value does not deserialize."""
        self._on_error = action
        return self

    def build(self) -> "KafkaSource":
        properties = dict(self._properties)
        return KafkaSource(properties.pop("bootstrap.servers", None), self._topics, self._pattern, self._partitions,
                           self._deserializer, properties.get("group.id"), self._starting, self._stopping,
                           self._bounded, properties, self._on_error, self._create_topics)


class KafkaSource(_source.KafkaSource):
    """Reads Kafka topics exactly once; build one with ``KafkaSource.builder()`` and read it with
    ``env.from_source(source, watermark_strategy, name)``. Each record's event time is its Kafka timestamp, and a
    watermark strategy keeps one watermark per partition.

    >>> from runtime.common.serialization import SimpleStringSchema
    >>> source = KafkaSource.builder().set_bootstrap_servers("localhost:9092").set_topic_pattern("orders-.*") \\
    ...     .set_value_only_deserializer(SimpleStringSchema()).set_bounded(KafkaOffsetsInitializer.latest()).build()
    >>> source.describe_subscription(), source.bounded
    ("topics matching 'orders-.*'", True)
    """

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()


def _initializer(value, where: str) -> KafkaOffsetsInitializer:
    if not isinstance(value, KafkaOffsetsInitializer):
        raise ConfigurationError(f"{where}() takes a KafkaOffsetsInitializer (earliest(), latest(), "
                                 f"committed_offsets(...), timestamp(...), offsets(...)), not {value!r}.")
    return value


class KafkaSinkBuilder(_PropertiesAndTopics):
    """PyFlink's builder of a :class:`KafkaSink`: bootstrap servers and a record serializer are needed;
    ``EXACTLY_ONCE`` needs a transactional id prefix too, unique per job on a cluster and stable across its
    restarts (as in Flink)."""

    def __init__(self):
        self._properties: dict[str, Any] = {}
        self._serializer = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix = None
        self._create_topics = None

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSinkBuilder":
        self._properties["bootstrap.servers"] = bootstrap_servers
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> "KafkaSinkBuilder":
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise ConfigurationError(f"set_delivery_guarantee() takes a DeliveryGuarantee (EXACTLY_ONCE, "
                                     f"AT_LEAST_ONCE, NONE), not {delivery_guarantee!r}.")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> "KafkaSinkBuilder":
        if len(transactional_id_prefix.encode()) > 64000:
            raise ConfigurationError("set_transactional_id_prefix(): at most 64000 bytes (Flink's limit).")
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> "KafkaSinkBuilder":
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise ConfigurationError("set_record_serializer() takes what KafkaRecordSerializationSchema.builder() "
                                     "builds.")
        self._serializer = record_serializer
        return self


    def build(self) -> "KafkaSink":
        properties = dict(self._properties)
        return KafkaSink(properties.pop("bootstrap.servers", None), self._serializer, self._guarantee, self._prefix,
                         properties, self._create_topics)


class KafkaSink(_sink.KafkaSink):
    __doc__ = _sink.KafkaSink.__doc__

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        return KafkaSinkBuilder()


# -- PyFlink's older names (deprecated in Flink 1.16), on the same code ---------------------------------------------


class Semantic:
    """The legacy producer's guarantees: ``Semantic.EXACTLY_ONCE`` and the others are DeliveryGuarantee values.

    >>> Semantic.EXACTLY_ONCE is DeliveryGuarantee.EXACTLY_ONCE
    True
    """

    EXACTLY_ONCE = DeliveryGuarantee.EXACTLY_ONCE
    AT_LEAST_ONCE = DeliveryGuarantee.AT_LEAST_ONCE
    NONE = DeliveryGuarantee.NONE


class FlinkKafkaConsumer(_source.KafkaSource):
    """PyFlink's legacy consumer (``env.add_source(FlinkKafkaConsumer(topics, schema, properties))``): the same
    reader as :class:`KafkaSource`. Starts from the group's committed offsets, as Flink's did, unless told
    otherwise (``set_start_from_earliest()`` ...). Prefer ``KafkaSource.builder()``.

    >>> import warnings
    >>> from runtime.common.serialization import SimpleStringSchema
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     consumer = FlinkKafkaConsumer("orders", SimpleStringSchema(), {"bootstrap.servers": "localhost:9092",
    ...                                                                   "group.id": "audit"})
    >>> consumer.set_start_from_earliest().starting_offsets
    KafkaOffsetsInitializer.earliest()
    """

    def __init__(self, topics, deserialization_schema, properties: dict):
        warnings.warn("FlinkKafkaConsumer is deprecated (as in Flink 1.16): use KafkaSource.builder() and "
                      "env.from_source(...)", DeprecationWarning, stacklevel=2)
        topics = [topics] if isinstance(topics, str) else list(topics)
        properties = dict(properties)
        reset = {"earliest": KafkaOffsetResetStrategy.EARLIEST, "latest": KafkaOffsetResetStrategy.LATEST}.get(
            str(properties.get("auto.offset.reset", "latest")).lower(), KafkaOffsetResetStrategy.LATEST)
        super().__init__(properties.pop("bootstrap.servers", None), topics, deserializer=deserialization_schema,
                         group_id=properties.get("group.id"),
                         starting_offsets=KafkaOffsetsInitializer.committed_offsets(reset), properties=properties)

    def validate(self) -> None:
        if self.starting_offsets.needs_group and self.group_id is None:  # no group: its reset strategy decides
            self.starting_offsets = (KafkaOffsetsInitializer.earliest() if self.starting_offsets.reset_strategy is
                                     KafkaOffsetResetStrategy.EARLIEST else KafkaOffsetsInitializer.latest())
        super().validate()

    def set_commit_offsets_on_checkpoints(self, commit_on_checkpoints: bool) -> "FlinkKafkaConsumer":
        self.properties["commit.offsets.on.checkpoint"] = "true" if commit_on_checkpoints else "false"
        return self

    def set_start_from_earliest(self) -> "FlinkKafkaConsumer":
        self.starting_offsets = KafkaOffsetsInitializer.earliest()
        return self

    def set_start_from_latest(self) -> "FlinkKafkaConsumer":
        self.starting_offsets = KafkaOffsetsInitializer.latest()
        return self

    def set_start_from_timestamp(self, startup_offsets_timestamp: int) -> "FlinkKafkaConsumer":
        self.starting_offsets = KafkaOffsetsInitializer.timestamp(startup_offsets_timestamp)
        return self

    def set_start_from_group_offsets(self) -> "FlinkKafkaConsumer":
        self.starting_offsets = KafkaOffsetsInitializer.committed_offsets(self.starting_offsets.reset_strategy)
        return self

    def disable_filter_restored_partitions_with_subscribed_topics(self) -> "FlinkKafkaConsumer":
        raise ConfigurationError("disable_filter_restored_partitions_with_subscribed_topics(): Chandy reads the "
                                 "subscribed topics only; restored offsets of other topics are left alone.")

    def get_produced_type(self):
        return None


class FlinkKafkaProducer(_sink.KafkaSink):
    """PyFlink's legacy producer (``stream.add_sink(FlinkKafkaProducer(topic, schema, config))``): the same writer
    as :class:`KafkaSink`, at least once by default as Flink's was. Prefer ``KafkaSink.builder()``.

    >>> import warnings
    >>> from runtime.common.serialization import SimpleStringSchema
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     producer = FlinkKafkaProducer("counts", SimpleStringSchema(), {"bootstrap.servers": "localhost:9092"})
    >>> producer.delivery_guarantee
    <DeliveryGuarantee.AT_LEAST_ONCE: 'AT_LEAST_ONCE'>
    """

    def __init__(self, topic: str, serialization_schema, producer_config: dict, kafka_producer_pool_size: int = 5,
                 semantic=Semantic.AT_LEAST_ONCE):
        warnings.warn("FlinkKafkaProducer is deprecated (as in Flink 1.16): use KafkaSink.builder() and "
                      "stream.sink_to(...)", DeprecationWarning, stacklevel=2)
        config = dict(producer_config)
        guarantee = semantic if isinstance(semantic, DeliveryGuarantee) else DeliveryGuarantee[str(semantic.name)]
        serializer = (KafkaRecordSerializationSchema.builder().set_topic(topic)
                      .set_value_serialization_schema(serialization_schema).build())
        prefix = config.pop("transactional.id", None) or f"flink-kafka-producer-{topic}"
        super().__init__(config.pop("bootstrap.servers", None), serializer, guarantee, prefix, config)

    def set_log_failures_only(self, log_failures_only: bool) -> "FlinkKafkaProducer":
        self.log_failures_only = bool(log_failures_only)
        return self

    def set_flush_on_checkpoint(self, flush_on_checkpoint: bool) -> "FlinkKafkaProducer":
        if not flush_on_checkpoint and self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            self.delivery_guarantee = DeliveryGuarantee.NONE  # what Flink's producer then promises
        return self

    def set_write_timestamp_to_kafka(self, write_timestamp_to_kafka: bool) -> "FlinkKafkaProducer":
        self.write_timestamps = bool(write_timestamp_to_kafka)
        return self

    def ignore_failures_after_transaction_timeout(self) -> "FlinkKafkaProducer":
        return self  # a Chandy transaction lasts as long as its commit, never near the timeout

