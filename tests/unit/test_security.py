"""Who gets in: the handshake every internal connection opens with, the acceptor that refuses and logs, TLS with a
job's own certificate, the driver's REST API as the jobs' control plane (found through ``_job.json``), and the
settings that turn encryption on."""

import contextlib
import datetime
import io
import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from runtime.driver.result import JobStatus
from runtime.driver.security_settings import resolve_encryption
from runtime.driver.web.server import MAX_BODY_BYTES, DashboardServer
from runtime.settings import resolve
from runtime.errors import AuthenticationError, ConfigurationError, JobControlError, ProtocolError, QueryableStateError
from runtime.network import acceptor as acceptor_module
from runtime.network.acceptor import Acceptor
from runtime.network.auth import ANSWER_BYTES, CHALLENGE_BYTES, connect_peer
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsMaterial, job_certificate, material_from_files
from runtime.protocol.messages import Cancel
from runtime.protocol.wire import MessageSocket
from runtime.tools import rest_commands
from runtime.tools.cli import main as chandy
from state_backends.storage import CheckpointStorage
from tests.integration.waiting import wait_for
from tests.unit.conftest import tls_security


class Server:
    """An acceptor whose handler records what each authenticated connection sent first."""

    def __init__(self, security, service="data"):
        self.heard = []
        self.served = threading.Event()
        self.acceptor = Acceptor("127.0.0.1", self._handle, "test-acceptor", security, service, "the test server")
        self.acceptor.start()
        self.address = self.acceptor.address

    def _handle(self, stream, peer):
        self.heard.append(stream.recv(5))
        self.served.set()
        stream.close()

    def assert_serves(self, security):
        """A connection with ``security`` reaches the handler, which hears what it sent."""
        stream = security.connect(self.address, "data", timeout_s=30)
        stream.sendall(b"hello")
        assert self.served.wait(30) and self.heard[-1] == b"hello"
        stream.close()

    def close(self):
        self.acceptor.close()
        assert self.acceptor.join(30)


def refused_connection(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=30)
    assert sock.recv(CHALLENGE_BYTES)  # the challenge: nothing else is said before the peer proves itself
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_peer_with_the_secret_is_served_and_others_are_refused_before_a_byte_is_read(connection_security, caplog):
    server = Server(connection_security)
    try:
        server.assert_serves(connection_security)
        caplog.set_level(logging.WARNING, logger="runtime.network.acceptor")
        other_attempt = ConnectionSecurity.new(connection_security.tls)  # same certificate, another attempt's secret
        with pytest.raises(AuthenticationError, match="belongs to another job or attempt"):
            other_attempt.connect(server.address, "data", timeout_s=30)
        with pytest.raises(AuthenticationError):
            connection_security.connect(server.address, "control", timeout_s=30)  # right secret, wrong service
        assert server.heard == [b"hello"], "no refused connection reached the handler"
        assert server.acceptor.refusals.total == 2
        (first,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Refused a connection")]
        assert "the test server from 127.0.0.1:" in first and "Traceback" not in caplog.text
    finally:
        server.close()


def test_a_replayed_answer_is_refused_since_each_challenge_is_new():
    security = ConnectionSecurity.new()
    server = Server(security)
    try:
        sock = socket.create_connection(server.address, timeout=30)
        recorded = []

        class Recorder:
            def __getattr__(self, name):
                return getattr(sock, name)

            def sendall(self, data):
                recorded.append(bytes(data))
                sock.sendall(data)

        connect_peer(Recorder(), security.secret, "data", 30)
        sock.close()
        assert server.served.wait(30) and server.heard == [b""], "the genuine connection was served (and said nothing)"
        (answer,) = recorded
        assert len(answer) == ANSWER_BYTES
        replay = refused_connection(server.address)
        replay.sendall(answer + b"hello")
        assert closed_by_peer(replay)
        replay.close()
        assert server.heard == [b""] and server.acceptor.refusals.total == 1
    finally:
        server.close()


def test_a_stalled_half_handshake_times_out_and_holds_nothing():
    security = ConnectionSecurity(ConnectionSecurity.new().secret, handshake_timeout_s=0.5)
    server = Server(security)
    try:
        stalled = [refused_connection(server.address) for _ in range(20)]
        for sock in stalled:
            sock.sendall(b"CHDYAUTH")  # a third of an answer, then nothing
        # Connections proving themselves hold no thread: one thread accepts and drives every handshake.
        assert [t.name for t in threading.enumerate() if t.name.startswith("test-acceptor")] == \
            ["test-acceptor-accept"]
        for sock in stalled:
            assert closed_by_peer(sock), "the server gave up on it"
            sock.close()
        assert server.acceptor.refusals.total == 20 and server.heard == []
        assert not server.acceptor._proving
    finally:
        server.close()


def test_connections_beyond_the_pending_limit_are_refused_at_once(monkeypatch):
    monkeypatch.setattr(acceptor_module, "MAX_PENDING_HANDSHAKES", 2)
    server = Server(ConnectionSecurity.new())
    held = []
    try:
        held = [refused_connection(server.address) for _ in range(2)]  # both wait in their handshakes
        flood = socket.create_connection(server.address, timeout=30)
        assert closed_by_peer(flood), "a third pending handshake is refused without a challenge"
        flood.close()
        assert server.acceptor.refusals.total == 1
    finally:
        for sock in held:
            sock.close()
        server.close()


def test_refusals_are_logged_once_then_summed_up(caplog):
    now = [0.0]
    log = acceptor_module.RefusalLog("the control server", interval_s=10, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="runtime.network.acceptor")
    for i in range(1000):
        now[0] = i * 0.001
        log.refused(f"10.0.0.{i % 7}:{4000 + i}", "the peer does not speak Chandy's handshake")
    log.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("Refused a connection to the control server from 10.0.0.0:4000")
    assert lines[1].startswith("Refused 999 more connections to the control server (from 10.0.0.1:4001")
    assert log.total == 1000


def test_tls_refuses_a_peer_with_another_jobs_certificate_or_none():
    ours = tls_security()
    server = Server(ours)
    try:
        strangers = ConnectionSecurity(ours.secret, job_certificate("another job"))  # even knowing the secret
        with pytest.raises(AuthenticationError, match="no TLS handshake"):
            strangers.connect(server.address, "data", timeout_s=30)
        no_certificate = ConnectionSecurity(ours.secret, TlsMaterial(None, None, ours.tls.trusted))
        with pytest.raises(AuthenticationError):
            no_certificate.connect(server.address, "data", timeout_s=30)
        plain = ConnectionSecurity(ours.secret, handshake_timeout_s=1)  # waits for a challenge that never comes
        with pytest.raises(AuthenticationError, match="in time"):
            plain.connect(server.address, "data", timeout_s=30)
        wait_for(lambda: server.acceptor.refusals.total == 3, 30, "the server to see the plain client leave")
        assert server.heard == []
        server.assert_serves(ours)
    finally:
        server.close()


def test_control_frames_from_an_authenticated_peer_are_bounded_and_must_be_messages():
    a, b = socket.socketpair()
    sender, receiver = MessageSocket(a, "the driver"), MessageSocket(b, "slot 1 at 10.0.0.5:4100")
    try:
        sender.send(Cancel(0, "test"))
        assert receiver.receive() == Cancel(0, "test")
        a.sendall(b"\x00\x00\x00\x05junk!")
        with pytest.raises(ProtocolError, match="slot 1 at 10.0.0.5:4100 sent a control frame that is no message"):
            receiver.receive()
        import pickle
        import struct
        payload = pickle.dumps({"not": "a message"})
        a.sendall(struct.pack(">I", len(payload)) + payload)
        with pytest.raises(ProtocolError, match="sent a dict where a control message belongs"):
            receiver.receive()
    finally:
        sender.close()
        receiver.close()


def test_control_frames_that_arrived_together_are_read_with_one_call_into_the_socket():
    """Each recv lets go of the GIL, and a worker's control thread waits for a computing subtask's switch interval
    to take it back: frames that have arrived are read at once, a large one in as many pieces as it needs."""

    class Counted:
        def __init__(self, sock):
            self.sock, self.calls = sock, 0

        def recv(self, size):
            self.calls += 1
            return self.sock.recv(size)

        def sendall(self, data):
            self.sock.sendall(data)

        def shutdown(self, how):
            self.sock.shutdown(how)

        def close(self):
            self.sock.close()

    a, b = socket.socketpair()
    counted = Counted(b)
    sender, receiver = MessageSocket(a, "the driver"), MessageSocket(counted, "slot 0")
    try:
        messages = [Cancel(0, "first"), Cancel(1, "second"), Cancel(2, "third")]
        for message in messages:
            sender.send(message)
        assert [receiver.receive() for _ in messages] == messages and counted.calls == 1
        # Larger than one read, and than the socket holds: each send blocks part-way, from two threads at once.
        large = [Cancel(attempt, str(attempt) * 300_000) for attempt in range(3, 9)]
        writers = [threading.Thread(target=lambda part: [sender.send(m) for m in part], args=(large[i::2],))
                   for i in range(2)]
        for writer in writers:
            writer.start()
        received = [receiver.receive() for _ in large]
        assert sorted(received, key=lambda m: m.attempt) == large  # each whole, none interleaved with another
        for writer in writers:
            writer.join(60)
    finally:
        sender.close()
        receiver.close()


def test_the_handshake_reads_no_more_than_its_fixed_sizes():
    a, b = socket.socketpair()
    try:
        b.sendall(b"x" * 10_000)  # not an answer: refused after reading ANSWER_BYTES, whatever follows
        with pytest.raises(AuthenticationError, match="does not speak Chandy's handshake"):
            ConnectionSecurity.new().accept(a, "data")
        assert len(b.recv(1000)) == CHALLENGE_BYTES
        assert len(a.recv(20_000)) == 10_000 - ANSWER_BYTES, "the rest was never read"
    finally:
        a.close()
        b.close()


class _Master:
    """What the REST server asks of a job: its name and state, and the savepoints it is asked for."""

    status = JobStatus.RUNNING
    ended = False
    coordinator = object()  # it checkpoints

    def __init__(self, job_id="ab12cd34ef56", job_name="orders"):
        self.job_id, self.job_name = job_id, job_name
        self.asked = []
        self.stopping = threading.Event()  # a stop returns once this is set (once "the job has ended")

    def trigger_savepoint(self, path=None):
        self.asked.append(("savepoint", path))
        return f"file://{path}/savepoint-1"

    def stop_with_savepoint(self, path=None, drain=False):
        self.asked.append(("stop", path, drain))
        assert self.stopping.wait(30)
        return f"file://{path}/savepoint-2"


def _control_plane(tmp_path, tls=None, dashboard=False, master=None):
    """A REST server serving ``master`` and the job directory whose _job.json points at it."""
    master = master or _Master()
    server = DashboardServer("127.0.0.1", 0, tls=tls, dashboard=dashboard)
    server.register(master)
    storage = CheckpointStorage(str(tmp_path / "ck"), master.job_name)
    storage.publish_job_control(server.describe_for(master))
    return server, master, storage


def test_a_lookup_of_queryable_state_over_https_trusts_the_pinned_certificate_and_keeps_its_connection(tmp_path):
    from runtime.driver.queryable_state import QueryableStateRouter
    from runtime.protocol.messages import QueryableStateRegistered, StateAnswer
    from runtime.tools.queryable_state import QueryableStateClient

    master = _Master()
    master.queryable_state = router = QueryableStateRouter({"count": 1}, 128)
    router.attach(0, lambda slot, query: threading.Thread(target=router.on_message, args=(
        StateAnswer(0, query.request, value_json=json.dumps(query.key * 10)),)).start())
    router.on_message(QueryableStateRegistered(0, 0, "count", "count", "counts", "value"))
    server, _, storage = _control_plane(tmp_path, tls_security().tls, master=master)
    try:
        client = QueryableStateClient.for_job_directory(storage.job_dir)
        assert client.base.startswith("https://") and client.context is not None
        assert [client.get("counts", key) for key in (1, 2)] == [10, 20]
        assert client._threads.connection.sock.version().startswith("TLS"), "the kept connection is TLS"
        stranger = QueryableStateClient(f"{server.url}/#/jobs/{master.job_id}", client.token)
        with pytest.raises(QueryableStateError, match="does not present the certificate this client trusts"):
            stranger.get("counts", 1)  # no pinned certificate: the job's own, self-signed, is not trusted
    finally:
        server.close()


def _republished(storage, **changes):
    """The job directory's _job.json with ``changes``."""
    published = storage.read_job_control()
    published.update(changes)
    storage.publish_job_control(published)


@pytest.mark.parametrize("encrypted", [False, True], ids=["http", "https"])
def test_chandy_savepoint_and_stop_reach_the_job_through_job_json_with_its_token_and_pinned_certificate(
        tmp_path, monkeypatch, encrypted):
    material = tls_security().tls if encrypted else None
    server, master, storage = _control_plane(tmp_path, material)
    try:
        published = storage.read_job_control()
        assert set(published) == {"job_id", "job_name", "url", "token"} | ({"certificate"} if encrypted else set())
        assert published["url"] == server.url and server.url.startswith("https://" if encrypted else "http://")
        assert published["token"] == server.guard.token
        assert os.stat(os.path.join(storage.job_dir, "_job.json")).st_mode & 0o777 == 0o600, "owner-only"
        monkeypatch.chdir(tmp_path)
        assert rest_commands.savepoint(storage.job_dir, "sp") == f"file://{tmp_path}/sp/savepoint-1"
        assert master.asked == [("savepoint", str(tmp_path / "sp"))], "a relative path is made absolute first"
        master.stopping.set()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert chandy(["stop", storage.job_dir, "--path", "/sp", "--drain"]) == 0
        assert out.getvalue().strip() == "file:///sp/savepoint-2" and master.asked[-1] == ("stop", "/sp", True)

        _republished(storage, token="0" * 32)
        with pytest.raises(JobControlError, match="refused the token of job 'orders' \\(ab12cd34\\) from _job.json.*403"):
            rest_commands.savepoint(storage.job_dir)
        if encrypted:
            _republished(storage, token=server.guard.token,
                         certificate=job_certificate("another job").certificate)
            with pytest.raises(JobControlError, match="does not present the certificate this client trusts "
                                                      "\\(the certificate in _job.json\\)"):
                rest_commands.savepoint(storage.job_dir)
            with pytest.raises((urllib.error.URLError, OSError)):  # no plain HTTP on an HTTPS server
                urllib.request.urlopen(server.url.replace("https://", "http://") + "/jobs", timeout=30)
        assert len(master.asked) == 2, "no refused request reached the job"
    finally:
        server.close()


def test_without_the_dashboard_every_request_needs_the_token_and_bodies_are_bounded(tmp_path):
    server, master, storage = _control_plane(tmp_path, dashboard=False)
    token = server.guard.token
    try:
        for path in ("/", "/static/dashboard.js", "/jobs", "/metrics", f"/jobs/{master.job_id}"):
            assert _status(server.url + path) == 401, path
        assert _status(server.url + "/jobs", token=token) == 200
        assert _status(server.url + "/", token=token) == 404, "no page is served"
        too_large = json.dumps({"target-directory": "x" * MAX_BODY_BYTES}).encode()
        assert _status(server.url + f"/jobs/{master.job_id}/savepoints", "POST", too_large, token) == 413
        assert _status(server.url + f"/jobs/{master.job_id}/savepoints", "POST", too_large) == 401
        assert master.asked == [], "no body was acted on"
        assert rest_commands.savepoint(storage.job_dir, "/sp") == "file:///sp/savepoint-1"
    finally:
        server.close()


def test_a_job_without_the_dashboard_on_a_server_with_it_is_seen_only_with_the_token(tmp_path):
    server = DashboardServer("127.0.0.1", 0)
    public, private = _Master("aaaa1111", "public"), _Master("bbbb2222", "private")
    server.register(public)
    server.register(private, private=True)
    token = server.guard.token
    try:
        listed = json.loads(urllib.request.urlopen(server.url + "/jobs", timeout=30).read())["jobs"]
        assert [j["id"] for j in listed] == ["aaaa1111"]
        request = urllib.request.Request(server.url + "/jobs", headers={"Authorization": f"Bearer {token}"})
        listed = json.loads(urllib.request.urlopen(request, timeout=30).read())["jobs"]
        assert [j["id"] for j in listed] == ["aaaa1111", "bbbb2222"]
        assert _status(server.url + "/jobs/bbbb2222/savepoints/0") == 401
        assert _status(server.url + "/jobs/bbbb2222/savepoints", "POST", b"{}") == 401, "even on loopback alone"
        assert _status(server.url + "/jobs/bbbb2222/savepoints/0", token=token) == 404, "with it: found, no such id"
        assert _status(server.url + "/jobs/aaaa1111/savepoints/0") == 404
        assert _status(server.url + "/") == 200, "the page itself stays open"
        assert private.asked == []
    finally:
        server.close()


def test_published_job_json_says_why_the_cli_cannot_act(tmp_path):
    storage = CheckpointStorage(str(tmp_path / "ck"), "orders")
    with pytest.raises(JobControlError, match="No job of .* is running with checkpointing"):
        rest_commands.savepoint(storage.job_dir)
    storage.publish_job_control({"job_id": "ab12cd34", "job_name": "orders", "url": "http://127.0.0.1:9",
                                 "unencrypted": "the job encrypts its connections, but ... plain HTTP"})
    with pytest.raises(JobControlError, match="control endpoint http://127.0.0.1:9 is not encrypted as the job asks "
                                              ".*Use the REST API directly"):
        rest_commands.stop(storage.job_dir)
    storage.publish_job_control({"job_id": "ab12cd34", "job_name": "orders", "url": "http://127.0.0.1:9",
                                 "token": "t"})
    with pytest.raises(JobControlError, match="No Chandy dashboard answers at http://127.0.0.1:9"):
        rest_commands.savepoint(storage.job_dir)


def test_an_exiting_driver_waits_until_the_stop_it_was_asked_for_is_collected(tmp_path):
    server, master, _ = _control_plane(tmp_path)
    token = server.guard.token
    try:
        answer = urllib.request.urlopen(urllib.request.Request(
            server.url + f"/jobs/{master.job_id}/stop", method="POST", data=b'{"targetDirectory": "/sp"}',
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}), timeout=30)
        trigger = json.loads(answer.read())["request-id"]
        master.stopping.set()  # the job ends, and with it the program: the process exits
        exiting = threading.Thread(target=server.wait_for_collection, args=(60,))
        exiting.start()
        exiting.join(1.0)
        assert exiting.is_alive(), "the exit waits: nobody has heard where the savepoint is"
        request = urllib.request.Request(server.url + f"/jobs/{master.job_id}/savepoints/{trigger}",
                                         headers={"Authorization": f"Bearer {token}"})
        assert json.loads(urllib.request.urlopen(request, timeout=30).read())["operation"] == {
            "location": "file:///sp/savepoint-2"}
        exiting.join(30)
        assert not exiting.is_alive(), "once the client has it, the exit goes on"
        started = time.monotonic()
        server.wait_for_collection(30)
        assert time.monotonic() - started < 1, "nothing left to collect: no wait"
    finally:
        server.close()


def _status(url, method="GET", body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def encryption(spark_conf, flink_setting=None):
    """The encryption a job decides on with this Spark conf and Flink's security.ssl.internal.enabled."""
    job = {} if flink_setting is None else {"security.ssl.internal.enabled": str(flink_setting).lower()}
    return resolve_encryption(resolve(job, spark_conf))


def test_encryption_follows_our_key_then_flinks_then_sparks():
    conf = {"spark.network.crypto.enabled": "true"}
    assert encryption(conf).encrypt
    assert not encryption({**conf, "spark.chandy.network.encryption": "false"}).encrypt
    assert "authenticated but not encrypted" in encryption({**conf, "spark.chandy.network.encryption": "off"}).reason
    assert encryption({"spark.ssl.enabled": "TRUE"}).encrypt
    assert encryption({}, True).encrypt and not encryption(conf, False).encrypt
    assert not encryption({"spark.chandy.network.encryption": "no"}, True).encrypt, "our key wins over Flink's"
    settings = encryption({})
    assert not settings.encrypt and not settings.asked and settings.material("job") is None
    with pytest.raises(ConfigurationError, match="spark.chandy.network.encryption = 'maybe' is not a boolean"):
        encryption({"spark.chandy.network.encryption": "maybe"})
    with pytest.raises(ConfigurationError, match="spark.chandy.network.tls.privateKey is not"):
        encryption({"spark.chandy.network.tls.certificate": "/x.pem"})


def _write_pem_files(tmp_path, encrypted_key=False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "our cluster")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    protection = (serialization.BestAvailableEncryption(b"pass") if encrypted_key
                  else serialization.NoEncryption())
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8, protection))
    return str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")


def test_the_users_own_pem_files_make_the_tls_material(tmp_path):
    certificate, key = _write_pem_files(tmp_path)
    conf = {"spark.chandy.network.encryption": "true", "spark.chandy.network.tls.certificate": certificate,
            "spark.chandy.network.tls.privateKey": key}
    material = encryption(conf).material("job")
    security = ConnectionSecurity.new(material)
    server = Server(security)
    try:
        server.assert_serves(security)
    finally:
        server.close()
    keys = ("spark.chandy.network.tls.certificate", "spark.chandy.network.tls.privateKey",
            "spark.chandy.network.tls.trustedCertificates")
    with pytest.raises(ConfigurationError, match="cannot be read"):
        material_from_files(certificate, str(tmp_path / "missing.pem"), None, keys)
    (tmp_path / "other").mkdir()
    certificate, key = _write_pem_files(tmp_path / "other", encrypted_key=True)
    with pytest.raises(ConfigurationError, match="encrypted with a passphrase"):
        material_from_files(certificate, key, None, keys)


def test_a_data_header_naming_a_channel_the_slot_lacks_is_a_protocol_error_naming_the_peer():
    from operators import CollectSink
    from runtime import StreamExecutionEnvironment
    from runtime.executor.slot import SlotRunner
    from runtime.ids import Attempt, SlotIndex

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.from_sequence(0, 10).key_by(lambda x: x % 3).reduce(max).sink_to(CollectSink("out"))
    graph = env.get_job_graph("routes")
    slot = SlotRunner(graph, ("127.0.0.1", 1), Attempt(0), SlotIndex(1), "127.0.0.1", ConnectionSecurity.new())
    slot._build_runners()
    peer = "10.0.0.5:4100"
    gate, index, codec = slot._route(0, 0, 1, peer)
    assert gate is slot.gates[graph.edges[0].target_chain] and codec is not None
    with pytest.raises(ProtocolError, match="from 10.0.0.5:4100 names edge 7, but the job has edges 0..0"):
        slot._route(7, 0, 1, peer)
    with pytest.raises(ProtocolError, match="is for subtask 0, but arrived at slot 1"):
        slot._route(0, 0, 0, peer)
    with pytest.raises(ProtocolError, match="names producer subtask 5 of edge 0, which sends nothing to subtask 1"):
        slot._route(0, 5, 1, peer)


def test_pem_files_that_do_not_trust_each_other_fail_before_the_job_starts(tmp_path):
    (tmp_path / "ours").mkdir()
    (tmp_path / "ca").mkdir()
    certificate, key = _write_pem_files(tmp_path / "ours")
    other_certificate, _ = _write_pem_files(tmp_path / "ca")
    conf = {"spark.chandy.network.tls.certificate": certificate, "spark.chandy.network.tls.privateKey": key,
            "spark.chandy.network.tls.trustedCertificates": other_certificate,
            "spark.chandy.network.encryption": "true"}
    with pytest.raises(ConfigurationError, match="put its CA \\(or itself\\) in the trusted file"):
        encryption(conf).material("job")
