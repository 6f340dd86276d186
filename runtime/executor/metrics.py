"""What a slot tells the driver about its subtasks every metrics interval: counters, read without locks.

Every counter is written by one thread (the subtask's, a channel reader's or a producer's) and only read here, by
the slot's reporter thread: an int or float attribute read under the GIL is whole, and a report a few records
behind is still true a moment later. Nothing here runs per record: the subtasks count per batch
(:meth:`~runtime.executor.subtask.SubtaskRunner._push`), the channels per batch sent or taken, and the waits
only when a wait happens. The driver turns two reports into rates (:mod:`runtime.driver.metrics`).

>>> from types import SimpleNamespace as Fake
>>> from runtime.network.wait_timer import WaitTimer
>>> source = Fake(gate=None, writer=None, source_idle_s=0.25, output_waits=WaitTimer(), record_counts=[0, 10, 10],
...               chain=Fake(index=0), slot=Fake(slot=1), status=Fake(name="RUNNING"), watermark=None,
...               operators=[object(), object()], backends=[None, None])
>>> metrics = subtask_metrics(source)
>>> metrics.records, metrics.idle_s, metrics.state
((0, 10, 10), 0.25, (None, None))
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from runtime.protocol.messages import MetricsReport, SubtaskMetrics

if TYPE_CHECKING:
    from runtime.executor.slot import SlotRunner
    from runtime.executor.subtask import SubtaskRunner

__all__ = ["subtask_metrics", "metrics_report"]

log = logging.getLogger(__name__)


def subtask_metrics(runner: "SubtaskRunner") -> SubtaskMetrics:
    """The counters of one chain subtask now."""
    gate, writer = runner.gate, runner.writer
    inputs: tuple = ()
    idle_s = runner.source_idle_s
    input_usage = 0.0
    if gate is not None:
        idle_s += gate.idle.seconds()
        input_usage = gate.usage()
        inputs = tuple((edge_id, producer, gate.records_in[i], gate.bytes_in[i])
                       for i, (edge_id, producer) in enumerate(gate.channels))
    outputs = []
    output_usage = 0.0
    backpressured_s = runner.output_waits.seconds()  # a wait going on counts: a long stall shows while it lasts
    if writer is not None:
        for edge_writer in writer.edges:
            for target, channel in zip(edge_writer.targets, edge_writer.channels):
                blocked = channel.blocked_s
                backpressured_s += blocked
                output_usage = max(output_usage, channel.usage)
                outputs.append((edge_writer.edge.id, target, channel.records_sent, channel.bytes_sent,
                                round(blocked, 4)))
    operators = runner.operators
    return SubtaskMetrics(
        runner.chain.index, runner.slot.slot, runner.status.name, tuple(runner.record_counts), round(idle_s, 4),
        round(backpressured_s, 4), round(input_usage, 3), round(output_usage, 3), inputs, tuple(outputs),
        runner.watermark, tuple(getattr(op, "late_records_dropped", 0) for op in operators),
        tuple(_state_size(backend) for backend in runner.backends), tuple(_connector(op) for op in operators))


def _connector(operator) -> dict | None:
    """What a source's reader or a sink's writer counts of its own (``metrics()``), else None."""
    part = getattr(operator, "reader", None) or getattr(operator, "writer", None)
    counts = getattr(part, "metrics", None)
    if not callable(counts):
        return None
    try:
        return counts()
    except Exception:  # a client mid-reconnect: no counts this time, never a failed report
        log.debug("connector metrics of %s unavailable", operator, exc_info=True)
        return None


def _state_size(backend) -> tuple[int, int | None] | None:
    if backend is None:
        return None
    try:
        return backend.state_size()
    except Exception:  # a size is an estimate: never worth failing a report for (a dict resized meanwhile ...)
        log.debug("state size of %s unavailable", backend, exc_info=True)
        return None


def metrics_report(slot: "SlotRunner") -> MetricsReport:
    """The report of every subtask of ``slot`` (those that were built)."""
    return MetricsReport(slot.attempt, slot.slot, time.monotonic(),
                         tuple(subtask_metrics(runner) for runner in slot.runners if runner.writer is not None))
