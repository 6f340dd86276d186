"""Nobody but the job's own processes gets in: an outsider's attack on every port a running job opens runs no
code anywhere, and the job neither fails nor restarts nor loses a record. The driver's REST API, the jobs' control
plane, answers ``chandy savepoint`` / ``stop`` only with the token of ``_job.json``: for every request when the
dashboard is off, in HTTPS with the pinned certificate when the job encrypts.

(The same attack in TLS, on separate executor JVMs: tests/integration/test_deployment.py; TLS through real
failures: tests/integration/test_exactly_once.py.)"""

import logging
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from benchmarks.security import junk_burst
from operators import CollectSink, SequenceSource
from runtime import RestartStrategies, StreamExecutionEnvironment
from runtime.configuration import Configuration
from runtime.driver import web
from runtime.driver.web.server import DashboardServer
from runtime.network.tls import job_certificate
from state_backends.storage import CheckpointStorage
from tests.integration.attack import attack, listening_ports
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import FileExists, PacedSource
from tests.integration.waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 20_000
KEYS = 50


def paced_counting_job(env, tmp_path, sink):
    """numbers -> key_by -> running count -> sink at parallelism 2, running until tmp_path/end exists."""
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    source = PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 8,
                         end_when=FileExists(str(tmp_path / "end")), together=str(tmp_path / "paced"))
    env.from_source(source, "numbers").uid("numbers").key_by(lambda x: x % KEYS).process(CountPerKey()) \
        .uid("count").sink_to(sink).uid("sink")


def test_an_outsiders_pickles_run_nowhere_and_the_job_ends_exact_without_a_restart(spark, tmp_path, caplog):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    paced_counting_job(env, tmp_path, sink)
    marker = tmp_path / "code-ran"
    caplog.set_level(logging.WARNING, logger="runtime.network.acceptor")
    client = env.execute_async("attacked")
    master = client._run
    try:
        wait_for(lambda: master.coordinator.completed_checkpoints(), what="a completed checkpoint")
        registrations = list(master.control.registrations.values())
        assert len(registrations) == 2
        # As an outsider would: every TCP port the driver and the job's Python workers listen on.
        ports = listening_ports([os.getpid()] + [r.pid for r in registrations])
        # The driver's REST server is the job's control plane (and it runs on 127.0.0.1 too).
        ours = {master.control.address, *master.web_server.addresses} | {(r.host, r.port) for r in registrations}
        assert ours <= ports, f"the listing misses some of the job's ports: {ours - ports}"
        closed = attack(ports, str(marker), ours)
        assert all(closed[port] for port in ours), f"a port kept an attacker's connection open: {closed}"
        # 1,000 junk connections in a burst, to the control server and both data servers.
        junk_burst(sorted((r.host, r.port) for r in registrations) + [master.control.address], 1000)
        assert master.status.name == "RUNNING"
    finally:
        open(tmp_path / "end", "w").close()
    result = client.get_job_execution_result()
    assert not marker.exists(), "an outsider's pickle was unpickled"
    assert result.restarts == 0
    assert final_counts(result.collected(sink)) == {k: N // KEYS for k in range(KEYS)}
    refused = [r.getMessage() for r in caplog.records if r.name == "runtime.network.acceptor"]
    assert any(m.startswith("Refused a connection to the control server of attempt 0 from ") for m in refused)
    assert len(refused) < 20, "refusals are summed up, not logged one by one"


@pytest.fixture
def own_web_server(monkeypatch):
    """The test's own REST server: the session's (started by an earlier test's job, with that job's settings) is
    set aside, the one this test's job starts is closed at the end."""
    monkeypatch.setattr(web, "_server", None)
    yield
    if web._server is not None:
        web._server.close()


def chandy(*arguments, cwd=ROOT):
    """The chandy command, in a process of its own as a user runs it."""
    return subprocess.run([sys.executable, "-m", "runtime.tools.cli", *arguments], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))


def status_of(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def copy_of_job_json(storage, tmp_path, **changes):
    """A job directory whose _job.json is the job's with ``changes``."""
    copy = CheckpointStorage("file://" + str(tmp_path / "copies"), storage.job_name)
    copy.publish_job_control({**storage.read_job_control(), **changes})
    return copy.job_dir


def stop_by_cli(client, storage, tmp_path):
    out = chandy("stop", storage.job_dir, "--drain", "--path", str(tmp_path / "savepoints"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(f"file://{tmp_path}/savepoints/savepoint-")
    client.get_job_execution_result(timeout=300)
    assert client.get_job_status().name == "FINISHED"
    assert not os.path.exists(os.path.join(storage.job_dir, "_job.json")), "removed when the job ended"


def test_without_the_dashboard_the_rest_api_controls_a_checkpointed_job_with_the_token_for_every_request(
        spark, tmp_path, own_web_server):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    paced_counting_job(env, tmp_path, CollectSink("counts"))
    spark.conf.set("spark.chandy.ui.enabled", "false")
    try:
        client = env.execute_async("no-dashboard")
    finally:
        spark.conf.unset("spark.chandy.ui.enabled")
    master, server = client._run, web._server
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "no-dashboard")
    try:
        published = storage.read_job_control()
        assert published == {"job_id": master.job_id, "job_name": "no-dashboard", "url": server.url,
                             "token": server.guard.token}
        assert os.stat(os.path.join(storage.job_dir, "_job.json")).st_mode & 0o777 == 0o600
        assert not server.serves_dashboard and client.get_dashboard_url() is None
        for path in ("/", "/jobs", f"/jobs/{master.job_id}", f"/jobs/{master.job_id}/checkpoints", "/metrics"):
            assert status_of(server.url + path) == 401, f"a read of {path} without the token"
        assert status_of(server.url + f"/jobs/{master.job_id}", server.guard.token) == 200
        wait_for(lambda: master.coordinator.completed_checkpoints(), what="a completed checkpoint")
        out = chandy("savepoint", storage.job_dir)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().startswith(storage.default_savepoint_url() + "/savepoint-")
        refused = chandy("savepoint", copy_of_job_json(storage, tmp_path, token="not-the-token"))
        assert refused.returncode == 2 and "refused the token of job 'no-dashboard'" in refused.stderr
        stop_by_cli(client, storage, tmp_path)
    finally:
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()


def test_a_job_that_encrypts_is_controlled_over_https_with_the_certificate_pinned_from_job_json(
        spark, tmp_path, own_web_server):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    env.configure(Configuration().set_boolean("security.ssl.internal.enabled", True))
    paced_counting_job(env, tmp_path, CollectSink("counts"))
    client = env.execute_async("encrypted")
    master, server = client._run, web._server
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "encrypted")
    try:
        published = storage.read_job_control()
        assert published["url"] == server.url and server.url.startswith("https://")
        assert published["certificate"] == server.certificate and published["token"] == server.guard.token
        assert server.certificate != master.tls.certificate, "the server has a certificate of its own"
        with pytest.raises(OSError):  # urllib's URLError too: plain HTTP gets no answer from an HTTPS server
            urllib.request.urlopen(server.url.replace("https://", "http://") + "/jobs", timeout=30)
        wait_for(lambda: master.coordinator.completed_checkpoints(), what="a completed checkpoint")
        out = chandy("savepoint", storage.job_dir)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().startswith(storage.default_savepoint_url() + "/savepoint-")
        impostor = chandy("savepoint", copy_of_job_json(storage, tmp_path,
                                                        certificate=job_certificate("another").certificate))
        assert impostor.returncode == 2, impostor.stdout
        assert "does not present the certificate this client trusts (the certificate in _job.json)" in impostor.stderr
        stop_by_cli(client, storage, tmp_path)
    finally:
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()


def test_a_job_that_encrypts_on_a_plain_http_server_publishes_no_token(spark, tmp_path, own_web_server, caplog):
    web._server = DashboardServer("127.0.0.1", 0)  # an earlier job of this driver process started it, in HTTP
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    env.configure(Configuration().set_boolean("security.ssl.internal.enabled", True))
    paced_counting_job(env, tmp_path, CollectSink("counts"))
    caplog.set_level(logging.WARNING, logger="runtime.driver.job")
    client = env.execute_async("encrypted-on-http")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "encrypted-on-http")
    try:
        published = storage.read_job_control()
        assert "token" not in published and "certificate" not in published
        assert published["url"] == web._server.url and "plain HTTP" in published["unencrypted"]
        assert "its token is not published in _job.json" in caplog.text
        out = chandy("savepoint", storage.job_dir)
        assert out.returncode == 2
        assert "is not encrypted as the job asks" in out.stderr and "Use the REST API directly" in out.stderr
    finally:
        client.cancel()
    assert not os.path.exists(os.path.join(storage.job_dir, "_job.json"))
