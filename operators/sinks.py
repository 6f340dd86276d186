"""Sinks: what a user implements (``Sink`` / ``SinkWriter``) and the built-in ones.

``CollectSink`` and ``PrintSink`` are at-least-once: after a failure and restart they may repeat records.
"""

from __future__ import annotations

import enum
import sys
import uuid
from typing import Any

from operators.operator import SinkOperator

__all__ = ["Sink", "SinkWriter", "CollectSink", "DiscardingSink", "PrintSink", "SinkWriterOperator", "DeliveryGuarantee"]


class DeliveryGuarantee(enum.Enum):
    """What a sink promises after failures (PyFlink's names). Chandy's ``FileSink`` and every
    ``TwoPhaseCommitSink`` are ``EXACTLY_ONCE``; an ``IdempotentSink`` is effectively once (its upserts repeat
    harmlessly); ``print()`` and ``CollectSink`` are ``AT_LEAST_ONCE``; the Kafka sink does what it is told.

    >>> [guarantee.name for guarantee in DeliveryGuarantee]
    ['EXACTLY_ONCE', 'AT_LEAST_ONCE', 'NONE']
    """

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    NONE = "NONE"


class SinkWriter:
    """Writes one subtask's share of a stream.

    >>> class Upper(SinkWriter):
    ...     def __init__(self):
    ...         self.lines = []
    ...     def write_batch(self, records):
    ...         self.lines.extend(r.upper() for r in records)
    >>> writer = Upper(); writer.write_batch(["a", "b"]); writer.lines
    ['A', 'B']
    """

    def open(self, runtime_context) -> None:
        """Called once before the first write."""

    def write_batch(self, records: list) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """End of input: flush what is buffered."""

    def close(self) -> None:
        """Called once at the end, or when the job is cancelled."""

    def result(self) -> Any:
        """What the driver receives from this subtask when the job ends."""
        return None

    def snapshot_state(self, checkpoint_id: int) -> list | dict:
        """State at barrier ``checkpoint_id``, called on the subtask's thread between two writes: a list (dealt
        round-robin on restore), or a dict of named lists where names starting ``union:`` go whole to
        every subtask."""
        return []

    def restore_state(self, items: list | dict) -> None:
        """Resume with this subtask's share of what ``snapshot_state`` returned; called before open."""


class Sink:
    """A destination for a stream; ``create_writer`` runs once per subtask on the executors.

    ``accepts_batches = True``: on a columnar stream its writers receive Arrow record batches as records;
    otherwise a columnar stream reaches it as rows (tuples, see ``DataStream.to_rows``).

    >>> sink = CollectSink("out")  # one writer per subtask; their results are merged on the driver
    >>> writers = [sink.create_writer(subtask_index=i, parallelism=2) for i in range(2)]
    >>> writers[0].write_batch([1, 2]); writers[1].write_batch([3])
    >>> sink.merge_results([w.result() for w in writers])
    [1, 2, 3]
    """

    accepts_batches = False

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        raise NotImplementedError

    def merge_results(self, results: list) -> Any:
        """Combine the per-subtask ``SinkWriter.result()`` values on the driver."""
        return None


class _CollectWriter(SinkWriter):
    def __init__(self):
        self.records: list = []

    def write_batch(self, records: list) -> None:
        self.records.extend(records)

    def result(self) -> Any:
        return self.records

    def snapshot_state(self, checkpoint_id: int) -> list:
        return list(self.records)

    def restore_state(self, items: list) -> None:
        self.records = list(items)


class CollectSink(Sink):
    """Collects every record and returns them to the driver in the ``JobResult``.

    Its records are part of its checkpointed state, so with checkpointing a restarted job returns each
    record once; without checkpointing a restart starts it empty. Use only for bounded jobs whose output fits
    in the driver's memory (tests, samples): every checkpoint stores everything collected so far.

    >>> sink = CollectSink("counts")
    >>> sink.name
    'counts'
    """

    def __init__(self, name: str | None = None):
        self.name = name or f"collect-{uuid.uuid4().hex[:8]}"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _CollectWriter()

    def merge_results(self, results: list) -> list:
        merged: list = []
        for part in results:
            merged.extend(part)
        return merged


class _DiscardWriter(SinkWriter):
    def write_batch(self, records: list) -> None:
        pass


class DiscardingSink(Sink):
    """Drops every record (as Flink's DiscardingSink): for jobs whose effect is their state, and benchmarks.

    >>> writer = DiscardingSink().create_writer(subtask_index=0, parallelism=1)
    >>> writer.write_batch([1, 2, 3]); writer.result() is None
    True
    """

    name = "discard"
    accepts_batches = True  # dropping batches is cheaper than dropping rows

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _DiscardWriter()


class _PrintWriter(SinkWriter):
    def __init__(self, prefix: str):
        self.prefix = prefix

    def write_batch(self, records: list) -> None:
        prefix = self.prefix
        sys.stdout.write("".join(f"{prefix}{r}\n" for r in records))
        sys.stdout.flush()


class PrintSink(Sink):
    """Prints each record to the executor's stdout, as Flink does: ``id:subtask> record``. In local mode that is
    the terminal's stdout (see :mod:`runtime.executor.executor_stdout`: Spark's own redirection would make it stderr).

    At-least-once: after a restart, records since the restored checkpoint are printed again.

    >>> PrintSink("out").create_writer(subtask_index=1, parallelism=2).write_batch(["a", "b"])
    out:2> a
    out:2> b
    """

    def __init__(self, sink_identifier: str | None = None):
        self.sink_identifier = sink_identifier

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        parts = []
        if self.sink_identifier:
            parts.append(self.sink_identifier)
        prefix = ":".join(parts)
        if parallelism > 1:
            prefix = f"{prefix}:{subtask_index + 1}" if prefix else f"{subtask_index + 1}"
        return _PrintWriter(f"{prefix}> " if prefix else "")


class SinkWriterOperator(SinkOperator):
    """Runs one subtask's writer of a :class:`Sink`."""

    def __init__(self, name: str, sink: Sink):
        super().__init__(name, sink)
        self.sink = sink
        self.writer: SinkWriter | None = None

    ITEMS = "items"

    def _writer(self) -> SinkWriter:
        if self.writer is None:
            self.writer = self.sink.create_writer(self.info.subtask_index, self.info.parallelism)
        return self.writer

    def restore_operator_state(self, state: dict[str, list]) -> None:
        super().restore_operator_state(state)
        own = {name: items for name, items in state.items() if not name.startswith(self.USER_STATE_PREFIX)}
        if set(own) <= {self.ITEMS}:
            self._writer().restore_state(list(own.get(self.ITEMS, [])))
        else:  # a writer that keeps named lists (see SinkWriter.snapshot_state)
            self._writer().restore_state(own)

    def open(self) -> None:
        writer = self._writer()
        continue_after = getattr(writer, "continue_after", None)
        if callable(continue_after) and self.info.restored_checkpoint_id:
            continue_after(self.info.restored_checkpoint_id)
        writer.open(self.runtime_context)

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        state = super().snapshot_operator_state(checkpoint_id)
        items = self.writer.snapshot_state(checkpoint_id)
        if isinstance(items, dict):
            state.update(items)
        elif items:
            state[self.ITEMS] = items
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        notify = getattr(self.writer, "notify_checkpoint_complete", None)
        if notify is not None:
            notify(checkpoint_id)

    def process_batch(self, records: list) -> list:
        self.writer.write_batch(records)
        return []

    def finish(self) -> list:
        self.writer.finish()
        return []

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def result(self) -> Any:
        return self.writer.result() if self.writer is not None else None
