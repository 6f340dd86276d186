"""What a slot tells the driver about its subtasks every metrics interval: counters, read without locks.

Every counter is written by one thread (the subtask's, a channel reader's or a producer's) and only read here, by
the slot's reporter thread: an int or float attribute read under the GIL is whole, and a report a few records
behind is still true a moment later. Nothing here runs per record: the subtasks count per batch
(:meth:`~runtime.executor.subtask.SubtaskRunner._push`), the channels per batch sent or taken, and the waits
only when a wait happens. The driver turns two reports into rates (:mod:`runtime.driver.metrics`).

>>> from types import SimpleNamespace as Fake
>>> from runtime.network.wait_timer import WaitTimer
>>> from runtime.executor.counters import SubtaskCounters
>>> counters = SubtaskCounters([0, 10, 10], source_idle_s=0.25)
>>> source = Fake(gate=None, writer=None, counters=counters, chain=Fake(index=0), status=Fake(name="RUNNING"),
...               operators=[object(), object()], backends=[None, None])
>>> metrics = subtask_metrics(source, slot=1)
>>> metrics.records, metrics.idle_s, metrics.state
((0, 10, 10), 0.25, (None, None))
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from runtime.executor.subtask import SubtaskRunner
from runtime.ids import Attempt, SlotIndex
from runtime.protocol.messages import MetricsReport, SubtaskMetrics

__all__ = ["subtask_metrics", "metrics_report"]

log = logging.getLogger(__name__)


def subtask_metrics(runner: SubtaskRunner, slot: SlotIndex) -> SubtaskMetrics:
    """The counters of one chain subtask (of slot ``slot``) now."""
    gate, writer, counters = runner.gate, runner.writer, runner.counters
    inputs: tuple = ()
    idle_s = counters.source_idle_s
    input_usage = 0.0
    if gate is not None:
        idle_s += gate.idle.seconds()
        input_usage = gate.usage()
        inputs = tuple((edge_id, producer, gate.records_in[i], gate.bytes_in[i])
                       for i, (edge_id, producer) in enumerate(gate.channels))
    outputs = []
    output_usage = 0.0
    backpressured_s = counters.output_waits.seconds()  # a wait going on counts: a long stall shows while it lasts
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
        runner.chain.index, slot, runner.status.name, tuple(counters.records), round(idle_s, 4),
        round(backpressured_s, 4), round(input_usage, 3), round(output_usage, 3), inputs, tuple(outputs),
        counters.watermark, tuple(getattr(op, "late_records_dropped", 0) for op in operators),
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


def metrics_report(attempt: Attempt, slot: SlotIndex, runners: Iterable[SubtaskRunner],
                   startup: tuple[tuple[str, float], ...] = ()) -> MetricsReport:
    """The report of the subtasks ``runners`` of slot ``slot`` (those whose outputs were built), with the slot's
    start-up marks ``startup``."""
    return MetricsReport(attempt, slot, time.monotonic(),
                         tuple(subtask_metrics(runner, slot) for runner in runners if runner.writer is not None),
                         startup)
