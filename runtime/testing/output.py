"""What the operator under test emitted: the harness's stand-in for the subtask's record writer.

A subtask hands its operator's output to the record writer, whose edges take the main records and the side
outputs apart (:mod:`runtime.network.record_writer`) and which broadcasts the watermarks after them. Here the
same output is kept in order, each record with its event timestamp (None when it has none).

>>> from runtime.protocol.records import TimestampedBatch
>>> from runtime.side_outputs import SideOutputRecord
>>> out = CollectedOutput()
>>> out.emit(TimestampedBatch.of(["a", SideOutputRecord("late", "b")], [5, 3])); out.emit_watermark(9)
>>> out.records, out.side_outputs, out.watermarks
([('a', 5)], {'late': [('b', 3)]}, [9])
"""

from __future__ import annotations

from typing import Any

from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import SideOutputRecord

__all__ = ["CollectedOutput"]


class CollectedOutput:
    """Main records and side-output records as ``(record, timestamp)`` pairs, and the watermarks sent on.

    >>> out = CollectedOutput()
    >>> out.emit([1, 2]); out.records
    [(1, None), (2, None)]
    >>> out.clear(); out.records
    []
    """

    def __init__(self):
        self.records: list[tuple[Any, int | None]] = []
        self.side_outputs: dict[str, list[tuple[Any, int | None]]] = {}
        self.watermarks: list[int] = []

    def emit(self, records: list) -> None:
        timestamps = records.timestamps if isinstance(records, TimestampedBatch) else [None] * len(records)
        for record, timestamp in zip(records, timestamps):
            if type(record) is SideOutputRecord:
                self.side_outputs.setdefault(record.tag, []).append((record.value, timestamp))
            else:
                self.records.append((record, timestamp))

    def emit_watermark(self, watermark: int) -> None:
        self.watermarks.append(watermark)

    def clear(self) -> None:
        self.records.clear()
        self.side_outputs.clear()
        self.watermarks.clear()
