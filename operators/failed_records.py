"""Records whose function raises, set aside instead of failing the job (``stream.side_output_failed_records(tag)``).

The operator is given one record at a time, so that a record that raises can be told from the others: it becomes a
:class:`~runtime.side_outputs.FailedRecord` on the side output ``tag`` (in the place of the record's output), and
the records after it go on. The runtime applies this to an operator's batches in STREAMING mode; a keyed operator
in BATCH mode applies it itself when it runs each key's records at the end of the input.

>>> out = process_isolating_failures(lambda batch: [10 // x for x in batch], [5, 0, 2], "bad", "divide")
>>> out[0], out[1].value, out[2]
(2, FailedRecord(0 in 'divide': ZeroDivisionError: integer division or modulo by zero), 5)
"""

from __future__ import annotations

import traceback
from typing import Callable

from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import FailedRecord, SideOutputRecord

__all__ = ["process_isolating_failures", "failed_only"]


def process_isolating_failures(process: Callable[[list], list], records: list, tag: str, operator_name: str,
                               never_isolated: tuple[type[BaseException], ...] = ()) -> list:
    """``process(records)``, called with one record at a time: the output of every record that went through,
    in order, and a ``SideOutputRecord(tag, FailedRecord(...))`` for each that raised (with that record's
    timestamp). ``never_isolated``: exceptions that are not about a record (the slot being torn down)."""
    stamps = records.timestamps if isinstance(records, TimestampedBatch) else None
    out: list = []
    out_stamps: list = []
    for position, record in enumerate(records):
        stamp = stamps[position] if stamps is not None else None
        try:
            produced = process([record] if stamps is None else TimestampedBatch.of([record], [stamp])) or []
        except never_isolated:
            raise
        except Exception as exc:
            produced = [SideOutputRecord(tag, FailedRecord(record, operator_name, type(exc).__name__, str(exc),
                                                           "".join(traceback.format_exception(exc))))]
            out_stamps.append(stamp)
        else:
            out_stamps.extend(produced.timestamps if isinstance(produced, TimestampedBatch)
                              else [None] * len(produced))
        out.extend(produced)
    return TimestampedBatch.of(out, out_stamps) if any(s is not None for s in out_stamps) else out


def failed_only(output: list) -> list:
    """The FailedRecords of an output whose other records are dropped (a batch reduce's running values),
    with their timestamps."""
    if isinstance(output, TimestampedBatch):
        kept = [(r, t) for r, t in zip(output, output.timestamps) if isinstance(r, SideOutputRecord)]
        return TimestampedBatch.of([r for r, _ in kept], [t for _, t in kept]) if kept else []
    return [r for r in output if isinstance(r, SideOutputRecord)]
