"""The driver's REST API, /metrics, the CLI and the dashboard in a real headless Chromium, with real jobs.

Jobs here are paced by their checkpoints and end when the test creates a file (tests/integration/paced.py), so
"while it runs" is an event the test controls, never a race with the machine's speed. Counts are compared
exactly with the input; timings are never asserted.
"""

import contextlib
import io
import json
import os
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from operators import (
    CollectSink,
    SequenceSource,
    Source,
    SourceReader,
    TumblingEventTimeWindows,
    WatermarkStrategy,
    WindowFunction,
)
from runtime import RestartStrategies, StreamExecutionEnvironment
from runtime.driver.checkpoint_history import HISTORY_SIZE
from runtime.errors import JobCancelledError
from runtime.tools.cli import main as chandy
from tests.integration.chaos import ChaosMap, plan
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import FileExists, PacedSource
from tests.integration.waiting import wait_for

N = 20_000
KEYS = 50
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def call(url, method="GET", body=None, token=None):
    data = json.dumps(body).encode() if body is not None else (b"" if method != "GET" else None)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            raw = answer.read()
            kind = answer.headers.get("Content-Type", "")
            return answer.status, (json.loads(raw) if kind.startswith("application/json") else raw.decode())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def counting_job(env, tmp_path, sink, chaos=None):
    """numbers -> (chaos) -> key_by -> running count -> sink, at parallelism 2; runs until tmp_path/end exists.
    Each number is its own event time (ms), so once a source subtask has read its range [lo, hi), its
    watermark is hi - 2 (monotonous timestamps: the largest seen, minus 1)."""
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    source = PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 8,
                         end_when=FileExists(str(tmp_path / "end")), together=str(tmp_path / "paced"))
    event_time = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda x, _: x)
    numbers = env.from_source(source, event_time, "numbers").uid("numbers")
    if chaos is not None:
        numbers = numbers.map(chaos).uid("chaos")
    numbers.key_by(lambda x: x % KEYS).process(CountPerKey()).name("count per key").uid("count") \
        .sink_to(sink).uid("sink")


def poll_until(stop, url, failures):
    """Ask ``url`` again and again (20 times a second) until ``stop``; answers other than 200 go to ``failures``."""
    while not stop.wait(0.05):
        try:
            status, answer = call(url)
        except OSError as error:  # the server stopped answering
            failures.append((url, repr(error)))
            return
        if status != 200:
            failures.append((url, status, answer))


def token_of(client):
    """The dashboard's token, as the driver's log line prints it (``?token=``)."""
    return client.get_dashboard_url(with_token=True).split("?token=")[1].split("#")[0]


def completed(base, job):
    return call(f"{base}/jobs/{job}/checkpoints")[1]["counts"]["completed"]


def metric(vertices, uid, name):
    return next(v for v in vertices if v["id"] == uid)["metrics"][name]


def test_rest_api_metrics_and_cli_follow_a_running_job_to_its_exact_end(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    counting_job(env, tmp_path, sink)
    client = env.execute_async("rest-api")
    url = client.get_dashboard_url()
    assert url and "/#/jobs/" in url
    base, job = url.split("/#/jobs/")
    # Clients that never stop asking, all along: the job's result stays exact, whatever they do.
    stop_polling, failures = threading.Event(), []
    pollers = [threading.Thread(target=poll_until, args=(stop_polling, f"{base}{path}", failures), daemon=True)
               for path in ("/metrics", f"/jobs/{job}", f"/jobs/{job}/checkpoints", "/jobs/overview")]
    for poller in pollers:
        poller.start()
    try:
        wait_for(lambda: completed(base, job) >= 3, what="three completed checkpoints")
        # Slots report every second: wait for a report that saw records cross the keyed edge.
        wait_for(lambda: metric(call(f"{base}/jobs/{job}")[1]["vertices"], "count", "read-bytes") > 0,
                 what="a metrics report after records crossed the network")

        status, jobs = call(f"{base}/jobs")
        assert status == 200 and {"id": job, "status": "RUNNING"} in jobs["jobs"]
        status, details = call(f"{base}/jobs/{job}")
        assert status == 200 and details["state"] == "RUNNING" and details["name"] == "rest-api"
        uids = [v["id"] for v in details["vertices"]]
        source = uids[0]  # the source itself; "numbers" stamps its records and makes the watermarks
        assert uids[1:] == ["numbers", "count", "sink"] and source.startswith("numbers-")
        nodes = {n["id"]: n for n in details["plan"]["nodes"]}
        assert nodes["count"]["inputs"] == [{"id": "numbers", "ship_strategy": "HASH", "chained": False,
                                             "side_output": None, "input": 1}]
        assert nodes["sink"]["inputs"][0]["chained"] is True
        assert [c["operators"] for c in details["plan"]["chains"]] == [[source, "numbers"], ["count", "sink"]]
        for vertex in details["vertices"]:
            m = vertex["metrics"]
            assert m["backpressure-level"] in ("ok", "low", "high") and 0 <= m["busy-ratio"] <= 1
            assert type(m["read-records"]) is int and type(m["write-records"]) is int
        assert metric(details["vertices"], "numbers", "write-records") > 0
        assert metric(details["vertices"], "count", "read-records") > 0
        assert metric(details["vertices"], "count", "state-entries") > 0

        status, checkpoints = call(f"{base}/jobs/{job}/checkpoints")
        assert status == 200 and checkpoints["counts"]["failed"] == 0
        newest = checkpoints["history"][0]
        assert {"id", "status", "trigger_timestamp", "end_to_end_duration", "state_size", "alignment_duration",
                "sync_duration", "async_duration", "num_subtasks", "num_acknowledged_subtasks"} <= set(newest)
        done = checkpoints["latest"]["completed"]
        status, one = call(f"{base}/jobs/{job}/checkpoints/details/{done['id']}")
        assert status == 200 and one["status"] == "COMPLETED"
        assert sorted((s["chain"], s["subtask"]) for s in one["subtasks"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert all(isinstance(s["sync_duration"], (int, float)) and isinstance(s["alignment_duration"], (int, float))
                   for s in one["subtasks"])
        status, config = call(f"{base}/jobs/{job}/checkpoints/config")
        assert status == 200 and config["interval"] == 200 and config["mode"] == "exactly_once"
        status, marks = call(f"{base}/jobs/{job}/watermarks")
        assert status == 200 and [w["id"] for w in marks["watermarks"]] == uids
        status, pressure = call(f"{base}/jobs/{job}/vertices/count/backpressure")
        assert status == 200 and [s["subtask"] for s in pressure["subtasks"]] == [0, 1]
        status, vertex = call(f"{base}/jobs/{job}/vertices/count")
        assert status == 200 and len(vertex["subtasks"]) == 2
        channels = [c for s in vertex["subtasks"] for c in s["input-channels"]]
        assert sorted(c["producer"] for c in channels) == [0, 0, 1, 1], "each subtask hears both producers"
        assert sum(c["bytes"] for c in channels) > 0, "one of each subtask's producers is in another slot"
        assert {s["subtask"]: len(s["output-channels"]) for s in vertex["subtasks"]} == {0: 0, 1: 0}
        assert call(f"{base}/jobs/{job}/exceptions")[1]["exceptionHistory"]["entries"] == []

        # Bad input: an unknown vertex or checkpoint, and a job id that is no job.
        status, error = call(f"{base}/jobs/{job}/vertices/nope/backpressure")
        assert status == 404 and "no operator with uid 'nope'" in error["errors"][0] and "count" in error["errors"][0]
        assert call(f"{base}/jobs/{job}/checkpoints/details/999999")[0] == 404
        assert call(f"{base}/jobs/{job}/checkpoints/details/latest")[0] == 400
        assert call(f"{base}/jobs/ffffffff00000000")[0] == 404

        # Watermarks: once every number was read, each source subtask's is the end of its range minus 2, and the
        # counting operator's is the lowest of its inputs'.
        def watermarks():
            answer = call(f"{base}/jobs/{job}/watermarks")[1]["watermarks"]
            return {w["id"]: w for w in answer}

        # Both source subtasks at the end of their ranges: the counting operator's (the lower) reaches its final
        # value while the other source subtask may still be reading.
        wait_for(lambda: sorted(s["watermark"] for s in watermarks()["numbers"]["subtasks"]) == [N // 2 - 2, N - 2]
                 and watermarks()["count"]["watermark"] == N // 2 - 2, what="the watermarks of the whole input")
        marks = watermarks()
        assert sorted(s["watermark"] for s in marks["numbers"]["subtasks"]) == [N // 2 - 2, N - 2]
        assert marks["count"]["lag-ms"] > 1_700_000_000_000, "event time near 1970: the lag is the time since"

        # Actions need the dashboard's token (the driver listens on a network address): none is 401, a wrong one
        # 403, both with a JSON error saying where the token is; reads need none.
        token = token_of(client)
        status, error = call(f"{base}/jobs/{job}/checkpoints", "POST")
        assert status == 401 and "needs the dashboard's token" in error["errors"][0]
        status, error = call(f"{base}/jobs/{job}", "PATCH", token="not-the-token")
        assert status == 403 and "does not match" in error["errors"][0]
        assert call(f"{base}/jobs/{job}")[1]["state"] == "RUNNING"

        # A checkpoint triggered now (with the token) completes and is listed.
        status, triggered = call(f"{base}/jobs/{job}/checkpoints", "POST", token=token)
        assert status == 202
        operation = f"{base}/jobs/{job}/checkpoints/{triggered['request-id']}"
        wait_for(lambda: call(operation)[1]["status"]["id"] == "COMPLETED", what="the triggered checkpoint")
        triggered_id = call(operation)[1]["operation"]["checkpointId"]
        assert any(h["id"] == triggered_id and h["status"] == "COMPLETED"
                   for h in call(f"{base}/jobs/{job}/checkpoints")[1]["history"])

        # A savepoint by REST: its location once written.
        status, triggered = call(f"{base}/jobs/{job}/savepoints", "POST",
                                 {"target-directory": str(tmp_path / "savepoints")}, token=token)
        assert status == 202
        operation = f"{base}/jobs/{job}/savepoints/{triggered['request-id']}"
        wait_for(lambda: call(operation)[1]["status"]["id"] == "COMPLETED", what="the savepoint")
        location = call(operation)[1]["operation"]["location"]
        assert location.removeprefix("file://").startswith(str(tmp_path / "savepoints"))
        assert os.path.exists(os.path.join(location.removeprefix("file://"), "_metadata"))

        # Prometheus' parser reads /metrics: every listed series, labelled by job, operator uid and subtask.
        status, text = call(f"{base}/metrics")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        for name in ("chandy_records_in", "chandy_records_out", "chandy_bytes_in", "chandy_bytes_out",
                     "chandy_backpressure_ratio", "chandy_busy_ratio", "chandy_input_buffer_usage",
                     "chandy_output_buffer_usage", "chandy_late_records_dropped", "chandy_state_entries",
                     "chandy_checkpoint_alignment_ms", "chandy_checkpoint_sync_ms", "chandy_checkpoint_async_ms",
                     "chandy_current_input_watermark_ms", "chandy_watermark_lag_ms",
                     "chandy_checkpoints_completed", "chandy_job_restarts"):
            assert name in families, name
        ours = [s for s in families["chandy_records_in"].samples if s.labels["job"] == job]
        assert {(s.labels["uid"], s.labels["subtask"]) for s in ours} == {(u, i) for u in uids for i in "01"}

        # The CLI reads the same API; its actions take the token from the URL as the log prints it.
        out, errors = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errors):
            assert chandy(["status", url]) == 0
            assert chandy(["jobs", base]) == 0
            assert chandy(["trigger-checkpoint", url]) == 2
            assert chandy(["trigger-checkpoint", client.get_dashboard_url(with_token=True)]) == 0
        assert "401" in errors.getvalue() and "?token=" in errors.getvalue()
        text = out.getvalue()
        assert "Job 'rest-api'" in text and "RUNNING" in text and "count per key (count, p=2)" in text
        assert job[:8] in text and "Checkpoint" in text and "completed" in text
    finally:
        open(tmp_path / "end", "w").close()
    result = client.get_job_execution_result()
    stop_polling.set()
    for poller in pollers:
        poller.join(60)
    assert failures == []
    assert final_counts(result.collected(sink)) == {k: N // KEYS for k in range(KEYS)}

    # In Spark's UI, the barrier stage's job is in a group named after the job and attempt, and its description
    # names the job, the attempt and the dashboard.
    (spark_job,) = spark.sparkContext.statusTracker().getJobIdsForGroup(f"chandy-{job}-0")
    description = spark.sparkContext._jsc.sc().statusStore().job(spark_job).description().get()
    assert description == f"Chandy job 'rest-api' ({job[:8]}) attempt 0: {url}"

    # The final state: exact counts, and every completed checkpoint in the history.
    status, details = call(f"{base}/jobs/{job}")
    assert details["state"] == "FINISHED" and details["end-time"] > details["start-time"]
    vertices = details["vertices"]
    assert metric(vertices, "numbers", "write-records") == N
    assert metric(vertices, "count", "read-records") == N and metric(vertices, "count", "write-records") == N
    assert metric(vertices, "sink", "read-records") == N
    assert metric(vertices, "count", "state-entries") == KEYS
    checkpoints = call(f"{base}/jobs/{job}/checkpoints")[1]
    taken = [c.checkpoint_id for c in result.checkpoints]
    assert checkpoints["counts"]["completed"] == len(taken) + 1, "the checkpoints and the savepoint (Flink's count)"
    completed_history = [h for h in checkpoints["history"] if h["status"] == "COMPLETED"]
    listed = sorted(h["id"] for h in completed_history if not h["is_savepoint"])
    assert listed == taken[-HISTORY_SIZE:], "every completed checkpoint (the newest 100) is in the history"
    assert [h["is_savepoint"] for h in completed_history].count(True) == 1
    # What left the numbers' subtasks over their channels is what the counting subtasks took from theirs.
    count_subtasks = call(f"{base}/jobs/{job}/vertices/count")[1]["subtasks"]
    numbers_subtasks = call(f"{base}/jobs/{job}/vertices/numbers")[1]["subtasks"]
    assert sum(c["records"] for s in numbers_subtasks for c in s["output-channels"]) == N
    assert sum(c["records"] for s in count_subtasks for c in s["input-channels"]) == N

    # Too late to cancel: 409, and the CLI says so.
    status, error = call(f"{base}/jobs/{job}", "PATCH", token=token)
    assert status == 409 and "FINISHED" in error["errors"][0]
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        assert chandy(["cancel", client.get_dashboard_url(with_token=True)]) == 2
    assert "409" in errors.getvalue()


def test_exceptions_list_the_users_traceback_and_the_restart_and_cancel_ends_the_job(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    chaos = ChaosMap(plan(str(tmp_path / "chaos"), "raise"), "raise", "raise", after=N // 4)
    counting_job(env, tmp_path, CollectSink("counts"), chaos=chaos)
    client = env.execute_async("rest-failures")
    base, job = client.get_dashboard_url().split("/#/jobs/")
    wait_for(lambda: call(f"{base}/jobs/{job}/exceptions")[1]["exceptionHistory"]["entries"], what="the failure")
    answer = call(f"{base}/jobs/{job}/exceptions")[1]
    (entry,) = answer["exceptionHistory"]["entries"]

    def checkpointed_after_the_restart():
        latest = call(f"{base}/jobs/{job}/checkpoints")[1]["latest"]["completed"]
        return latest is not None and latest["trigger_timestamp"] > entry["timestamp"]

    wait_for(checkpointed_after_the_restart, what="a checkpoint of the restarted attempt")
    answer = call(f"{base}/jobs/{job}/exceptions")[1]
    (entry,) = answer["exceptionHistory"]["entries"]
    assert answer["restarts"] == 1 and entry["restarted"] is True and entry["attempt"] == 0
    assert entry["exceptionName"] == "RuntimeError" and entry["operatorUid"] == "chaos"
    assert "chaos: injected failure" in entry["stacktrace"]
    assert "in fire" in entry["stacktrace"], "the user's own traceback, from the executor"
    assert answer["root-exception"] == entry["stacktrace"]

    status, _ = call(f"{base}/jobs/{job}", "PATCH", token=token_of(client))
    assert status == 202
    with pytest.raises(JobCancelledError):
        client.get_job_execution_result()
    assert call(f"{base}/jobs/{job}")[1]["state"] == "CANCELED"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is installed by .ci/run (Debian's chromium)")
def test_the_dashboard_in_chromium_shows_the_graph_and_live_panels_then_the_final_state(spark, tmp_path):
    from playwright.sync_api import sync_playwright

    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    counting_job(env, tmp_path, sink)
    client = env.execute_async("dashboard")
    url = client.get_dashboard_url()
    base, job = url.split("/#/jobs/")
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             env={**os.environ, "HOME": str(tmp_path)})
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            try:
                page.goto(url)
                page.wait_for_selector("#graph g.node")
                shown = page.eval_on_selector_all("#graph g.node", "nodes => nodes.map(n => n.dataset.uid)")
                assert shown[1:] == ["numbers", "count", "sink"] and shown[0].startswith("numbers-")
                assert page.eval_on_selector_all("#graph path.edge", "edges => edges.length") == 3
                assert page.eval_on_selector_all("#graph path.edge.chained", "edges => edges.length") == 2
                assert "HASH" in page.text_content("#graph")

                # The panels follow the job: new throughput samples and new checkpoints appear.
                def number(selector, attribute):
                    return int(page.get_attribute(selector, attribute) or 0)

                def newest_checkpoint():
                    return int(page.get_attribute("#checkpoint-rows tr", "data-id") or 0)

                wait_for(lambda: number("#throughput-chart", "data-samples") >= 2, what="throughput samples")
                samples = number("#throughput-chart", "data-samples")
                newest = newest_checkpoint()
                wait_for(lambda: number("#throughput-chart", "data-samples") > samples, what="a newer sample")
                wait_for(lambda: newest_checkpoint() > newest, what="a newer checkpoint")
                assert page.text_content("#job-state") == "RUNNING"
                page.screenshot(path=str(tmp_path / "dashboard-running.png"), full_page=True)

                # Opened with the token, as the log prints the address, the page's button takes a checkpoint.
                page.goto(client.get_dashboard_url(with_token=True))
                page.wait_for_selector("#graph g.node")
                assert "token" not in page.url, "the token is taken out of the address bar"
                page.click("#trigger-checkpoint")
                wait_for(lambda: page.get_attribute("#action-result", "data-request-id"), what="the request's id")
                operation = f"{base}/jobs/{job}/checkpoints/{page.get_attribute('#action-result', 'data-request-id')}"
                wait_for(lambda: call(operation)[1]["status"]["id"] == "COMPLETED", what="the page's checkpoint")
                assert call(operation)[1]["operation"]["checkpointId"] > 0

                open(tmp_path / "end", "w").close()
                client.get_job_execution_result()
                wait_for(lambda: page.text_content("#job-state") == "FINISHED", what="the final state")
                # Opened after the end: the final state, with the exact counts.
                late = browser.new_page(viewport={"width": 1300, "height": 1000})
                late.on("pageerror", lambda error: problems.append(str(error)))
                late.goto(url)
                late.wait_for_selector("#operator-rows tr[data-uid='sink'] td.records-in")
                wait_for(lambda: late.text_content("#job-state") == "FINISHED", what="the final state, late")
                assert late.text_content("#operator-rows tr[data-uid='sink'] td.records-in") == "20.0k"
                late.screenshot(path=str(tmp_path / "dashboard-finished.png"), full_page=True)
            finally:
                open(tmp_path / "end", "w").close()
        finally:
            browser.close()
    assert problems == []
    assert os.path.getsize(tmp_path / "dashboard-running.png") > 10_000


class OnTimeThenLate(Source):
    """One subtask: ``first`` records, then holds until ``release`` exists, then ``then`` records."""

    parallel = False

    def __init__(self, first, then, release):
        self.first, self.then, self.release = first, then, release

    def create_reader(self, subtask_index, parallelism):
        return _TwoPhaseReader(self.first, self.then, self.release)


class _TwoPhaseReader(SourceReader):
    def __init__(self, first, then, release):
        self.first, self.then, self.release = first, then, release
        self.phase = 0

    def poll(self, max_records):
        if self.phase == 0:
            self.phase = 1
            return list(self.first)
        if self.phase == 1:
            if not os.path.exists(self.release):
                time.sleep(0.002)  # a source's poll that has nothing yet: not a wait for an event
                return []
            self.phase = 2
            return list(self.then)
        return None


class ReleaseOnFirstResult(WindowFunction):
    """Releases the late records once the first window fired: they are late for sure then."""

    def __init__(self, release):
        self.release = release

    def apply(self, key, window, inputs):
        open(self.release, "a").close()
        yield key, window.start, sum(record[1] for record in inputs)


def test_late_records_dropped_are_counted(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    release = str(tmp_path / "release")
    first = [("a", 1, 100), ("a", 2, 900), ("b", 5, 1_500), ("a", 0, 5_000)]  # the watermark goes to 4999
    then = [("a", 10, 500), ("b", 20, 1_200), ("a", 30, 2_500)]  # the first two are late: no side output, dropped
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(10)
    event_time = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[2])
    (env.from_source(OnTimeThenLate(first, then, release), event_time, "events")
     .key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(1_000)).allowed_lateness(3_000)
     .apply(ReleaseOnFirstResult(release)).uid("windows")
     .sink_to(CollectSink("results")))
    client = env.execute_async("late-records")
    client.get_job_execution_result()
    base, job = client.get_dashboard_url().split("/#/jobs/")
    windows = call(f"{base}/jobs/{job}/vertices/windows")[1]
    assert windows["metrics"]["late-records-dropped"] == 2
    assert windows["metrics"]["current-input-watermark"] is None, "the end of input's watermark is no time to show"
