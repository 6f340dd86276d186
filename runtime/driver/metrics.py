"""The driver's view of a job's metrics: the slots' reports (:mod:`runtime.executor.metrics`) turned into per
operator totals, rates, ratios and a short history, for the REST API, Prometheus and the terminal.

A report carries cumulative counters and the slot's own monotonic clock, so a rate is the difference of two
reports of one subtask over the slot's time between them: neither the network's delay nor the driver's clock
skews it. Counters start at zero with each attempt (Flink's metrics do the same after a restart); the history
goes on across attempts. Everything is read and written under one lock, held for microseconds.

>>> from runtime.graph.job_graph import Chain, JobGraph, OperatorNode
>>> from runtime.protocol.messages import MetricsReport, SubtaskMetrics
>>> nodes = [OperatorNode("numbers", "src", 1, None, None, True, False),
...          OperatorNode("print", "out", 1, None, None, False, True)]
>>> metrics = JobMetrics(JobGraph("doc", [Chain(0, nodes, 1)], [], 128, 100, 1000), clock=lambda: 0.0)
>>> metrics.start_attempt(0)
>>> for clock_s, out in ((10.0, 100), (12.0, 300)):
...     metrics.on_report(MetricsReport(0, 0, clock_s, (SubtaskMetrics(0, 0, "RUNNING", (0, out, out), 0.5, 0.0,
...                                                                    0.0, 0.0),)))
>>> sink = metrics.operator("out")
>>> sink.records_in, sink.rate_in, sink.busy_ratio
(300, 100.0, 1.0)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from runtime.graph.job_graph import JobGraph
from runtime.protocol.events import MAX_WATERMARK, MIN_WATERMARK
from runtime.protocol.messages import MetricsReport, SubtaskMetrics
from runtime.settings.options import option_named

__all__ = ["JobMetrics", "OperatorMetrics", "SubtaskView", "backpressure_level", "METRICS_INTERVAL_CONF"]

METRICS_INTERVAL_CONF = option_named("metrics_interval_ms").spark_key

HISTORY_SAMPLES = 600  # one per second: the last ten minutes
# Flink's thresholds for the back pressure level of a subtask (its ratio of time waiting for output).
LOW_BACKPRESSURE, HIGH_BACKPRESSURE = 0.10, 0.50


def backpressure_level(ratio: float) -> str:
    """Flink's names: ``ok`` up to 10% of the time waiting for output, ``low`` up to 50%, ``high`` above.

    >>> [backpressure_level(r) for r in (0.0, 0.3, 0.9)]
    ['ok', 'low', 'high']
    """
    return "ok" if ratio <= LOW_BACKPRESSURE else "low" if ratio <= HIGH_BACKPRESSURE else "high"


@dataclass
class SubtaskView:
    """One chain subtask: its last report and the rates since the report before it."""

    metrics: SubtaskMetrics
    clock_s: float
    rates: tuple[float, ...] = ()  # per entry of metrics.records
    idle_ratio: float = 0.0
    backpressure_ratio: float = 0.0
    bytes_in_rate: float = 0.0
    bytes_out_rate: float = 0.0

    @property
    def busy_ratio(self) -> float:
        return max(0.0, 1.0 - self.idle_ratio - self.backpressure_ratio)


@dataclass
class OperatorMetrics:
    """One operator, summed (records, bytes, rates) or worst (ratios, usage, watermark) over its subtasks."""

    uid: str
    name: str
    chain: int
    parallelism: int
    records_in: int = 0
    records_out: int = 0
    rate_in: float = 0.0
    rate_out: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    bytes_in_rate: float = 0.0
    bytes_out_rate: float = 0.0
    backpressure_ratio: float = 0.0
    busy_ratio: float = 0.0
    idle_ratio: float = 0.0
    input_usage: float = 0.0
    output_usage: float = 0.0
    watermark: int | None = None
    late_records_dropped: int = 0
    state_entries: int = 0
    state_bytes: int | None = None
    connector: dict | None = None  # a connector's own counts over its subtasks (merge_connector_metrics)
    subtasks: list[dict] = field(default_factory=list)

    @property
    def backpressure_level(self) -> str:
        return backpressure_level(self.backpressure_ratio)

    def to_json(self, now_ms: float) -> dict:
        lag = None if self.watermark is None else max(0.0, now_ms - self.watermark)
        return {"read-records": self.records_in, "write-records": self.records_out,
                "read-records-per-second": round(self.rate_in, 1), "write-records-per-second": round(self.rate_out, 1),
                "read-bytes": self.bytes_in, "write-bytes": self.bytes_out,
                "read-bytes-per-second": round(self.bytes_in_rate, 1),
                "write-bytes-per-second": round(self.bytes_out_rate, 1),
                "backpressure-ratio": round(self.backpressure_ratio, 3), "backpressure-level": self.backpressure_level,
                "busy-ratio": round(self.busy_ratio, 3), "idle-ratio": round(self.idle_ratio, 3),
                "input-buffer-usage": self.input_usage, "output-buffer-usage": self.output_usage,
                "current-input-watermark": self.watermark, "watermark-lag-ms": lag,
                "late-records-dropped": self.late_records_dropped, "state-entries": self.state_entries,
                "state-bytes": self.state_bytes, "connector": self.connector}


class JobMetrics:
    """The metrics of one job (all its attempts); fed by the control server, read by anyone."""

    def __init__(self, graph: JobGraph, clock=time.time):
        self.graph = graph
        self.clock = clock
        self._lock = threading.Lock()
        self.attempt: int | None = None
        self._subtasks: dict[tuple[int, int], SubtaskView] = {}
        self._startup: dict[int, dict[str, float]] = {}  # each slot's start-up marks (runtime.protocol.startup)
        self._operators = [(node, chain.index, i) for chain in graph.chains for i, node in enumerate(chain.operators)]
        self._chain_length = {chain.index: len(chain.operators) for chain in graph.chains}
        self._sources = [node.uid for node, _, _ in self._operators if node.is_source]
        self._sinks = [node.uid for node, _, _ in self._operators if node.is_sink]
        # (wall ms, {uid: (records in per s, records out per s, backpressure ratio)}), one per second at most
        self.history: deque = deque(maxlen=HISTORY_SAMPLES)
        self._last_sample_s = 0.0
        self.ended = False
        self._aggregated: list[OperatorMetrics] | None = None  # until the next report: readers share one

    # -- feeding ---------------------------------------------------------------------------------------

    def start_attempt(self, attempt: int) -> None:
        """Counters start again at zero: the slots of ``attempt`` count from their start."""
        with self._lock:
            self.attempt = attempt
            self._subtasks = {}
            self._startup = {}
            self._aggregated = None

    def end(self) -> None:
        """The job ended: nothing flows any more (the totals stay; rates and ratios are zero)."""
        with self._lock:
            self.ended = True
            for view in self._subtasks.values():
                view.rates = tuple(0.0 for _ in view.rates)
                view.backpressure_ratio = view.bytes_in_rate = view.bytes_out_rate = 0.0
                view.idle_ratio = 1.0
            self._sample(self.clock(), force=True)

    def on_report(self, report: MetricsReport) -> None:
        with self._lock:
            if report.attempt != self.attempt:
                return
            if len(report.startup) >= len(self._startup.get(report.slot, ())):  # marks are only ever added
                self._startup[report.slot] = dict(report.startup)
            for metrics in report.subtasks:
                key = (metrics.chain, metrics.subtask)
                previous = self._subtasks.get(key)
                if previous is not None and report.clock_s < previous.clock_s:
                    continue  # overtaken by a newer report (the final one): counts never go back
                view = SubtaskView(metrics, report.clock_s)
                if previous is not None and report.clock_s > previous.clock_s:
                    elapsed = report.clock_s - previous.clock_s
                    before = previous.metrics
                    view.rates = tuple((now - then) / elapsed for now, then in zip(metrics.records, before.records))
                    view.idle_ratio = _ratio(metrics.idle_s - before.idle_s, elapsed)
                    view.backpressure_ratio = _ratio(metrics.backpressured_s - before.backpressured_s, elapsed)
                    view.bytes_in_rate = (_bytes_in(metrics) - _bytes_in(before)) / elapsed
                    view.bytes_out_rate = (_bytes_out(metrics) - _bytes_out(before)) / elapsed
                elif previous is not None:  # the same instant twice (the final report): keep the rates
                    view.rates, view.idle_ratio = previous.rates, previous.idle_ratio
                    view.backpressure_ratio = previous.backpressure_ratio
                    view.bytes_in_rate, view.bytes_out_rate = previous.bytes_in_rate, previous.bytes_out_rate
                if metrics.status == "FINISHED":  # waiting for the checkpoint that commits its end: idle
                    view.idle_ratio, view.backpressure_ratio = 1.0, 0.0
                self._subtasks[key] = view
            self._sample(self.clock())

    def _sample(self, now_s: float, force: bool = False) -> None:
        self._aggregated = None  # a report changed the views
        if not force and now_s - self._last_sample_s < 0.95:
            return
        self._last_sample_s = now_s
        self._aggregated = self._aggregate()
        self.history.append((int(now_s * 1000), {op.uid: (round(op.rate_in, 1), round(op.rate_out, 1),
                                                          round(op.backpressure_ratio, 3))
                                                 for op in self._aggregated}))

    # -- reading ---------------------------------------------------------------------------------------

    def slot_startup(self) -> list[dict[str, float]]:
        """The start-up marks each slot of the current attempt reported, by slot (those that reported)."""
        with self._lock:
            return [dict(self._startup[slot]) for slot in sorted(self._startup)]

    def operators(self) -> list[OperatorMetrics]:
        with self._lock:
            if self._aggregated is None:
                self._aggregated = self._aggregate()
            return self._aggregated

    def operator(self, uid: str) -> OperatorMetrics | None:
        return next((op for op in self.operators() if op.uid == uid), None)

    def throughput(self) -> tuple[float, float]:
        """Records per second read by the sources and written into the sinks, now."""
        by_uid = {op.uid: op for op in self.operators()}
        return (sum(by_uid[uid].rate_out for uid in self._sources),
                sum(by_uid[uid].rate_in for uid in self._sinks))

    def history_since(self, since_ms: int = 0) -> list:
        with self._lock:
            return [sample for sample in self.history if sample[0] > since_ms]

    def _aggregate(self) -> list[OperatorMetrics]:
        by_chain: dict[int, list[SubtaskView]] = {}
        for (chain, _), view in sorted(self._subtasks.items()):
            by_chain.setdefault(chain, []).append(view)
        result = []
        for node, chain, i in self._operators:
            op = OperatorMetrics(node.uid, node.name, chain, node.parallelism)
            views = by_chain.get(chain, [])
            last = self._chain_length[chain] - 1
            watermarks = []
            state_bytes = []
            for view in views:
                m = view.metrics
                if len(m.records) <= i + 1:
                    continue
                op.records_in += m.records[i]
                op.records_out += m.records[i + 1]
                if view.rates:
                    op.rate_in += view.rates[i]
                    op.rate_out += view.rates[i + 1]
                bytes_in = _bytes_in(m) if i == 0 else 0  # a chain's inner operators send nothing over channels
                bytes_out = _bytes_out(m) if i == last else 0
                if i == 0:
                    op.bytes_in += bytes_in
                    op.bytes_in_rate += view.bytes_in_rate
                    op.input_usage = max(op.input_usage, m.input_usage)
                if i == last:
                    op.bytes_out += bytes_out
                    op.bytes_out_rate += view.bytes_out_rate
                    op.output_usage = max(op.output_usage, m.output_usage)
                op.backpressure_ratio = max(op.backpressure_ratio, view.backpressure_ratio)
                op.busy_ratio += view.busy_ratio / len(views)
                op.idle_ratio += view.idle_ratio / len(views)
                watermarks.append(m.watermark)
                late = m.late_dropped[i] if i < len(m.late_dropped) else 0
                op.late_records_dropped += late
                state = m.state[i] if i < len(m.state) else None
                if state is not None:
                    op.state_entries += state[0]
                    state_bytes.append(state[1])
                connector = m.connectors[i] if i < len(m.connectors) else None
                if connector is not None:
                    op.connector = merge_connector_metrics(op.connector, connector)
                op.subtasks.append({
                    "subtask": m.subtask, "status": m.status, "read-records": m.records[i],
                    "write-records": m.records[i + 1],
                    "read-records-per-second": round(view.rates[i], 1) if view.rates else 0.0,
                    "write-records-per-second": round(view.rates[i + 1], 1) if view.rates else 0.0,
                    "backpressure-ratio": round(view.backpressure_ratio, 3),
                    "backpressure-level": backpressure_level(view.backpressure_ratio),
                    "busy-ratio": round(view.busy_ratio, 3), "idle-ratio": round(view.idle_ratio, 3),
                    "read-bytes": bytes_in, "write-bytes": bytes_out,
                    "input-buffer-usage": m.input_usage if i == 0 else 0.0,
                    "output-buffer-usage": m.output_usage if i == last else 0.0,
                    "input-channels": [{"edge": e, "producer": p, "records": r, "bytes": b}
                                       for e, p, r, b in m.inputs] if i == 0 else [],
                    "output-channels": [{"edge": e, "consumer": c, "records": r, "bytes": b, "backpressured-s": w}
                                        for e, c, r, b, w in m.outputs] if i == last else [],
                    "late-records-dropped": late, "state-entries": state[0] if state else 0,
                    "state-bytes": state[1] if state else None, "connector": connector,
                    "current-input-watermark": _shown(m.watermark)})
            if watermarks and None not in watermarks:
                op.watermark = _shown(min(watermarks))
            if state_bytes and None not in state_bytes:
                op.state_bytes = sum(state_bytes)
            result.append(op)
        return result


def merge_connector_metrics(total: dict | None, part: dict) -> dict:
    """Subtasks' connector counts as one: numbers add up, per-split maps join (each split has one subtask).

    >>> merge_connector_metrics({"records-skipped": 1, "split-lag": {"t-0": 5}}, {"records-skipped": 2,
    ...                                                                      "split-lag": {"t-1": 0}})
    {'records-skipped': 3, 'split-lag': {'t-0': 5, 't-1': 0}}
    """
    merged = dict(total or {})
    for key, value in part.items():
        if isinstance(value, dict):
            merged[key] = {**merged.get(key, {}), **value}
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = merged.get(key, 0) + value
    return merged


def _ratio(seconds: float, elapsed: float) -> float:
    return min(1.0, max(0.0, seconds / elapsed))


def _shown(watermark: int | None) -> int | None:
    """None before the first watermark and after the end of input's (no lag to show)."""
    return None if watermark is None or watermark in (MAX_WATERMARK, MIN_WATERMARK) else watermark


def _bytes_in(metrics: SubtaskMetrics) -> int:
    return sum(channel[3] for channel in metrics.inputs)


def _bytes_out(metrics: SubtaskMetrics) -> int:
    return sum(channel[3] for channel in metrics.outputs)
