"""Where a Kafka source starts reading each partition, and where a bounded one stops: PyFlink's
``KafkaOffsetsInitializer`` and ``KafkaOffsetResetStrategy``.

An initializer is a description; a reader resolves it for its partitions when it first meets them (a restored
partition starts at its checkpointed offset instead), against the brokers:

- ``earliest()`` (the default): the first offset still retained; ``latest()``: the end, at the time of resolving;
- ``committed_offsets(reset)``: the consumer group's committed offset, else by ``reset`` (``NONE``: an error that
  says so); ``timestamp(ms)``: the first record at or after ``ms``, else the end;
- ``offsets({KafkaTopicPartition: offset}, reset)``: the given offsets; a partition not given takes the committed
  offset, else ``reset``.

The reset strategy is also what librdkafka does when a position is out of range later (retention deleted it).

>>> KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
>>> KafkaOffsetsInitializer.latest().reset_strategy
<KafkaOffsetResetStrategy.LATEST: 0>
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from operators.kafka.partitions import KafkaTopicPartition
from runtime.errors import ConfigurationError, ServerUnreachableError

__all__ = ["KafkaOffsetResetStrategy", "KafkaOffsetsInitializer"]


class KafkaOffsetResetStrategy(enum.Enum):
    """What to do where no offset is known, or the one known is out of range (PyFlink's values)."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2

    def __repr__(self) -> str:
        return f"<KafkaOffsetResetStrategy.{self.name}: {self.value}>"

    @property
    def librdkafka(self) -> str:
        """librdkafka's ``auto.offset.reset`` for it."""
        return {"LATEST": "latest", "EARLIEST": "earliest", "NONE": "error"}[self.name]


@dataclass(frozen=True)
class KafkaOffsetsInitializer:
    """Build one with the static methods; ``kind`` is ``earliest``, ``latest``, ``committed``, ``timestamp`` or
    ``offsets``."""

    kind: str
    reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
    timestamp_ms: int | None = None
    specified: dict = field(default_factory=dict)  # KafkaTopicPartition -> offset

    @staticmethod
    def earliest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("earliest", KafkaOffsetResetStrategy.EARLIEST)

    @staticmethod
    def latest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("latest", KafkaOffsetResetStrategy.LATEST)

    @staticmethod
    def committed_offsets(
            offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE) -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("committed", _strategy(offset_reset_strategy))

    @staticmethod
    def timestamp(timestamp: int) -> "KafkaOffsetsInitializer":
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
            raise ConfigurationError(f"KafkaOffsetsInitializer.timestamp({timestamp!r}): give epoch milliseconds, a "
                                     "whole number >= 0.")
        return KafkaOffsetsInitializer("timestamp", KafkaOffsetResetStrategy.LATEST, timestamp_ms=timestamp)

    @staticmethod
    def offsets(offsets: dict, offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
                ) -> "KafkaOffsetsInitializer":
        specified = {}
        for partition, offset in dict(offsets).items():
            if not isinstance(partition, KafkaTopicPartition):
                raise ConfigurationError(f"KafkaOffsetsInitializer.offsets(): keys are KafkaTopicPartition(topic, "
                                         f"partition), not {partition!r}.")
            if not isinstance(offset, int) or offset < 0:
                raise ConfigurationError(f"KafkaOffsetsInitializer.offsets(): the offset of {partition} must be a "
                                         f"whole number >= 0, not {offset!r}.")
            specified[partition] = offset
        return KafkaOffsetsInitializer("offsets", _strategy(offset_reset_strategy), specified=specified)

    def __repr__(self) -> str:
        if self.kind == "committed":
            return f"KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.{self.reset_strategy.name})"
        if self.kind == "timestamp":
            return f"KafkaOffsetsInitializer.timestamp({self.timestamp_ms})"
        if self.kind == "offsets":
            return f"KafkaOffsetsInitializer.offsets({len(self.specified)} partitions)"
        return f"KafkaOffsetsInitializer.{self.kind}()"

    @property
    def needs_group(self) -> bool:
        return self.kind == "committed"

    def resolve(self, consumer, partitions: list[KafkaTopicPartition], group_id: str | None,
                timeout_s: float) -> dict[KafkaTopicPartition, int]:
        """Each partition's offset, asked of the brokers through ``consumer`` (a confluent_kafka Consumer)."""
        from confluent_kafka import KafkaException, TopicPartition

        if not partitions:
            return {}
        try:
            bounds = {p: consumer.get_watermark_offsets(TopicPartition(p.topic, p.partition), timeout=timeout_s)
                      for p in partitions}
            if self.kind == "earliest":
                return {p: bounds[p][0] for p in partitions}
            if self.kind == "latest":
                return {p: bounds[p][1] for p in partitions}
            if self.kind == "timestamp":
                found = consumer.offsets_for_times(
                    [TopicPartition(p.topic, p.partition, self.timestamp_ms) for p in partitions], timeout=timeout_s)
                return {p: (tp.offset if tp.offset >= 0 else bounds[p][1]) for p, tp in zip(partitions, found)}
            resolved = {p: self.specified[p] for p in partitions if p in self.specified}
            rest = [p for p in partitions if p not in resolved]
            if rest and group_id is not None:
                committed = consumer.committed([TopicPartition(p.topic, p.partition) for p in rest], timeout=timeout_s)
                resolved.update({p: tp.offset for p, tp in zip(rest, committed) if tp.offset >= 0})
        except KafkaException as exc:
            raise ServerUnreachableError(f"Kafka source: could not look up the starting offsets of "
                                        f"{', '.join(map(str, partitions[:5]))}: {exc.args[0]}") from None
        for p in partitions:
            if p not in resolved:
                if self.reset_strategy is KafkaOffsetResetStrategy.NONE:
                    raise ConfigurationError(
                        f"Kafka source: partition {p} has no committed offset in consumer group {group_id!r}, and the "
                        "starting offsets say committed_offsets() without a reset strategy. Start it with "
                        "KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST) (or LATEST).")
                low, high = bounds[p]
                resolved[p] = low if self.reset_strategy is KafkaOffsetResetStrategy.EARLIEST else high
        return resolved


def _strategy(value) -> KafkaOffsetResetStrategy:
    if not isinstance(value, KafkaOffsetResetStrategy):
        raise ConfigurationError(f"Expected a KafkaOffsetResetStrategy (EARLIEST, LATEST or NONE), got {value!r}.")
    return value
