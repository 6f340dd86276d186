"""The driver's web server without a job: port fallback, JSON errors, the files of the dashboard, /metrics and
the OpenAPI description (the integration tests run it with real jobs)."""

import json
import logging
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.driver.web.access import AccessGuard
from runtime.driver.web.openapi import PATHS
from runtime.driver.web.server import DashboardServer


@pytest.fixture
def server():
    server = DashboardServer("127.0.0.1", 0)
    yield server
    server.close()


def get(url, method="GET", content_type="application/json"):
    action = method != "GET"
    request = urllib.request.Request(url, method=method, data=b"{}" if action else None,
                                     headers={"Content-Type": content_type} if action else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


def test_a_taken_port_falls_back_to_the_next_free_one_and_says_which(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="runtime.driver.web.server"):
            server = DashboardServer("127.0.0.1", port)
        try:
            assert server.port != port and port < server.port < port + 100
            assert f"Port {port} is taken" in caplog.text and f"port {server.port} instead" in caplog.text
            assert get(server.url + "/jobs")[0] == 200
        finally:
            server.close()


def test_unknown_jobs_and_paths_answer_404_with_a_json_error(server):
    status, kind, body = get(server.url + "/jobs/0123abcd")
    assert status == 404 and kind.startswith("application/json")
    assert "No job with id '0123abcd'" in json.loads(body)["errors"][0]
    status, kind, body = get(server.url + "/no/such/thing")
    assert status == 404 and kind.startswith("application/json") and "openapi.json" in json.loads(body)["errors"][0]
    status, _, body = get(server.url + "/jobs/0123abcd", "PATCH")
    assert status == 404, body


def test_actions_need_a_json_content_type_that_another_sites_page_cannot_send_unasked(server):
    status, _, body = get(server.url + "/jobs/0123abcd/stop", "POST", content_type="text/plain")
    assert status == 415 and "Content-Type: application/json" in json.loads(body)["errors"][0]


def test_the_dashboard_is_served_from_the_package_with_its_chart_library(server):
    status, kind, page = get(server.url + "/")
    assert status == 200 and kind.startswith("text/html")
    for script in (b"/static/vendor/uPlot.iife.min.js", b"/static/dashboard.js"):
        assert script in page
        assert get(server.url + script.decode())[0] == 200
    assert b"https://" not in page, "no CDN: the page works offline"


def test_metrics_parse_with_the_prometheus_parser(server):
    status, kind, text = get(server.url + "/metrics")
    assert status == 200 and kind.startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(text.decode())}
    assert {"chandy_records_in", "chandy_backpressure_ratio", "chandy_checkpoint_alignment_ms"} <= names


def test_openapi_describes_every_route_the_server_answers(server):
    status, _, body = get(server.url + "/openapi.json")
    document = json.loads(body)
    assert status == 200 and document["openapi"].startswith("3.")
    served = set()
    for resource in server._runner.app.router.resources():
        path = resource.canonical
        if path not in ("/", "/static"):
            served.add(path)
    assert served == set(PATHS)


class _Stdout:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("tty, conf, wanted", [(True, {}, True), (False, {}, False),
                                               (True, {"spark.chandy.progress": "false"}, False)])
def test_the_status_line_shows_only_on_a_terminal_and_not_when_turned_off(monkeypatch, tty, conf, wanted):
    from runtime.datastream import stream_execution_environment as module

    from runtime.settings import resolve

    monkeypatch.setattr(module.sys, "stdout", _Stdout(tty))
    assert module._progress_wanted(resolve({}, conf)) is wanted


def test_the_status_line_is_cleared_before_a_log_line_and_stays_at_the_end():
    import io

    from runtime.driver.progress import ProgressLine, active_line
    from runtime.driver.terminal import _ClearingHandler

    class Job:
        job_name, restarts, started_ms, coordinator = "demo", 0, None, None
        status = type("Status", (), {"name": "RUNNING"})()

        class metrics:
            @staticmethod
            def operators():
                return []

            @staticmethod
            def throughput():
                return 10.0, 9.0

    stream = io.StringIO()
    line = ProgressLine(Job(), stream, interval=3600)
    line.start()
    try:
        assert active_line() is line
        line.draw("demo RUNNING")
        log_stream = io.StringIO()
        _ClearingHandler(log_stream).emit(logging.makeLogRecord({"msg": "a log line", "levelno": logging.INFO}))
        assert log_stream.getvalue() == "a log line\n"
        line.clear()  # cleared by the log line already: nothing to clear the second time
    finally:
        line.close()
    assert active_line() is None
    assert stream.getvalue() == ("\r\x1b[Kdemo RUNNING" "\r\x1b[K"
                                 "\r\x1b[Kdemo RUNNING 0:00:00 | in 10/s out 9/s | restarts 0\n")


def _ask(url, method="GET", token=None, how="bearer"):
    headers = {"Content-Type": "application/json"}
    if token is not None and how == "bearer":
        headers["Authorization"] = f"Bearer {token}"
    elif token is not None:
        url += ("&" if "?" in url else "?") + f"token={token}"
    request = urllib.request.Request(url, method=method, data=b"{}" if method != "GET" else None, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_actions_need_the_token_reads_do_not():
    server = DashboardServer("127.0.0.1", 0, guard=AccessGuard("t0ken", actions=True, reads=False))
    try:
        action = server.url + "/jobs/0123abcd/checkpoints"
        status, headers, body = _ask(action, "POST")
        assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Bearer")
        assert "needs the dashboard's token" in json.loads(body)["errors"][0]
        status, _, body = _ask(action, "POST", token="wrong")
        assert status == 403 and "does not match" in json.loads(body)["errors"][0]
        assert _ask(action, "POST", token="t0ken")[0] == 404, "with the token, the request reaches its route"
        assert _ask(action, "POST", token="t0ken", how="query")[0] == 404
        assert _ask(server.url + "/jobs")[0] == 200
        assert server.url_with_token == f"{server.url}/?token=t0ken"
    finally:
        server.close()


def test_with_require_token_reads_need_it_too_but_not_the_page_itself():
    server = DashboardServer("127.0.0.1", 0, token="t0ken", require_token=True)
    try:
        assert _ask(server.url + "/jobs")[0] == 401
        assert _ask(server.url + "/metrics")[0] == 401
        assert _ask(server.url + "/metrics", token="t0ken")[0] == 200
        assert _ask(server.url + "/")[0] == 200 and _ask(server.url + "/static/dashboard.js")[0] == 200
        assert server.url_with_token.endswith("/?token=<spark.chandy.ui.token>"), "a chosen token is not printed"
    finally:
        server.close()


def test_actions_need_the_token_unless_the_server_listens_on_loopback_alone():
    assert not AccessGuard.for_server(["127.0.0.1"], None, False).actions
    assert not AccessGuard.for_server(["localhost"], None, False).needed
    assert AccessGuard.for_server(["192.0.2.7", "127.0.0.1"], None, False).actions
    assert AccessGuard.for_server(["0.0.0.0"], None, False).actions
    guard = AccessGuard.for_server(["127.0.0.1"], None, True)
    assert guard.reads and guard.actions and len(guard.token) >= 32
