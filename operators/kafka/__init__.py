"""Kafka: a source that reads partitions exactly once and a sink that writes at least or exactly once, on
librdkafka (``confluent-kafka``). PyFlink's builders are in :mod:`runtime.datastream.connectors.kafka`.

>>> from operators.kafka import KafkaOffsetsInitializer, KafkaTopicPartition
>>> KafkaOffsetsInitializer.offsets({KafkaTopicPartition("orders", 0): 42}).specified
{KafkaTopicPartition(topic='orders', partition=0): 42}
"""

from operators.kafka.offsets import KafkaOffsetResetStrategy, KafkaOffsetsInitializer
from operators.kafka.partitions import KafkaTopicPartition
from operators.kafka.sink import KafkaRecordSerializationSchema, KafkaSink, KafkaTopicSelector
from operators.kafka.source import KafkaSource

__all__ = ["KafkaSource", "KafkaSink", "KafkaOffsetsInitializer", "KafkaOffsetResetStrategy", "KafkaTopicPartition",
           "KafkaRecordSerializationSchema", "KafkaTopicSelector"]
