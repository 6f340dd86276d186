"""Who gets in: the handshake every internal connection opens with, the acceptor that refuses and logs, TLS with a
job's own certificate, the job-control endpoint, and the settings that turn encryption on."""

import datetime
import logging
import socket
import threading

import pytest

from runtime.driver.job_control import JobControlServer, request
from runtime.driver.security_settings import resolve_encryption
from runtime.settings import resolve
from runtime.errors import AuthenticationError, ConfigurationError, JobControlError, ProtocolError
from runtime.network import acceptor as acceptor_module
from runtime.network.acceptor import Acceptor
from runtime.network.auth import ANSWER_BYTES, CHALLENGE_BYTES, connect_peer
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsMaterial, job_certificate, material_from_files
from runtime.protocol.messages import Cancel
from runtime.protocol.wire import MessageSocket
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
    job_id, job_name, status = "ab12cd34", "orders", "RUNNING"

    def trigger_savepoint(self, path=None):
        return f"file://{path}/savepoint-1"


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "tls"])
def test_the_job_control_endpoint_needs_the_token_and_in_tls_its_certificate(encrypted):
    material = tls_security().tls if encrypted else None
    server = JobControlServer(_Master(), "127.0.0.1", material)
    try:
        described = server.describe()
        assert ("certificate" in described) is encrypted
        answer = request(server.address, described["token"], "savepoint", certificate=described.get("certificate"),
                         path="/sp")
        assert answer == {"ok": True, "path": "file:///sp/savepoint-1"}
        with pytest.raises(JobControlError, match="refused the token"):
            request(server.address, "0" * 32, "status", certificate=described.get("certificate"))
        if encrypted:  # a client that does not know the job's certificate gets nowhere
            with pytest.raises(JobControlError):
                request(server.address, described["token"], "status",
                        certificate=job_certificate("another job").certificate)
    finally:
        server.close()


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
