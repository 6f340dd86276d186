"""``/metrics``: every job's metrics in Prometheus' text format, through ``prometheus_client``.

Names start with ``chandy_``; operator series carry the labels ``job`` (the job id), ``job_name``, ``uid`` (the
operator's) and ``subtask``. Counters are the attempt's (they restart at zero after a restart, as Flink's do;
Prometheus' ``rate()`` handles such resets). A fresh registry per scrape: the values are read from the jobs
when asked, never copied into global state.

>>> text, content_type = prometheus_text([])
>>> b"# TYPE chandy_records_in_total counter" in text, content_type.split(";")[0]
(True, 'text/plain')
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["prometheus_text", "SERIES"]

_OPERATOR_LABELS = ["job", "job_name", "uid", "subtask"]
_CHECKPOINT_LABELS = ["job", "job_name", "uid", "subtask"]  # uid: the head of the chain the subtask runs

# (name, kind, help, key in a subtask's metrics)
SERIES = [
    ("chandy_records_in", "counter", "Records into the operator's subtask", "read-records"),
    ("chandy_records_out", "counter", "Records out of the operator's subtask", "write-records"),
    ("chandy_records_in_per_second", "gauge", "Records into the subtask per second (between its last two reports)",
     "read-records-per-second"),
    ("chandy_records_out_per_second", "gauge", "Records out of the subtask per second", "write-records-per-second"),
    ("chandy_bytes_in", "counter", "Bytes arrived over the network (the chain's head; local channels carry none)",
     "read-bytes"),
    ("chandy_bytes_out", "counter", "Bytes sent over the network (the chain's tail)", "write-bytes"),
    ("chandy_backpressure_ratio", "gauge", "Share of time waiting for room in the outputs", "backpressure-ratio"),
    ("chandy_busy_ratio", "gauge", "Share of time neither waiting for input nor for output", "busy-ratio"),
    ("chandy_idle_ratio", "gauge", "Share of time waiting for input", "idle-ratio"),
    ("chandy_input_buffer_usage", "gauge", "How full the input queues are (0..1)", "input-buffer-usage"),
    ("chandy_output_buffer_usage", "gauge", "How full the output channels are (0..1)", "output-buffer-usage"),
    ("chandy_late_records_dropped", "counter", "Records dropped for arriving behind the watermark",
     "late-records-dropped"),
    ("chandy_state_entries", "gauge", "Keyed state entries held (an estimate for RocksDB)", "state-entries"),
    ("chandy_state_bytes", "gauge", "Keyed state bytes held (RocksDB's estimate; absent for the heap)",
     "state-bytes"),
    ("chandy_current_input_watermark_ms", "gauge", "The newest watermark the subtask saw (epoch ms)",
     "current-input-watermark"),
]


def _families(masters, now_ms: float):
    families = {name: (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, text,
                                                                                      labels=_OPERATOR_LABELS)
                for name, kind, text, _ in SERIES}
    lag = GaugeMetricFamily("chandy_watermark_lag_ms", "How far the subtask's watermark is behind the driver's clock",
                            labels=_OPERATOR_LABELS)
    split_lag = GaugeMetricFamily("chandy_source_split_lag", "Records of a source's split (a Kafka partition) not read "
                                  "yet, as of the newest fetch", labels=_OPERATOR_LABELS + ["split"])
    connector_counts = {key: CounterMetricFamily(name, text, labels=_OPERATOR_LABELS) for key, name, text in (
        ("records-skipped", "chandy_source_records_skipped", "Records a source skipped (they did not deserialize)"),
        ("transactions-committed", "chandy_sink_transactions_committed", "Transactions a sink committed"),
        ("transactions-aborted", "chandy_sink_transactions_aborted", "Transactions a sink aborted"),
        ("bytes-read", "chandy_source_bytes_read", "Bytes of the records a source read, as the system it reads "
         "holds them (a Kafka record's key and value)"),
        ("bytes-written", "chandy_sink_bytes_written", "Bytes of the records a sink wrote, as the system it writes "
         "holds them (a Kafka record's key and value)"))}
    job_labels = ["job", "job_name"]
    up = GaugeMetricFamily("chandy_job_running", "1 while the job runs (or restarts), 0 once it ended",
                           labels=job_labels + ["status"])
    restarts = CounterMetricFamily("chandy_job_restarts", "Restarts of the job", labels=job_labels)
    completed = CounterMetricFamily("chandy_checkpoints_completed", "Checkpoints completed", labels=job_labels)
    failed = CounterMetricFamily("chandy_checkpoints_failed", "Checkpoints failed", labels=job_labels)
    last_duration = GaugeMetricFamily("chandy_last_checkpoint_duration_ms", "The newest completed checkpoint's "
                                      "duration, trigger to commit", labels=job_labels)
    last_size = GaugeMetricFamily("chandy_last_checkpoint_size_bytes", "Bytes the newest completed checkpoint stored",
                                  labels=job_labels)
    per_subtask = {key: GaugeMetricFamily(f"chandy_checkpoint_{name}_ms", f"The newest completed checkpoint's {text}, "
                                          "per chain subtask", labels=_CHECKPOINT_LABELS)
                   for key, name, text in (("alignment_duration", "alignment", "alignment time"),
                                           ("sync_duration", "sync", "synchronous part"),
                                           ("async_duration", "async", "asynchronous part"),
                                           ("start_delay", "start_delay", "start delay"))}
    for master in masters:
        job, name = master.job_id, master.job_name
        status = master.status.name
        up.add_metric([job, name, status], 0 if master.ended else 1)
        restarts.add_metric([job, name], master.restarts)
        for op in master.metrics.operators():
            for sub in op.subtasks:
                labels = [job, name, op.uid, str(sub["subtask"])]
                for series, _, _, key in SERIES:
                    value = sub.get(key)
                    if value is not None:
                        families[series].add_metric(labels, value)
                watermark = sub.get("current-input-watermark")
                if watermark is not None:
                    lag.add_metric(labels, max(0.0, now_ms - watermark))
                connector = sub.get("connector") or {}
                for split, behind in sorted(connector.get("split-lag", {}).items()):
                    split_lag.add_metric(labels + [split], behind)
                for key, family in connector_counts.items():
                    if key in connector:
                        family.add_metric(labels, connector[key])
        coordinator = master.coordinator
        if coordinator is None:
            continue
        history = coordinator.history
        completed.add_metric([job, name], history.counts["completed"])
        failed.add_metric([job, name], history.counts["failed"])
        latest = history.latest_completed()
        if latest is not None:
            last_duration.add_metric([job, name], latest["end_to_end_duration"])
            last_size.add_metric([job, name], latest["state_size"])
            heads = {chain.index: chain.operators[0].uid for chain in master.graph.chains}
            for sub in latest["subtasks"]:
                labels = [job, name, heads.get(sub["chain"], str(sub["chain"])), str(sub["subtask"])]
                for key, family in per_subtask.items():
                    family.add_metric(labels, sub[key])
    yield from families.values()
    yield from (lag, split_lag, *connector_counts.values(), up, restarts, completed, failed, last_duration, last_size,
                *per_subtask.values())


class _Jobs:
    def __init__(self, masters, now_ms: float):
        self.masters, self.now_ms = masters, now_ms

    def collect(self):
        return _families(self.masters, self.now_ms)


def prometheus_text(masters: list) -> tuple[bytes, str]:
    """The exposition of ``masters``' metrics and its content type."""
    import time

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Jobs(masters, time.time() * 1000))
    return generate_latest(registry), CONTENT_TYPE_LATEST
