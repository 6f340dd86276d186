"""Routing a chain subtask's output records to the channels of its output edges, with batching.

Records are appended to one buffer per channel; a buffer is sent when it reaches ``batch_size`` records, or
when the subtask calls :meth:`RecordWriter.flush` (it does so every buffer timeout, and before an event). A
channel whose consumer asked for smaller batches (its ``batch_limit``, buffer debloating: see
:mod:`runtime.network.channels`) gets its buffer in pieces of at most that many records.
Only the subtask's own thread touches a writer, so there are no locks here.

Batches with event timestamps (:class:`~runtime.protocol.records.TimestampedBatch`) keep them: once an edge has
seen one, its buffers are timestamped batches too, a record without a timestamp holding None in its place.

Columnar edges (Arrow record batches) have their own writer: a batch is split by target with Arrow kernels,
never row by row, and buffers count rows rather than batches.

>>> from runtime.graph.job_graph import ChainEdge, Partitioner
>>> from runtime.keys.key_groups import subtask_for_key
>>> class Collected:  # a channel that keeps what it is sent
...     def __init__(self): self.batches = []
...     def send(self, records): self.batches.append(records)
>>> edge = ChainEdge(0, 0, 1, Partitioner("hash", key_selector=lambda r: r % 10), None, 1, 2)
>>> channels = {0: Collected(), 1: Collected()}
>>> writer = EdgeWriter(edge, 0, channels, batch_size=100, max_parallelism=128)
>>> writer.emit(list(range(20))); writer.flush()
>>> all(subtask_for_key(r % 10, 128, 2) == target for target in (0, 1) for r in channels[target].batches[0])
True
"""

from __future__ import annotations

import random
from typing import Callable

import pyarrow as pa

from runtime.errors import FunctionContractError, KeySelectorError, UnsupportedKeyError
from runtime.graph.job_graph import ChainEdge
from runtime.keys.arrow_key_groups import column_subtasks
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import assign_to_key_group
from runtime.keys.stable_hash import stable_hash
from runtime.protocol.events import Event
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import SideOutputRecord

__all__ = ["EdgeWriter", "ColumnarEdgeWriter", "RecordWriter"]

_ROUTE_CACHE_LIMIT = 1 << 20


class _ChannelSet:
    """The channels of one edge from one producer subtask, one output buffer each."""

    buffers: list[list]
    channels: list
    stamped = False  # the buffers are TimestampedBatches (the edge has carried timestamps)

    def _new_buffer(self) -> list:
        return TimestampedBatch.of([], []) if self.stamped else []

    def flush(self) -> None:
        for i, buffer in enumerate(self.buffers):
            if buffer:
                self.buffers[i] = self._new_buffer()
                self._send(self.channels[i], buffer)

    @staticmethod
    def _send(channel, buffer: list) -> None:
        """Send ``buffer``, in pieces of the channel's batch limit when its consumer set one."""
        limit = getattr(channel, "batch_limit", None)
        if limit is None or len(buffer) <= limit:
            channel.send(buffer)
            return
        stamps = buffer.timestamps if type(buffer) is TimestampedBatch else None
        for start in range(0, len(buffer), limit):
            piece = buffer[start:start + limit]
            channel.send(piece if stamps is None else TimestampedBatch.of(piece, stamps[start:start + limit]))

    def broadcast_event(self, event: Event) -> None:
        self.flush()
        for channel in self.channels:
            channel.send_event(event)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


class EdgeWriter(_ChannelSet):
    """Output of one chain subtask to one edge: a channel per consumer subtask it sends to."""

    def __init__(self, edge: ChainEdge, producer: int, channels: dict[int, object], batch_size: int,
                 max_parallelism: int, consumer=None):
        self.edge = edge
        self.consumer = consumer  # the OperatorNode the edge feeds: a key selector's error is blamed on it
        self.targets = list(edge.targets_of(producer))
        self.channels = [channels[t] for t in self.targets]
        self.buffers: list[list] = [[] for _ in self.targets]
        self.batch_size = batch_size
        self.kind = edge.partitioner.kind
        self.key_selector: Callable | None = edge.partitioner.key_selector
        self.max_parallelism = max_parallelism
        self.parallelism = edge.target_parallelism
        self._route: dict = {}
        self._next = producer % max(1, len(self.targets))
        self.partition = edge.partitioner.partition  # "custom"
        self._random = random.Random()  # "shuffle": any choice is right, as in Flink (not replayed)
        producers, consumers = edge.source_parallelism, edge.target_parallelism
        low = producer * consumers // producers  # "rescale": the consumers this producer feeds (Flink's
        self._rescaled = range(low, max(low + 1, (producer + 1) * consumers // producers))  # pointwise pattern)
        self.side_tag = edge.side_tag
        self.separate_side_outputs = False  # set when the producer may emit SideOutputRecords

    def _blamed(self, error: Exception) -> Exception:
        """``error``, to be reported as the failure of the operator the key_by feeds (the user wrote the key
        selector there), not of the operator that emitted the record."""
        if self.consumer is not None:
            error.operator_node = self.consumer
        return error

    def _target_of(self, key) -> int:
        key = canonical_key(key)  # a cache miss: NaNs are cached as the one NaN key, not one entry each
        target = self._route.get(key)
        if target is None:
            target = assign_to_key_group(key, self.max_parallelism) * self.parallelism // self.max_parallelism
            if len(self._route) >= _ROUTE_CACHE_LIMIT:
                self._route.clear()
            self._route[key] = target
        return target

    def emit(self, records: list) -> None:
        if self.separate_side_outputs:
            records = self._select_side(records)
            if not records:
                return
        if type(records) is TimestampedBatch:
            self._emit_stamped(records, records.timestamps)
            return
        buffers = self.buffers
        kind = self.kind
        if kind == "hash":
            key_of, route, target_of = self.key_selector, self._route, self._target_of
            appenders = [b.append for b in buffers]
            try:
                for r in records:
                    key = key_of(r)
                    target = route.get(key)
                    if target is None:
                        target = target_of(key)
                    appenders[target](r)
            except Exception as exc:  # off the hot path: say which record and why
                raise self._blamed(_key_error(key_of, records, exc)) from exc
        elif kind == "forward" or len(buffers) == 1:
            buffers[0].extend(records)
        elif kind == "shuffle":
            appenders = [b.append for b in buffers]
            for r, target in zip(records, self._random.choices(range(len(buffers)), k=len(records))):
                appenders[target](r)
        elif kind == "custom":
            key_of, partition, n = self.key_selector, self.partition, len(buffers)
            appenders = [b.append for b in buffers]
            try:
                for r in records:
                    target = partition(key_of(r), n)
                    if not 0 <= target < n:
                        raise IndexError(target)
                    appenders[target](r)
            except Exception as exc:  # off the hot path: say which record and why
                raise _partition_error(key_of, partition, n, records, exc) from exc
        elif kind == "rescale":
            subset = self._rescaled
            n = len(subset)
            size = -(-len(records) // n)
            start = self._next % n
            for i in range(n):
                chunk = records[i * size:(i + 1) * size]
                if chunk:
                    buffers[subset[(start + i) % n]].extend(chunk)
            self._next = (start + 1) % n
        elif kind == "rebalance":
            # Contiguous slices, rotating the first target: round-robin per batch keeps the per-record cost
            # at zero while spreading load evenly over time.
            n = len(buffers)
            size = -(-len(records) // n)
            start = self._next
            for i in range(n):
                chunk = records[i * size:(i + 1) * size]
                if chunk:
                    buffers[(start + i) % n].extend(chunk)
            self._next = (start + 1) % n
        else:  # broadcast
            for buffer in buffers:
                buffer.extend(records)
        if self.stamped:  # records without timestamps on an edge that has them: None in their place
            for buffer in buffers:
                missing = len(buffer) - len(buffer.timestamps)
                if missing:
                    buffer.timestamps.extend([None] * missing)
        self._send_full()

    def _send_full(self) -> None:
        batch_size = self.batch_size
        buffers = self.buffers
        channels = self.channels
        for i, buffer in enumerate(buffers):
            if len(buffer) >= (getattr(channels[i], "batch_limit", None) or batch_size):
                buffers[i] = self._new_buffer()
                self._send(channels[i], buffer)

    def _select_side(self, records: list) -> list:
        """The records of this edge's output (the main one, or side output ``side_tag``), timestamps kept."""
        tag = self.side_tag
        if type(records) is TimestampedBatch:
            pairs = [(r if tag is None else r.value, t) for r, t in zip(records, records.timestamps)
                     if (type(r) is not SideOutputRecord if tag is None else
                         type(r) is SideOutputRecord and r.tag == tag)]
            return TimestampedBatch.of([p[0] for p in pairs], [p[1] for p in pairs])
        if tag is None:
            return [r for r in records if type(r) is not SideOutputRecord]
        return [r.value for r in records if type(r) is SideOutputRecord and r.tag == tag]

    def _emit_stamped(self, records: list, timestamps: list) -> None:
        """``emit`` for records with timestamps: each timestamp goes where its record goes."""
        if not self.stamped:
            self.stamped = True
            self.buffers = [TimestampedBatch.of(b, [None] * len(b)) for b in self.buffers]
        buffers = self.buffers
        n = len(buffers)
        kind = self.kind
        if kind == "forward" or n == 1 or kind == "broadcast":
            for buffer in (buffers[:1] if kind != "broadcast" else buffers):
                buffer.extend(records)
                buffer.timestamps.extend(timestamps)
        elif kind in ("rebalance", "rescale"):
            subset = range(n) if kind == "rebalance" else self._rescaled
            size = -(-len(records) // len(subset))
            start = self._next % len(subset)
            for i in range(len(subset)):
                chunk = slice(i * size, (i + 1) * size)
                if records[chunk]:
                    buffer = buffers[subset[(start + i) % len(subset)]]
                    buffer.extend(records[chunk])
                    buffer.timestamps.extend(timestamps[chunk])
            self._next = (start + 1) % len(subset)
        elif kind == "hash":
            key_of, route, target_of = self.key_selector, self._route, self._target_of
            appenders = [b.append for b in buffers]
            stampers = [b.timestamps.append for b in buffers]
            try:
                for r, t in zip(records, timestamps):
                    key = key_of(r)
                    target = route.get(key)
                    if target is None:
                        target = target_of(key)
                    appenders[target](r)
                    stampers[target](t)
            except Exception as exc:  # off the hot path: say which record and why
                raise self._blamed(_key_error(key_of, records, exc)) from exc
        else:
            for r, t, target in zip(records, timestamps, self._targets(records)):
                buffer = buffers[target]
                buffer.append(r)
                buffer.timestamps.append(t)
        self._send_full()

    def _targets(self, records: list) -> list[int]:
        """The buffer of each record, for shuffle and custom partitioning."""
        kind, n = self.kind, len(self.buffers)
        if kind == "shuffle":
            return self._random.choices(range(n), k=len(records))
        key_of = self.key_selector
        if kind == "custom":
            partition = self.partition
            try:
                targets = [partition(key_of(r), n) for r in records]
                for target in targets:
                    if not 0 <= target < n:
                        raise IndexError(target)
                return targets
            except Exception as exc:
                raise _partition_error(key_of, partition, n, records, exc) from exc
        raise AssertionError(f"no per-record targets for {kind!r} edges")


def _key_error(key_of, records: list, error: Exception) -> Exception:
    """What to raise when keying ``records`` failed with ``error``: the key selector's own exception, or an
    :class:`UnsupportedKeyError` naming the record and the fix for a key that cannot be hashed."""
    for record in records:
        try:
            key = key_of(record)
        except Exception as exc:
            return KeySelectorError(f"The key_by selector raised {type(exc).__name__}: {exc} (record: "
                                    f"{record!r:.200})")
        try:
            stable_hash(key)
            {key: None}  # dict keys must be hashable too (a frozen dataclass holding a list is not)
        except UnsupportedKeyError as exc:
            return exc
        except TypeError as exc:
            return UnsupportedKeyError(
                f"The key_by selector returned {key!r:.200} (a {type(key).__name__}), which cannot be a key: {exc}. "
                "Return a tuple instead of a list (key_by(lambda r: tuple(...))), a frozenset instead of a set.")
    return error


def _partition_error(key_of, partition, n: int, records: list, error: Exception) -> Exception:
    """What to raise when ``partition_custom`` failed on ``records``: the user's functions' own exception, or
    a :class:`FunctionContractError` for a partition outside ``[0, n)``."""
    for record in records:
        try:
            key = key_of(record)
            target = partition(key, n)
        except Exception as exc:
            return KeySelectorError(f"partition_custom's key selector or partitioner raised {type(exc).__name__}: "
                                    f"{exc} (record: {record!r:.200})")
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < n:
            return FunctionContractError(
                f"partition_custom's partitioner returned {target!r} for key {key!r:.200}: a partition must be an "
                f"int in [0, {n}), {n} being the parallelism of the next operator (use key % num_partitions).")
    return error


class ColumnarEdgeWriter(_ChannelSet):
    """Output of one chain subtask to one columnar edge; its records are Arrow record batches."""

    def __init__(self, edge: ChainEdge, producer: int, channels: dict[int, object], batch_rows: int,
                 max_parallelism: int):
        self.edge = edge
        self.targets = list(edge.targets_of(producer))
        self.channels = [channels[t] for t in self.targets]
        self.buffers = [[] for _ in self.targets]
        self.rows = [0] * len(self.targets)
        self.batch_rows = batch_rows
        self.kind = edge.partitioner.kind
        self.key_column = edge.partitioner.key_column
        self.max_parallelism = max_parallelism
        self.parallelism = edge.target_parallelism
        self._next = producer % max(1, len(self.targets))
        self.separate_side_outputs = False  # columnar operators emit no side outputs

    def _add(self, i: int, batch) -> None:
        self.buffers[i].append(batch)
        self.rows[i] += batch.num_rows
        if self.rows[i] >= self.batch_rows:
            self.channels[i].send(self.buffers[i])
            self.buffers[i] = []
            self.rows[i] = 0

    def emit(self, batches: list) -> None:
        n = len(self.channels)
        for batch in batches:
            if not batch.num_rows:
                continue
            if self.kind == "hash" and n > 1:
                subtasks = column_subtasks(batch.column(self.key_column), self.max_parallelism, self.parallelism)
                for i in range(n):
                    part = batch.filter(pa.array(subtasks == i))
                    if part.num_rows:
                        self._add(i, part)
            elif self.kind == "forward" or n == 1:
                self._add(0, batch)
            elif self.kind == "rebalance":  # whole batches, rotating: batches are large already
                self._add(self._next, batch)
                self._next = (self._next + 1) % n
            else:  # broadcast
                for i in range(n):
                    self._add(i, batch)

    def flush(self) -> None:
        super().flush()
        self.rows = [0] * len(self.rows)


class RecordWriter:
    """All output edges of one chain subtask."""

    def __init__(self, edges: list[EdgeWriter], separate_side_outputs: bool = False):
        self.edges = edges
        for edge in edges:
            edge.separate_side_outputs = separate_side_outputs
        self._channels = [channel for edge in edges for channel in edge.channels]
        self.emitted = 0  # batches' records handed to emit (Python records; Arrow batches count as one each)

    def available(self) -> bool:
        """Whether every channel can take a batch now (a credit, or room in a local queue). With unaligned
        checkpoints sends never wait (overdraft): the subtask asks this before it takes more input instead, and
        while it waits it still takes barriers that overtook its input."""
        for channel in self._channels:
            if not channel.available():
                return False
        return True

    def wait_available(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the first channel that cannot take a batch now."""
        for channel in self._channels:
            if not channel.available():
                channel.wait_available(timeout)
                return

    def emit(self, records: list) -> None:
        self.emitted += len(records)
        for edge in self.edges:
            edge.emit(records)

    def flush(self) -> None:
        for edge in self.edges:
            edge.flush()

    def broadcast_event(self, event: Event) -> None:
        for edge in self.edges:
            edge.broadcast_event(event)

    def close(self) -> None:
        for edge in self.edges:
            edge.close()

    def batch_capacity(self) -> int | None:
        """Records one emit can hand over without waiting behind consumers that asked for small batches
        (buffer debloating): each channel's batch limit, summed over an edge's channels (one record goes to
        one of them; to all of them on a broadcast edge), the smallest over the edges. None when no consumer
        set a limit. A source polls no more than this, so that a checkpoint trigger never waits behind a big
        emit stuck in backpressure."""
        capacity = None
        for edge in self.edges:
            if isinstance(edge, ColumnarEdgeWriter):  # rows of Arrow batches: never debloated
                continue
            limits = [getattr(channel, "batch_limit", None) for channel in edge.channels]
            if not limits or None in limits:
                continue
            edge_capacity = min(limits) if edge.kind == "broadcast" else sum(limits)
            capacity = edge_capacity if capacity is None else min(capacity, edge_capacity)
        return capacity
