"""What one chain subtask counts for its metrics: a small value written by the subtask's thread alone and read,
without locks, by the slot's reporter (:mod:`runtime.executor.metrics`).

>>> counters = SubtaskCounters.for_chain(2)
>>> counters.records[0] += 3; counters.source_idle_s += 0.5
>>> counters.records, counters.source_idle_s, counters.watermark
([3, 0, 0], 0.5, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.network.wait_timer import WaitTimer

__all__ = ["SubtaskCounters"]


@dataclass(slots=True)
class SubtaskCounters:
    """``records``: into each operator of the chain and, last, out of it; ``source_idle_s``: seconds a source's
    polls found nothing; ``output_waits``: the waits for room in the outputs (unaligned checkpoints);
    ``watermark``: the newest the chain saw; ``first_record_at``: when it read its first record (``time.time()``,
    a start-up mark of :mod:`runtime.protocol.startup`)."""

    records: list[int]
    source_idle_s: float = 0.0
    output_waits: WaitTimer = field(default_factory=WaitTimer)
    watermark: int | None = None
    first_record_at: float | None = None

    @classmethod
    def for_chain(cls, operators: int) -> "SubtaskCounters":
        return cls([0] * (operators + 1))
