"""Channel state: the records in flight at an unaligned checkpoint, stored with the chain head's state and
replayed into the chain before it reads new input.

A subtask's :class:`~runtime.network.in_flight.InFlightRecorder` holds, per input channel, the records its
producers sent before their barrier that it had not processed when it snapshotted. They are stored as rows of
the head operator's state file (the groups are in :mod:`runtime.protocol.checkpoints`):

- records of a keyed edge by key group, so that a restore at another parallelism gives each subtask the key
  groups it owns, as it does for keyed state;
- records of rebalance, shuffle and rescale edges in one row any subtask may take (dealt round-robin when
  the parallelism changes: those edges may send a record to any subtask);
- records of forward, broadcast and custom edges in one row only the same subtask may take (Flink refuses to
  rescale such in-flight data too: which subtask a record belongs to depends on the parallelism).

>>> from runtime.graph.job_graph import ChainEdge, Partitioner
>>> from runtime.network.in_flight import InFlightRecorder
>>> recorder = InFlightRecorder(1, 2)
>>> recorder.capture(0, [[("a", 1), ("b", 2)]]); recorder.capture(1, [["x"]])
>>> keyed = ChainEdge(0, 0, 1, Partitioner("hash", key_selector=lambda r: r[0]), None, 2, 2)
>>> forward = ChainEdge(1, 0, 1, Partitioner("forward"), None, 2, 2, input_number=2)
>>> state = ChannelState(recorder, [(0, 0), (1, 0)], {0: keyed, 1: forward}, max_parallelism=128)
>>> [(g - CHANNEL_KEY_GROUP_BASE if g >= 0 else g, _items(payload)) for g, payload in state.rows()]
[(27, [(1, [('a', 1)])]), (119, [(1, [('b', 2)])]), (-3, [(2, ['x'])])]
"""

from __future__ import annotations

import pickle
from collections import defaultdict

import pyarrow.compute as pc

from runtime.errors import UnpicklableStateError
from runtime.graph.job_graph import ChainEdge
from runtime.keys.arrow_key_groups import column_key_groups
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import assign_to_key_group
from runtime.network.in_flight import InFlightRecorder
from runtime.protocol.checkpoints import (
    CHANNEL_KEY_GROUP_BASE,
    CHANNEL_STATE_GROUP,
    PINNED_CHANNEL_STATE_GROUP,
    RestoreSpec,
)
from runtime.protocol.records import TimestampedBatch

__all__ = ["ChannelState", "read_channel_state", "REDISTRIBUTABLE_KINDS"]

REDISTRIBUTABLE_KINDS = frozenset({"rebalance", "shuffle", "rescale"})  # any consumer subtask may take a record


def _dump(pairs: list) -> bytes:
    return pickle.dumps(pairs, protocol=pickle.HIGHEST_PROTOCOL)


def _items(payload: bytes) -> list:
    """``(input number, batch)`` pairs of one row, in the order they were in flight."""
    return [(number, pickle.loads(item)) for number, item in pickle.loads(payload)]


class ChannelState:
    """What one subtask recorded for an unaligned checkpoint, with what it takes to store it by key group."""

    def __init__(self, recorder: InFlightRecorder, channels: list[tuple[int, int]], edges: dict[int, ChainEdge],
                 max_parallelism: int, describe: str = "this subtask"):
        self.recorder = recorder
        self.channels = channels  # gate channel index -> (edge id, producer subtask)
        self.edges = edges
        self.max_parallelism = max_parallelism
        self.describe = describe

    @property
    def bytes(self) -> int:
        return self.recorder.bytes

    def rows(self) -> list[tuple[int, bytes]]:
        """The state-file rows: keyed records by key group (ascending), then the others."""
        if self.recorder.error is not None:
            error = self.recorder.error
            raise UnpicklableStateError(
                f"records in flight into {self.describe} cannot be pickled ({type(error).__name__}: {error}): an "
                "unaligned checkpoint stores them. Send picklable records, or use aligned checkpoints.")
        keyed: dict[int, list] = defaultdict(list)
        shared, pinned = [], []
        for index, items in enumerate(self.recorder.items):
            if not items:
                continue
            edge = self.edges[self.channels[index][0]]
            kind, number = edge.partitioner.kind, edge.input_number
            if kind == "hash":
                for data in items:
                    for group, part in self._by_key_group(edge, pickle.loads(data)):
                        keyed[group].append((number, pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)))
            else:
                (shared if kind in REDISTRIBUTABLE_KINDS else pinned).extend((number, data) for data in items)
        rows = [(CHANNEL_KEY_GROUP_BASE + group, _dump(keyed[group])) for group in sorted(keyed)]
        if shared:
            rows.append((CHANNEL_STATE_GROUP, _dump(shared)))
        if pinned:
            rows.append((PINNED_CHANNEL_STATE_GROUP, _dump(pinned)))
        return rows

    def _by_key_group(self, edge: ChainEdge, batch) -> list[tuple[int, object]]:
        """``batch`` split by key group, each part in the batch's order (timestamps kept)."""
        max_parallelism = self.max_parallelism
        if edge.schema is not None:  # Arrow record batches: the key column's groups, with Arrow kernels
            parts = []
            for record_batch in batch:
                groups = column_key_groups(record_batch.column(edge.partitioner.key_column), max_parallelism)
                for group in pc.unique(groups).to_pylist():
                    parts.append((group, [record_batch.filter(pc.equal(groups, group))]))
            return parts
        key_of = edge.partitioner.key_selector
        groups: dict[int, list] = {}
        stamps: dict[int, list] | None = {} if type(batch) is TimestampedBatch else None
        for position, record in enumerate(batch):
            group = assign_to_key_group(canonical_key(key_of(record)), max_parallelism)
            groups.setdefault(group, []).append(record)
            if stamps is not None:
                stamps.setdefault(group, []).append(batch.timestamps[position])
        if stamps is None:
            return list(groups.items())
        return [(group, TimestampedBatch.of(records, stamps[group])) for group, records in groups.items()]


def read_channel_state(storage, spec: RestoreSpec, subtask: int, parallelism: int) -> list[tuple[int, object]]:
    """The ``(input number, batch)`` pairs a restored subtask replays before it reads new input: the key groups
    it owns of every file, the redistributable rows dealt round-robin, and its own pinned rows."""
    start, end = spec.key_groups
    owned = {CHANNEL_KEY_GROUP_BASE + group for group in range(start, end + 1)}
    replay = []
    for handle in spec.channel:
        wanted = set(owned)
        if handle.subtask % parallelism == subtask:
            wanted.add(CHANNEL_STATE_GROUP)
        if handle.subtask == subtask:
            wanted.add(PINNED_CHANNEL_STATE_GROUP)
        for _, payload in storage.read_state_rows(spec.checkpoint_id, handle, wanted):
            replay.extend(_items(payload))
    return replay
