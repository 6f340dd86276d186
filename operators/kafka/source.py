"""Reading Kafka topics as a stream, exactly once: each partition is a split, its offset the split's position.

Every subtask reads the partitions :func:`~operators.kafka.partitions.owner` gives it, with a consumer of its own
that it assigns them to (no consumer-group rebalancing: the job decides who reads what). Its checkpointed state
is each of its partitions' next offset (union state, as the file source's: after a restore at any parallelism
each reader takes the offsets of the partitions it now owns), so a restore resumes at exactly the record after
the checkpoint. When a checkpoint completes, those offsets are committed to the consumer group (for monitoring
and for ``committed_offsets()`` starts, as Flink does; never read back on a restore). Partitions are looked for
again every ``partition.discovery.interval.ms`` (5 minutes; unbounded sources only): a new one is read from its
earliest offset, as in Flink.

Records come with the Kafka record's timestamp as their event time, and with their partition as their split:
a watermark strategy given to ``env.from_source`` then keeps one watermark per partition.

>>> source = KafkaSource("localhost:9092", topics=["orders"], deserializer=None)
>>> source.bounded, source.describe_subscription()
(False, "topics ['orders']")
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from operators.kafka.client import (
    METADATA_TIMEOUT_S,
    check_properties,
    client_config,
    error_text,
    for_role,
    unreachable_codes,
    with_log,
)
from operators.kafka.offsets import KafkaOffsetResetStrategy, KafkaOffsetsInitializer
from operators.kafka.partitions import KafkaTopicPartition, owner
from operators.kafka.topics import TopicCreation, ensure_topics
from operators.sources import Source, SourceReader
from runtime.errors import ConfigurationError, MalformedRecordError, ServerUnreachableError
from runtime.protocol.records import SplitBatch

__all__ = ["KafkaSource", "DISCOVERY_INTERVAL_MS", "UNREACHABLE_AFTER_S"]

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_MS = 300_000  # Flink's partition.discovery.interval.ms
POLL_WAIT_S = 0.02  # a poll with nothing to read waits this long: short, since a checkpoint waits for the poll
UNREACHABLE_AFTER_S = 60.0  # every broker down this long fails the subtask (a restart may find them again)
PROBE_TIMEOUT_S = 5.0  # at that deadline, how long a metadata request may take to prove the brokers are back
LAG_INTERVAL_S = 1.0  # how often a reader measures its partitions' lag (the metrics report every second)
_NOT_AVAILABLE = 0  # confluent_kafka.TIMESTAMP_NOT_AVAILABLE
_PARTITION_EOF = -191  # confluent_kafka.KafkaError._PARTITION_EOF


class KafkaSource(Source):
    """Reads ``topics`` (a list), a ``topic_pattern`` (a regular expression) or ``partitions`` (a set of
    :class:`KafkaTopicPartition`) from the cluster at ``bootstrap_servers``. Built by PyFlink's
    ``KafkaSource.builder()`` (:mod:`runtime.datastream.connectors.kafka`).

    ``deserializer``: what turns a record's value into a record (``deserialize(bytes)``, e.g. PyFlink's
    ``SimpleStringSchema()``); a ``None`` it returns is skipped, as Flink skips it. ``on_deserialization_error``:
    ``"fail"`` (default: the job fails naming topic, partition and offset) or ``"skip"`` (counted).
    ``starting_offsets`` / ``stopping_offsets``: :class:`KafkaOffsetsInitializer` s; with stopping offsets and
    ``bounded``, the job ends when every partition reached them.
    """

    def __init__(self, bootstrap_servers: str, topics: list[str] | None = None, topic_pattern: str | None = None,
                 partitions=None, deserializer=None, group_id: str | None = None,
                 starting_offsets: KafkaOffsetsInitializer | None = None,
                 stopping_offsets: KafkaOffsetsInitializer | None = None, bounded: bool = False,
                 properties: dict | None = None, on_deserialization_error: str = "fail",
                 create_topics: TopicCreation | None = None):
        self.properties = dict(properties or {})
        if bootstrap_servers:
            self.properties["bootstrap.servers"] = bootstrap_servers
        self.topics = list(topics) if topics else None
        self.topic_pattern = topic_pattern
        self.partitions = sorted(partitions) if partitions else None
        self.deserializer = deserializer
        self.group_id = group_id or self.properties.get("group.id")
        self.starting_offsets = starting_offsets or KafkaOffsetsInitializer.earliest()
        self.stopping_offsets = stopping_offsets
        self.bounded = bool(bounded and stopping_offsets is not None)
        if on_deserialization_error not in ("fail", "skip"):
            raise ConfigurationError(f"KafkaSource on_deserialization_error must be 'fail' or 'skip', not "
                                     f"{on_deserialization_error!r}.")
        self.on_deserialization_error = on_deserialization_error
        self.create_topics = create_topics  # missing topics are created with this, when set
        self.consumer_group = None  # the group the readers' consumers join: the user's, or one of their own

    # -- settings ----------------------------------------------------------------------------------------

    def describe_subscription(self) -> str:
        if self.topics:
            return f"topics {self.topics}"
        if self.topic_pattern is not None:
            return f"topics matching {self.topic_pattern!r}"
        return f"partitions {', '.join(map(str, self.partitions or []))}"

    @property
    def discovery_interval_ms(self) -> float:
        if self.bounded:
            return -1
        return float(self.properties.get("partition.discovery.interval.ms", DISCOVERY_INTERVAL_MS))

    @property
    def commits_offsets(self) -> bool:
        """Whether completed checkpoints commit offsets to the consumer group: only to a group the user named."""
        value = str(self.properties.get("commit.offsets.on.checkpoint", "true")).strip().lower()
        return self.group_id is not None and value == "true"

    def consumer_config(self, subtask: int) -> dict:
        config = client_config(self.properties)
        prefix = self.properties.get("client.id.prefix") or self.group_id or "chandy-kafka-source"
        config.setdefault("client.id", f"{prefix}-{subtask}")
        config["group.id"] = self.consumer_group
        config["enable.auto.commit"] = "false"  # offsets are committed when checkpoints complete
        config.setdefault("enable.auto.offset.store", "false")
        config.setdefault("isolation.level", "read_committed")  # only committed output of transactional producers
        config.setdefault("auto.offset.reset", self.starting_offsets.reset_strategy.librdkafka)
        config["enable.partition.eof"] = "true"  # says when a partition has nothing more for now (idleness)
        return config

    def validate(self) -> None:
        """Driver, before launch: the settings make sense, the cluster answers, and the topics exist."""
        if sum(x is not None for x in (self.topics, self.topic_pattern, self.partitions)) != 1:
            raise ConfigurationError("KafkaSource: subscribe to exactly one of set_topics(...), set_topic_pattern(...) "
                                     "and set_partitions(...).")
        if not self.properties.get("bootstrap.servers"):
            raise ConfigurationError("KafkaSource: set_bootstrap_servers('host:9092,...') is missing.")
        if self.deserializer is None or not callable(getattr(self.deserializer, "deserialize", None)):
            raise ConfigurationError("KafkaSource: set_value_only_deserializer(...) is missing (SimpleStringSchema(), "
                                     "JsonRowDeserializationSchema ..., or an object with deserialize(bytes)).")
        if self.starting_offsets.needs_group and self.group_id is None:
            raise ConfigurationError("KafkaSource: committed_offsets() starts from the consumer group's offsets: "
                                     "set_group_id(...) is missing.")
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise ConfigurationError(f"KafkaSource: set_topic_pattern({self.topic_pattern!r}) is no regular "
                                         f"expression: {exc}.") from None
        if self.consumer_group is None:
            self.consumer_group = self.group_id or f"chandy-{uuid.uuid4().hex[:12]}"
        config = self.consumer_config(0)
        check_properties(config, "KafkaSource", "consumer")
        wanted = self.topics or sorted({p.topic for p in self.partitions or []})
        ensure_topics(config, wanted, self.create_topics, "KafkaSource",
                      also="" if self.topics is None else "; or read topics as they appear with set_topic_pattern(...)")

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _KafkaReader(self, subtask_index, parallelism)


class _KafkaReader(SourceReader):
    union_state = True  # every reader sees every partition's offset after a restore, and keeps its own

    def __init__(self, source: KafkaSource, subtask: int, parallelism: int):
        self.source = source
        self.subtask = subtask
        self.parallelism = parallelism
        self.positions: dict[KafkaTopicPartition, int] = {}  # the next offset to read, of each partition read
        self.stops: dict[KafkaTopicPartition, int] = {}  # bounded: where each partition ends (exclusive)
        self.snapshots: list[tuple[int, dict]] = []  # (checkpoint id, offsets) not yet committed to the group
        self.consumer = None
        self.next_discovery = 0.0
        self.skipped = 0  # records that did not deserialize, skipped (on_deserialization_error="skip")
        self.bytes_read = 0  # key and value bytes of every record fetched (skipped ones too)
        self.brokers_down_since: float | None = None  # since when librdkafka reports no broker reachable
        self.broker_error = ""  # librdkafka's words for the newest such report
        self._checked_low = set()  # partitions whose log start was asked of the broker (a cached one was unknown)
        self._restored: dict[KafkaTopicPartition, int] | None = None  # offsets of a restored checkpoint, owned here
        self.at_end: set[KafkaTopicPartition] = set()  # partitions read to their end (no record available now)
        self.assigned: list[KafkaTopicPartition] = []  # the partitions the consumer fetches, in order
        self.lags: dict[str, int] = {}  # records behind each partition's end, for the metrics
        self.next_lag_measure = 0.0

    # -- assignment ---------------------------------------------------------------------------------------

    def _owns(self, partition: KafkaTopicPartition) -> bool:
        return owner(partition.topic, partition.partition, self.parallelism) == self.subtask

    def _all_partitions(self) -> list[KafkaTopicPartition]:
        source = self.source
        if source.partitions is not None:
            return list(source.partitions)
        try:
            metadata = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        except Exception as exc:  # KafkaException
            raise ServerUnreachableError(f"KafkaSource: listing the partitions of {source.describe_subscription()} "
                                        f"failed: {error_text(exc)}") from None
        if source.topics is not None:
            names = [t for t in source.topics if t in metadata.topics]
        else:
            pattern = re.compile(source.topic_pattern)
            names = [t for t in metadata.topics if not t.startswith("__") and pattern.fullmatch(t)]
        return [KafkaTopicPartition(t, p) for t in sorted(names) for p in sorted(metadata.topics[t].partitions)]

    def _discover(self, first: bool) -> None:
        new = [p for p in self._all_partitions() if self._owns(p) and p not in self.positions]
        self.next_discovery = time.monotonic() + self.source.discovery_interval_ms / 1000.0
        if not new:
            return
        restored = self._restored or {}
        fresh = [p for p in new if p not in restored]
        for p in new:
            if p in restored:
                self.positions[p] = restored[p]
        # At the very start, the configured starting offsets; a partition found later (or not in the checkpoint a
        # job restores) is read from its beginning, as Flink reads newly discovered partitions.
        starting = first and self._restored is None
        initializer = self.source.starting_offsets if starting else KafkaOffsetsInitializer.earliest()
        self.positions.update(initializer.resolve(self.consumer, fresh, self.source.group_id, METADATA_TIMEOUT_S))
        if self.source.stopping_offsets is not None:
            unknown = [p for p in new if p not in self.stops]
            self.stops.update(self.source.stopping_offsets.resolve(self.consumer, unknown, self.source.group_id,
                                                                   METADATA_TIMEOUT_S))
        if not first:
            log.info("Kafka source subtask %d: new partitions %s, read from %s", self.subtask,
                     ", ".join(map(str, new)), "their beginning")
        self._assign()

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        reading = [p for p in sorted(self.positions) if not self._done(p)]
        gone = [p for p in self.assigned if p not in reading]
        new = [p for p in reading if p not in self.assigned]
        self.assigned = reading
        # Incrementally: assigning anew would drop what the consumer fetched of the others, and stall them.
        if gone:
            self.consumer.incremental_unassign([TopicPartition(p.topic, p.partition) for p in gone])
        if new:
            self.consumer.incremental_assign([TopicPartition(p.topic, p.partition, self.positions[p]) for p in new])

    def _done(self, partition: KafkaTopicPartition) -> bool:
        stop = self.stops.get(partition)
        return stop is not None and self.positions[partition] >= stop

    def assigned_splits(self) -> list:
        return [str(p) for p in self.positions]

    def backlogged_splits(self) -> list:
        return [str(p) for p in self.positions if p not in self.at_end and not self._done(p)]

    # -- the reader's life --------------------------------------------------------------------------------

    def restore_state(self, splits: list) -> None:
        self._restored = {}
        for topic, partition, offset, stop in splits:
            split = KafkaTopicPartition(topic, partition)
            if self._owns(split):
                self._restored[split] = offset
                if stop is not None:
                    self.stops[split] = stop

    def open(self, runtime_context) -> None:
        from confluent_kafka import Consumer

        config = with_log(for_role(self.source.consumer_config(self.subtask), "consumer"))
        # With an error callback librdkafka's client-wide errors (brokers gone) come here, served inside consume()
        # on this thread; without one, the Python client drops them and a lost cluster looks like an idle one.
        config["error_cb"] = self._client_error
        self.consumer = Consumer(config)
        self._discover(first=True)
        log.info("Kafka source subtask %d reads %s", self.subtask, ", ".join(
            f"{p} from offset {o}" + (f" to {self.stops[p]}" if p in self.stops else "")
            for p, o in sorted(self.positions.items())) or "no partition")

    def poll(self, max_records: int) -> list | None:
        if self.source.bounded and all(self._done(p) for p in self.positions):
            return None
        if self.source.discovery_interval_ms > 0 and time.monotonic() >= self.next_discovery:
            self._discover(first=False)
        if not self.positions:
            time.sleep(POLL_WAIT_S)
            return []
        messages = self.consumer.consume(num_messages=max_records, timeout=POLL_WAIT_S)
        records, timestamps, splits = [], [], []
        deserialize = self.source.deserializer.deserialize
        finished = False
        # Messages come in runs of one partition: the partition's bookkeeping is done once per run, not per record.
        run_key = split = name = stop = None
        offset = -1
        read_bytes = 0
        for message in messages:
            error = message.error()
            if error is not None:
                self._on_error(error, message)
                continue
            key = (message.topic(), message.partition())
            if key != run_key:
                if split is not None and offset >= 0:
                    self._advance(split, offset + 1)
                run_key, split = key, KafkaTopicPartition(*key)
                name, stop, offset = str(split), self.stops.get(split), -1
                self.at_end.discard(split)
                if message.offset() != self.positions.get(split):
                    self._moved(split, message.offset())
            if stop is not None and message.offset() >= stop:
                finished = True
                continue
            offset = message.offset()
            value, key = message.value(), message.key()
            if key is not None:
                read_bytes += len(key)
            if value is None:  # a tombstone (a compacted topic's deletion): no value to deserialize
                continue
            read_bytes += len(value)
            try:
                record = deserialize(value)
            except Exception as exc:
                if self.source.on_deserialization_error == "skip":
                    self.skipped += 1
                    continue
                raise MalformedRecordError(
                    f"Kafka source: the record at offset {offset} of topic {split.topic}, partition {split.partition} "
                    f"does not deserialize ({type(exc).__name__}: {exc}). Fix the producer, or skip such records "
                    "with KafkaSource.builder()...set_on_deserialization_error('skip').") from exc
            if record is None:
                continue
            kind, timestamp = message.timestamp()
            records.append(record)
            timestamps.append(timestamp if kind != _NOT_AVAILABLE else None)
            splits.append(name)
        if split is not None and offset >= 0:
            self._advance(split, offset + 1)
        if read_bytes or any(m.error() is None or m.error().code() == _PARTITION_EOF for m in messages):
            self.brokers_down_since = None  # a fetch came back: the brokers answer
        elif self.brokers_down_since is not None:
            self._check_brokers()
        self.bytes_read += read_bytes
        if time.monotonic() >= self.next_lag_measure:
            self._measure_lags()
        if finished or any(self._done(p) for p in self.assigned):
            self._assign()  # a partition that reached its end is read no more
        return SplitBatch.of_splits(records, timestamps, splits)

    def _moved(self, split: KafkaTopicPartition, offset: int) -> None:
        """The consumer fetched ``split`` from ``offset``, not from the position: librdkafka reset an out-of-range
        position by the reset strategy (back to the beginning or end from past the end, or forward from below the
        beginning, which retention moved), or, forward, skipped commit markers and aborted records. The fetched
        offset is the position now, so checkpoints hold where the reader really is."""
        expected = self.positions.get(split)
        self.positions[split] = offset
        if expected is None:
            return
        strategy = self.source.starting_offsets.reset_strategy.name
        if offset < expected:
            log.warning("Kafka source: position %d of %s is past the partition's end; by the reset strategy %s the "
                        "reader goes back to offset %d and reads on from there", expected, split, strategy, offset)
            return
        from confluent_kafka import TopicPartition

        partition = TopicPartition(split.topic, split.partition)
        # The fetch responses tell librdkafka the log start: no request to the broker for every marker skipped.
        low, _ = self.consumer.get_watermark_offsets(partition, cached=True)
        if low < 0 and split not in self._checked_low:
            low, _ = self.consumer.get_watermark_offsets(partition, timeout=METADATA_TIMEOUT_S, cached=False)
        self._checked_low.add(split)
        if expected < low:
            log.warning("Kafka source: position %d of %s is no longer retained (the partition now starts at %d); "
                        "reading on from offset %d by the reset strategy %s: records %d..%d are lost to this job",
                        expected, split, low, offset, strategy, expected, low - 1)

    def _on_error(self, error, message) -> None:
        from confluent_kafka import KafkaError

        code = error.code()
        if code == KafkaError._PARTITION_EOF:  # read to the end for now: a partition that may go idle
            split = KafkaTopicPartition(message.topic(), message.partition())
            self.at_end.add(split)
            if split in self.stops:
                self._past_markers(split)
            return
        if code in unreachable_codes():
            self._client_error(error)
            return
        # With reset strategy NONE librdkafka's auto.offset.reset is "error": it reports _AUTO_OFFSET_RESET (the
        # broker's OFFSET_OUT_OF_RANGE wrapped), which is not retriable and would repeat on every restart.
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) and \
                self.source.starting_offsets.reset_strategy is KafkaOffsetResetStrategy.NONE:
            raise self._out_of_range(KafkaTopicPartition(message.topic(), message.partition()), error)
        if error.fatal() or not error.retriable():
            raise ServerUnreachableError(f"Kafka source subtask {self.subtask}: {error.str()}")
        log.warning("Kafka source subtask %d: %s", self.subtask, error.str())

    def _client_error(self, error) -> None:
        """librdkafka's error callback (and error events of the same kinds): brokers that do not answer start the
        clock that :meth:`_check_brokers` reads; anything else is logged (a fatal error fails at the next call)."""
        if error.code() in unreachable_codes():
            self.broker_error = error.str()
            if self.brokers_down_since is None:
                self.brokers_down_since = time.monotonic()
                log.warning("Kafka source subtask %d: %s (still trying for %.0f s)", self.subtask, error.str(),
                            UNREACHABLE_AFTER_S)
        else:
            log.warning("Kafka source subtask %d: %s", self.subtask, error.str())

    def _check_brokers(self) -> None:
        """Past the deadline with no fetch answered: ask for metadata once; no answer fails the subtask (a restart
        may find the brokers again), an answer (a passing disconnect) starts the wait over."""
        if time.monotonic() - self.brokers_down_since <= UNREACHABLE_AFTER_S:
            return
        from confluent_kafka import KafkaException

        try:
            self.consumer.list_topics(timeout=min(PROBE_TIMEOUT_S, UNREACHABLE_AFTER_S))
        except KafkaException as exc:
            raise ServerUnreachableError(
                f"Kafka source subtask {self.subtask}: the brokers at {self.source.properties['bootstrap.servers']} "
                f"have not answered for {UNREACHABLE_AFTER_S:g} s (librdkafka: {self.broker_error}; then "
                f"{error_text(exc)}). Check that they run and that the executors can reach them; a restart tries "
                "again.") from None
        self.brokers_down_since = None

    def _out_of_range(self, split: KafkaTopicPartition, error) -> ConfigurationError:
        from confluent_kafka import KafkaException, TopicPartition

        position = self.positions.get(split)
        try:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(split.topic, split.partition),
                                                            timeout=METADATA_TIMEOUT_S, cached=False)
            valid = f"the partition holds offsets {low} to {high - 1}" if high > low else \
                f"the partition is empty (its next offset is {high})"
        except KafkaException:
            valid = "the partition's range could not be looked up"
        return ConfigurationError(
            f"Kafka source: offset {position} of topic {split.topic}, partition {split.partition} is out of range "
            f"({valid}; librdkafka: {error.str()}), and the reset strategy is NONE. The records there are gone "
            "(retention) or the offset was never written. To go on from the partition's beginning or end, start with "
            "a reset strategy: KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST) (or "
            "LATEST), or offsets({...}, KafkaOffsetResetStrategy.EARLIEST).")

    def _advance(self, split: KafkaTopicPartition, position: int) -> None:
        """The partition's next offset is ``position``, unless the end of the partition, seen in the same poll,
        put it past a commit marker already (see :meth:`_past_markers`)."""
        if position > self.positions.get(split, -1):
            self.positions[split] = position

    def _past_markers(self, split: KafkaTopicPartition) -> None:
        """At the end of a partition with a stopping offset: the consumer's position, not the last record's offset,
        says where it is, since a transactional producer's commit markers take offsets too and are no records.
        Without this, a bounded read whose stopping offset lies past a marker would wait forever (Flink's split
        reader checks the position the same way)."""
        from confluent_kafka import TopicPartition

        (position,) = self.consumer.position([TopicPartition(split.topic, split.partition)])
        # Not past the stop: the consumer fetched the records after it too, which this reader never emitted, and
        # the offset committed to the group must not say they were read.
        self._advance(split, min(position.offset, self.stops[split]))

    def snapshot_state(self) -> list:
        return [(p.topic, p.partition, offset, self.stops.get(p)) for p, offset in sorted(self.positions.items())]

    def snapshot_taken(self, checkpoint_id: int, splits: list) -> None:
        if self.source.commits_offsets:
            self.snapshots.append((checkpoint_id, {(t, p): o for t, p, o, _ in splits}))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit the offsets of the newest completed checkpoint to the consumer group (monitoring only)."""
        due = [offsets for cid, offsets in self.snapshots if cid <= checkpoint_id]
        self.snapshots = [(cid, offsets) for cid, offsets in self.snapshots if cid > checkpoint_id]
        if not due or self.consumer is None:
            return
        from confluent_kafka import KafkaException, TopicPartition

        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in due[-1].items()],
                                 asynchronous=True)
        except KafkaException as exc:  # the job's exactness does not depend on it: say so, go on
            log.warning("Kafka source subtask %d: committing offsets of checkpoint %d to group %s failed: %s",
                        self.subtask, checkpoint_id, self.source.consumer_group, error_text(exc))

    def close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # closing a consumer whose brokers are gone: nothing more to do
                log.debug("closing the Kafka consumer failed", exc_info=True)
            self.consumer = None

    def _measure_lags(self) -> None:
        """Each partition's records behind its end, from the newest fetch; on the subtask's thread, since a
        librdkafka consumer must not be called from two threads at once (the metrics reporter's would hang)."""
        from confluent_kafka import TopicPartition

        lags = {}
        partitions = sorted(self.positions)
        # librdkafka's position, not ours: it moves past transaction markers, which take offsets and are no records
        known = self.consumer.position([TopicPartition(p.topic, p.partition) for p in partitions])
        for p, fetched in zip(partitions, known):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(p.topic, p.partition), cached=True)
            if high >= 0:
                lags[str(p)] = max(0, high - max(self.positions[p], fetched.offset))
        self.lags = lags
        self.next_lag_measure = time.monotonic() + LAG_INTERVAL_S

    def metrics(self) -> dict:
        """``split-lag``: per partition, records behind its end (measured at most a second ago);
        ``records-skipped``; ``bytes-read``: the records' keys and values, as Kafka holds them."""
        return {"split-lag": dict(self.lags), "records-skipped": self.skipped, "bytes-read": self.bytes_read}

