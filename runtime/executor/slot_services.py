"""What a chain subtask may use of the slot that runs it: the job's graph, its identity, the snapshotter, the
stop signals and the line to the driver. The subtask sees this, not the whole
:class:`~runtime.executor.slot.SlotRunner` (its connections, gates and threads are the slot's own business).

>>> sorted(SlotServices.__annotations__), [name for name in vars(SlotServices) if name == "send"]
(['attempt', 'graph', 'queryables', 'slot', 'snapshotter', 'stop_sources', 'stopped', 'young_thresholds'], ['send'])
"""

from __future__ import annotations

import threading
from typing import Protocol

from runtime.executor.queryable_state import SlotQueryableStates
from runtime.executor.snapshotter import Snapshotter
from runtime.gc_pause import YoungThresholds
from runtime.graph.job_graph import JobGraph
from runtime.ids import Attempt, SlotIndex
from runtime.protocol.messages import Message, StopSources

__all__ = ["SlotServices"]


class SlotServices(Protocol):
    graph: JobGraph
    attempt: Attempt
    slot: SlotIndex
    stopped: threading.Event  # set when the slot stops: every subtask ends
    snapshotter: Snapshotter | None  # None without checkpointing; set before any subtask runs
    stop_sources: StopSources | None  # set by the control thread: the job stops with a savepoint
    queryables: SlotQueryableStates  # the queryable states its functions declared
    young_thresholds: YoungThresholds  # the young generation's, within a batch and between batches

    def send(self, message: Message) -> None:
        """Send ``message`` to the driver."""
