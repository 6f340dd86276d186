"""The driver's view of the slots' reports (JobMetrics) and of the checkpoints (CheckpointHistory), fed by hand."""

from runtime.driver.checkpoint_history import CheckpointHistory
from runtime.driver.metrics import JobMetrics
from runtime.graph.job_graph import Chain, JobGraph, OperatorNode
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.messages import MetricsReport, SubtaskMetrics


def two_chains() -> JobGraph:
    """source -> map (chain 0) | keyed -> sink (chain 1), parallelism 2."""
    nodes = [OperatorNode(name, uid, 2, None, None, uid == "src", uid == "out")
             for name, uid in (("numbers", "src"), ("map", "map"), ("count", "count"), ("sink", "out"))]
    return JobGraph("metrics", [Chain(0, nodes[:2], 2), Chain(1, nodes[2:], 2)], [], 128, 100, 1000)


def report(slot, clock_s, chain, records, idle=0.0, blocked=0.0, watermark=None, late=(0, 0), state=(None, None),
           status="RUNNING", inputs=(), outputs=()):
    return MetricsReport(0, slot, clock_s, (SubtaskMetrics(chain, slot, status, records, idle, blocked, 0.5, 0.25,
                                                           inputs, outputs, watermark, late, state),))


def test_totals_rates_ratios_watermarks_and_state_of_every_operator():
    now = [100.0]
    metrics = JobMetrics(two_chains(), clock=lambda: now[0])
    metrics.start_attempt(0)
    for slot in (0, 1):
        metrics.on_report(report(slot, 10.0, 0, (0, 100, 100), outputs=((0, 0, 100, 800, 0.0),)))
        metrics.on_report(report(slot, 10.0, 1, (100, 100, 0), inputs=((0, slot, 100, 800),), watermark=1_000,
                                 state=((7, None), None)))
    for slot in (0, 1):  # two seconds later, on the slots' own clocks
        metrics.on_report(report(slot, 12.0, 0, (0, 500, 500), idle=0.5, blocked=0.5,
                                 outputs=((0, 0, 500, 4_000, 0.5),)))
        metrics.on_report(report(slot, 12.0, 1, (500, 500, 0), idle=1.0, inputs=((0, slot, 500, 4_000),),
                                 watermark=2_000 + slot, late=(3, 0), state=((9, None), None)))
    ops = {op.uid: op for op in metrics.operators()}
    assert (ops["src"].records_in, ops["src"].records_out, ops["src"].rate_out) == (0, 1_000, 400.0)
    assert (ops["map"].records_in, ops["map"].bytes_out, ops["map"].output_usage) == (1_000, 8_000, 0.25)
    assert (ops["count"].records_in, ops["count"].bytes_in, ops["count"].rate_in) == (1_000, 8_000, 400.0)
    assert ops["count"].bytes_in_rate == 3_200.0 and ops["map"].bytes_out_rate == 3_200.0 and ops["out"].bytes_in == 0
    assert ops["out"].records_in == 1_000 and ops["out"].records_out == 0
    assert ops["src"].backpressure_ratio == 0.25 and ops["src"].backpressure_level == "low"
    assert abs(ops["src"].busy_ratio - 0.5) < 1e-9 and abs(ops["count"].idle_ratio - 0.5) < 1e-9
    assert ops["count"].watermark == 2_000, "the lowest of the subtasks'"
    assert ops["count"].late_records_dropped == 6 and ops["count"].state_entries == 18
    assert ops["count"].state_bytes is None, "the heap knows no bytes"
    assert metrics.throughput() == (400.0, 400.0), "read by the sources, written into the sinks"
    # A report that arrives late (overtaken by a newer one) changes nothing.
    metrics.on_report(report(0, 11.0, 1, (300, 300, 0)))
    assert metrics.operator("count").records_in == 1_000

    # The end of input's watermark is no time to show; a finished subtask is idle; the end zeroes the rates.
    for slot in (0, 1):
        metrics.on_report(report(slot, 13.0, 1, (600, 600, 0), watermark=MAX_WATERMARK, status="FINISHED"))
    ops = {op.uid: op for op in metrics.operators()}
    assert ops["count"].watermark is None and ops["count"].busy_ratio == 0.0 and ops["count"].records_in == 1_200
    metrics.end()
    ops = {op.uid: op for op in metrics.operators()}
    assert ops["src"].rate_out == 0.0 and ops["src"].busy_ratio == 0.0 and ops["src"].records_out == 1_000


def test_history_keeps_one_sample_a_second_and_a_new_attempt_counts_from_zero():
    now = [100.0]
    metrics = JobMetrics(two_chains(), clock=lambda: now[0])
    metrics.start_attempt(0)
    metrics.on_report(report(0, 1.0, 0, (0, 10, 10)))
    metrics.on_report(report(0, 2.0, 0, (0, 30, 30)))  # the same second: no second sample
    now[0] = 101.0
    metrics.on_report(report(0, 3.0, 0, (0, 60, 60)))
    samples = metrics.history_since(0)
    assert [t for t, _ in samples] == [100_000, 101_000]
    assert samples[-1][1]["src"] == (0.0, 30.0, 0.0)
    assert metrics.history_since(100_000) == samples[1:]
    metrics.start_attempt(1)
    metrics.on_report(report(0, 4.0, 0, (0, 5, 5)))  # of attempt 0: ignored
    assert metrics.operator("src").records_out == 0
    metrics.on_report(MetricsReport(1, 0, 1.0, report(0, 1.0, 0, (0, 5, 5)).subtasks))
    assert metrics.operator("src").records_out == 5


def test_checkpoint_history_counts_lists_and_details():
    now = [1_000.0]
    history = CheckpointHistory(expected=2, clock=lambda: now[0])
    for checkpoint_id, savepoint in ((1, False), (2, True), (3, False)):
        history.triggered(checkpoint_id, savepoint)
        for subtask in (0, 1):
            history.acknowledged(checkpoint_id, chain=0, subtask=subtask, sync_ms=0.5, async_ms=2.0 + subtask,
                                 alignment_ms=1.0, start_delay_ms=0.1, bytes=100, persisted_bytes=0, unaligned=False)
        now[0] += 0.25
    history.completed(1, bytes=200, full_bytes=200)
    history.completed(2, bytes=200, full_bytes=200)
    history.failed(3, "subtask 1 declined: disk full")
    history.failed(3, "again")  # a second abort of the same checkpoint is not a second failure
    history.triggered(4, False)
    summary = history.summary()
    assert summary["counts"] == {"restored": 0, "total": 4, "in_progress": 1, "completed": 2, "failed": 1}
    assert [(h["id"], h["status"]) for h in summary["history"]] == [(4, "IN_PROGRESS"), (3, "FAILED"),
                                                                     (2, "COMPLETED"), (1, "COMPLETED")]
    assert summary["latest"]["completed"]["id"] == 1 and summary["latest"]["savepoint"]["id"] == 2
    assert summary["latest"]["failed"]["failure_message"] == "subtask 1 declined: disk full"
    assert summary["summary"]["state_size"] == {"min": 200, "max": 200, "avg": 200.0}
    details = history.details(1)
    assert details["async_duration"] == 3.0 and details["num_acknowledged_subtasks"] == 2
    assert [(s["subtask"], s["async_duration"]) for s in details["subtasks"]] == [(0, 2.0), (1, 3.0)]
    assert history.details(99) is None


def test_the_history_keeps_its_size_and_counts_on():
    history = CheckpointHistory(expected=1, clock=lambda: 0.0, size=3)
    for checkpoint_id in range(1, 6):
        history.triggered(checkpoint_id, False)
        history.completed(checkpoint_id, bytes=1, full_bytes=1)
    summary = history.summary()
    assert [h["id"] for h in summary["history"]] == [5, 4, 3] and summary["counts"]["completed"] == 5


def test_each_slots_startup_marks_are_kept_for_the_current_attempt():
    from runtime.protocol import startup

    metrics = JobMetrics(two_chains(), clock=lambda: 0.0)
    metrics.start_attempt(0)
    early = ((startup.TASK_STARTED, 10.0), (startup.CONNECTED, 10.2))
    later = early + ((startup.FIRST_SOURCE_RECORD, 10.3),)
    metrics.on_report(MetricsReport(0, 1, 5.0, (), later))
    metrics.on_report(MetricsReport(0, 1, 4.0, (), early))  # an older report overtaken: the marks stay
    metrics.on_report(MetricsReport(0, 0, 5.0, (), early))
    assert metrics.slot_startup() == [dict(early), dict(later)]
    metrics.start_attempt(1)
    assert metrics.slot_startup() == []
    metrics.on_report(MetricsReport(0, 0, 6.0, (), later))  # a straggler of attempt 0
    assert metrics.slot_startup() == []
