"""Batch execution (``RuntimeExecutionMode.BATCH``): a keyed operator sees each key's records together, once its
whole input is in, and event time jumps to the end at once (Flink's batch semantics for bounded input).

:class:`BatchKeyedOperator` wraps the keyed operator the job declared. It holds its input, grouped by key, until
the input ends (the final watermark), then hands the operator each key's records in a row, followed by the
final watermark: every event-time timer and window fires once, at the end. Watermarks before that are held
back (they would only fire timers early). A keyed ``reduce`` emits only each key's final value. The second input
of a keyed two-input operator is grouped the same way, unless it is a broadcast input: that one goes through at
once, so the broadcast state is complete before any keyed record is processed (as in Flink). A broadcast operator
on a stream that is not keyed gets the same: its other input is held, in arrival order, until the end.

>>> from operators.builtins import KeyedReduceOperator
>>> from operators.context import SubtaskInfo
>>> from runtime.keys.key_groups import key_group_range
>>> from runtime.protocol.events import MAX_WATERMARK
>>> from state_backends.heap import HeapKeyedStateBackend
>>> total = KeyedReduceOperator("sum", None, lambda a, b: (a[0], a[1] + b[1]), key_selector=lambda r: r[0])
>>> op = BatchKeyedOperator(total)
>>> op.setup(SubtaskInfo("sum", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
>>> op.open(); op.process_batch([("a", 1), ("b", 2), ("a", 3)])
[]
>>> op.process_watermark(MAX_WATERMARK)  # the end of input: one result per key
[('a', 4), ('b', 2)]
"""

from __future__ import annotations

import functools

from operators.builtins import KeyedReduceOperator, may_use_keyed_state
from operators.co_operators import TwoInputOperator
from operators.failed_records import failed_only, process_isolating_failures
from operators.operator import OneInputOperator
from runtime.keys.canonical import canonical_keys
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import SideOutputRecord

__all__ = ["BatchKeyedOperator", "ReduceCombiner"]

CHUNK = 4096  # records per call into the wrapped operator once the input is in
_EARLIEST = -(1 << 63)


class _Groups:
    """One input's records by key, in the order keys first came, each with its timestamps (None: none)."""

    __slots__ = ("key_of", "records", "timestamps", "stamped", "sort")

    def __init__(self, key_of, sort: bool = True):
        self.key_of = key_of
        self.sort = sort  # each key's records by timestamp
        self.records: dict = {}
        self.timestamps: dict = {}
        self.stamped = False

    def add(self, batch: list) -> None:
        key_of, records = self.key_of, self.records
        keys = canonical_keys([key_of(r) for r in batch])  # NaNs and the like: one group, as the backend sees it
        for key, r in zip(keys, batch):
            group = records.get(key)
            if group is None:
                records[key] = [r]
            else:
                group.append(r)
        if type(batch) is TimestampedBatch:
            self.stamped = True
            stamps = self.timestamps
            for key, t in zip(keys, batch.timestamps):
                group = stamps.get(key)
                if group is None:
                    stamps[key] = [t]
                else:
                    group.append(t)
        elif self.stamped:
            stamps = self.timestamps
            for key in keys:
                stamps.setdefault(key, []).append(None)

    def take(self) -> list[tuple[object, list, list | None]]:
        """``(key, records, timestamps or None)`` per key, emptying the groups."""
        stamps = self.timestamps if self.stamped else {}
        if self.stamped:  # keys whose records all came unstamped before the first stamped batch
            for key, group in self.records.items():
                have = stamps.get(key, [])
                if len(have) < len(group):
                    stamps[key] = [None] * (len(group) - len(have)) + have
        out = []
        for key, group in self.records.items():
            timestamps = stamps.get(key)
            if timestamps is not None and self.sort:  # each key's records in event-time order, as Flink sorts them
                order = sorted(range(len(group)), key=lambda i: _EARLIEST if timestamps[i] is None else timestamps[i])
                group = [group[i] for i in order]
                timestamps = [timestamps[i] for i in order]
            out.append((key, group, timestamps))
        self.records, self.timestamps = {}, {}
        return out


def _one_group(record) -> int:
    return 0


def _chunks(groups: list) -> list:
    """The groups' records as batches of about CHUNK records, each key's records in a row."""
    batches, records, stamps, stamped = [], [], [], False
    for _, group, timestamps in groups:
        records.extend(group)
        if timestamps is not None:
            stamped = True
            stamps.extend(timestamps)
        else:
            stamps.extend([None] * len(group))
        if len(records) >= CHUNK:
            batches.append(TimestampedBatch.of(records, stamps) if stamped else records)
            records, stamps, stamped = [], [], False
    if records:
        batches.append(TimestampedBatch.of(records, stamps) if stamped else records)
    return batches


class BatchKeyedOperator(TwoInputOperator):
    """A keyed operator run with batch semantics (see the module docstring)."""

    keyed = True
    isolates_failed_records = True  # the records are processed at the end (see _process), not when they come

    def __init__(self, inner):
        super().__init__(inner.name, inner.function)
        self.inner = inner
        self.keyed = inner.keyed  # False for a broadcast operator on a stream that is not keyed
        self.two_input = isinstance(inner, TwoInputOperator)
        self.key1 = getattr(inner, "key_selector", None) or getattr(inner, "key1", None)
        self.key2 = getattr(inner, "key2", None)  # None: a broadcast second input, which goes straight through
        self.side_tags = inner.side_tags
        self.emits_side_outputs = inner.emits_side_outputs
        self.final_only = isinstance(inner, KeyedReduceOperator)
        self.folding = None  # a reduce over records without timestamps folds them as they come (decided at first)
        self.done = False
        # side_output_failed_records(tag) on the declared operator: a record whose function raises goes there
        self.failed_records_tag = getattr(inner, "failed_records_tag", None)

    def setup(self, info, keyed_backend=None) -> None:
        super().setup(info, keyed_backend)
        self.inner.side_tags = self.side_tags
        self.inner.setup(info, keyed_backend)

    def restore_operator_state(self, state: dict[str, list]) -> None:
        self.inner.restore_operator_state(state)

    def open(self) -> None:
        # a broadcast operator's non-keyed input: one group, kept in arrival order (nothing to sort by)
        self.first = _Groups(self.key1 if self.key1 is not None else _one_group, sort=self.key1 is not None)
        self.second = _Groups(self.key2) if self.key2 is not None else None
        self.inner.open()

    def process_batch1(self, records: list) -> list:
        if self.folding is None and self.final_only:
            # Records without event time have no order to sort by: a reduce then folds them as they come (its
            # final value is the same), instead of holding them all until the end.
            self.folding = type(records) is not TimestampedBatch
        if self.folding:  # the running values are dropped: only the final ones go out
            return failed_only(self._process(self.inner.process_batch, records))
        else:
            self.first.add(records)
        return []

    def process_batch2(self, records: list) -> list:
        if self.second is None:
            return self.inner.process_batch2(records)
        self.second.add(records)
        return []

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        return self._run() if watermark == MAX_WATERMARK else []

    def finish(self) -> list:
        out = _Output()
        out.add(self._run())
        out.add(self.inner.finish())
        return out.batch()

    def _run(self) -> list:
        """The input is complete: each key's records in a row, then the end of event time."""
        if self.done:
            return []
        self.done = True
        if self.folding:
            return [value for _, _, value in self.inner.backend.entries(KeyedReduceOperator.STATE_NAME)]
        groups = self.first.take()
        if self.final_only:
            return self._final_values(groups)
        inner, out = self.inner, _Output()
        push = inner.process_batch1 if self.two_input else inner.process_batch
        for batch in _chunks(groups):
            out.add(self._process(push, batch))
        if self.second is not None:
            for batch in _chunks(self.second.take()):
                out.add(self._process(inner.process_batch2, batch))
        out.add(inner.process_watermark(MAX_WATERMARK))
        return out.batch()

    def _process(self, process, records: list) -> list:
        """``process(records)``, setting aside the records that raise when the job asked for that."""
        if self.failed_records_tag is None:
            return process(records)
        return process_isolating_failures(process, records, self.failed_records_tag, self.name)

    def _final_values(self, groups: list) -> list:
        """A reduce's last value per key, carrying the key's latest timestamp."""
        inner = self.inner
        stateless = not may_use_keyed_state(inner.function) and self.failed_records_tag is None
        reduce, out = inner.call, _Output()
        for _, records, timestamps in groups:
            stamp = max((t for t in timestamps if t is not None), default=None) if timestamps else None
            if stateless:
                value = functools.reduce(reduce, records)
            else:  # keyed state of its own, or records to set aside: fold through the operator, with the key set
                folded = self._process(inner.process_batch, records)
                failed = failed_only(folded)
                out.add(failed)
                values = [r for r in folded if not isinstance(r, SideOutputRecord)]
                if not values:  # every record of the key raised
                    continue
                value = values[-1]
            out.add(TimestampedBatch.of([value], [stamp]) if stamp is not None else [value])
        return out.batch()

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        return self.inner.snapshot_operator_state(checkpoint_id)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.inner.notify_checkpoint_complete(checkpoint_id)

    def close(self) -> None:
        self.inner.close()


class _Output:
    """Output batches gathered into one, keeping the timestamps of those that have them."""

    __slots__ = ("records", "timestamps", "stamped")

    def __init__(self):
        self.records, self.timestamps, self.stamped = [], [], False

    def add(self, batch: list) -> None:
        if not batch:
            return
        self.records.extend(batch)
        if type(batch) is TimestampedBatch:
            self.stamped = True
            self.timestamps.extend(batch.timestamps)
        else:
            self.timestamps.extend([None] * len(batch))

    def batch(self) -> list:
        return TimestampedBatch.of(self.records, self.timestamps) if self.stamped else self.records


class ReduceCombiner(OneInputOperator):
    """Batch mode's pre-aggregation of a ``reduce``, chained before the shuffle: each upstream subtask folds its
    own records per key and sends one partial value per key instead of every record (what Spark calls a map-side
    combine). The keyed reduce downstream folds the partials, so the function must not care how its records
    are grouped (associative) or ordered (commutative): true of sums, counts, min and max, and required anyway
    for a result that does not depend on the order in which parallel inputs arrive. Records with event
    timestamps pass through unfolded, so that the reduce downstream folds each key's records in time order.

    >>> from runtime.protocol.events import MAX_WATERMARK
    >>> combine = ReduceCombiner("sum", lambda a, b: (a[0], a[1] + b[1]), key_selector=lambda r: r[0])
    >>> combine.open(); combine.process_batch([("a", 1), ("b", 1), ("a", 1)])
    []
    >>> combine.process_watermark(MAX_WATERMARK)
    [('a', 2), ('b', 1)]
    """

    def __init__(self, name: str, call, key_selector):
        super().__init__(name)
        self.call = call
        self.key_selector = key_selector
        self.partial: dict = {}

    def process_batch(self, records: list) -> list:
        if type(records) is TimestampedBatch:
            return records
        key_of, reduce, partial = self.key_selector, self.call, self.partial
        keys = canonical_keys([key_of(r) for r in records])
        for key, r in zip(keys, records):
            before = partial.get(key)
            partial[key] = r if before is None else reduce(before, r)
        return []

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        return self._partials() if watermark == MAX_WATERMARK else []

    def finish(self) -> list:
        return self._partials()

    def _partials(self) -> list:
        out = list(self.partial.values())
        self.partial = {}
        return out
