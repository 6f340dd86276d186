"""Kafka partitions as a source's splits: which subtask reads which partition.

Each subtask decides for itself, by the same rule on every subtask and in every attempt, so no coordinator is
needed and a restore at another parallelism hands each partition to exactly one reader: Flink's
``KafkaSourceEnumerator`` rule, the partitions of a topic dealt round-robin from a start given by the topic's
name, with Chandy's stable hash for the name (Python's built-in one is salted per process).

>>> [owner("orders", p, 3) for p in range(6)] == [(owner("orders", 0, 3) + p) % 3 for p in range(6)]
True
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.keys.stable_hash import stable_hash

__all__ = ["KafkaTopicPartition", "owner"]


@dataclass(frozen=True, order=True)
class KafkaTopicPartition:
    """A partition of a topic (PyFlink's ``KafkaTopicPartition``).

    >>> KafkaTopicPartition("orders", 3)
    KafkaTopicPartition(topic='orders', partition=3)
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def owner(topic: str, partition: int, parallelism: int) -> int:
    """The subtask (of ``parallelism``) that reads ``partition`` of ``topic``."""
    start = (stable_hash(topic) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism
