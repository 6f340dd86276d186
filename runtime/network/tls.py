"""TLS for a job's internal connections: the key material, the contexts, and a socket-like stream that is safe to
read on one thread while another writes.

Material is made per job on the driver (:func:`job_certificate`: a P-256 key and a self-signed certificate that
is also the only certificate either end trusts), or read from the user's PEM files (:func:`material_from_files`).
It travels to the executors inside the barrier stage's task, as the job's secret does. Connections are mutually
authenticated (each end presents the certificate and requires the other's), TLS 1.3 only; host names are not
checked, since the certificate names the job, not a machine.

Why a stream of our own over :class:`ssl.MemoryBIO` instead of :meth:`ssl.SSLContext.wrap_socket`: a data
connection is read by its reader thread while the consumer's thread writes credits back, and OpenSSL forbids using
one ``SSL`` object from two threads at once (CPython takes no lock around it). Here every call on the TLS object
holds a lock, and only the raw socket's reads and writes, which may block, happen outside it.

>>> material = job_certificate("ab12")
>>> server, client = socket.socketpair()
>>> import threading
>>> accepted = []
>>> def accept():
...     incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
...     tls = material.server_context().wrap_bio(incoming, outgoing, server_side=True)
...     while True:
...         try:
...             tls.do_handshake(); server.sendall(outgoing.read()); break
...         except ssl.SSLWantReadError:
...             server.sendall(outgoing.read()); incoming.write(server.recv(65536))
...     accepted.append(TlsStream(server, tls, incoming, outgoing))
>>> thread = threading.Thread(target=accept); thread.start()
>>> stream = TlsStream.connect(client, material.client_context(), 10); thread.join()
>>> stream.sendall(b"hello"); accepted[0].recv(5)
b'hello'
>>> stream.close(); accepted[0].close()
"""

from __future__ import annotations

import datetime
import io
import os
import socket
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field

from runtime.errors import ConfigurationError
from runtime.protocol.gil_send import send_keeping_gil

__all__ = ["TlsMaterial", "TlsStream", "job_certificate", "material_from_files"]

_RAW_READ = 1 << 16
_contexts: dict[tuple, ssl.SSLContext] = {}  # one per material and role in a process: making one costs milliseconds
_contexts_lock = threading.Lock()


@dataclass(frozen=True)
class TlsMaterial:
    """PEM text: this end's certificate chain and private key (None for a client that only verifies the server),
    and the certificates it trusts."""

    certificate: str | None
    private_key: str | None = field(repr=False)
    trusted: str

    def server_context(self, verify_client: bool = True) -> ssl.SSLContext:
        return self._context(True, verify_client)

    def client_context(self) -> ssl.SSLContext:
        return self._context(False, True)

    def _context(self, server: bool, verify_peer: bool) -> ssl.SSLContext:
        key = (self.certificate, self.private_key, self.trusted, server, verify_peer)
        with _contexts_lock:
            context = _contexts.get(key)
            if context is None:
                context = _contexts[key] = self._make_context(server, verify_peer)
            return context

    def _make_context(self, server: bool, verify_peer: bool) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_3  # both ends are Chandy: no reason to speak anything older
        context.check_hostname = False  # the certificate names the job, not a host
        context.verify_mode = ssl.CERT_REQUIRED if verify_peer else ssl.CERT_NONE
        if server:
            context.num_tickets = 0  # no session resumption: connections are few and long
        context.load_verify_locations(cadata=self.trusted)
        if self.certificate is not None:
            _load_chain(context, self.certificate, self.private_key)
        return context


def _load_chain(context: ssl.SSLContext, certificate: str, private_key: str | None) -> None:
    """``load_cert_chain`` reads files only: the PEM text goes through a private file that is removed at once."""
    directory = tempfile.mkdtemp(prefix="chandy-tls-")  # mode 0700
    path = os.path.join(directory, "chain.pem")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(certificate.rstrip("\n") + "\n" + (private_key or ""))
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
        os.rmdir(directory)


def job_certificate(job_id: str, common_name: str | None = None) -> TlsMaterial:
    """A new key and self-signed certificate for one job; each end presents it and trusts only it. With
    ``common_name``, for something else than a job (the driver's REST server, whose clients pin it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or f"chandy job {job_id}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # executors' clocks may lag the driver's
        # A streaming job runs for years, and the certificate is trusted by being this very certificate: no date
        # adds safety (RFC 5280's "no well-defined expiration date").
        .not_valid_after(datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256()))
    certificate_pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return TlsMaterial(certificate_pem, key_pem, certificate_pem)


def material_from_files(certificate: str, private_key: str, trusted: str | None, keys: tuple[str, str, str]
                        ) -> TlsMaterial:
    """The user's PEM files (read on the driver; the executors get their contents). ``trusted`` defaults to the
    certificate itself. ``keys`` name the three settings in errors."""
    texts = []
    for path, key in zip((certificate, private_key, trusted or certificate), keys):
        try:
            with open(path) as f:
                texts.append(f.read())
        except OSError as exc:
            raise ConfigurationError(f"{key} = {path!r} cannot be read ({exc.strerror}): give the path of a PEM file "
                                     "on the driver's machine.") from None
    material = TlsMaterial(*texts)
    if "ENCRYPTED" in material.private_key:
        raise ConfigurationError(f"{keys[1]} = {private_key!r} is encrypted with a passphrase: Chandy needs the key "
                                 "unencrypted (it travels to the executors inside Spark's task; protect that with "
                                 "spark.authenticate and spark.network.crypto.enabled).")
    for server in (True, False):
        try:
            material._context(server, True)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigurationError(f"The TLS files {certificate!r}, {private_key!r} and {trusted or certificate!r} "
                                     f"({', '.join(keys)}) do not make a usable TLS setup: {exc}") from None
    return material


class TlsStream:
    """A TLS connection over ``sock`` that behaves like the socket for what Chandy uses (``sendall``, ``recv``
    with ``MSG_DONTWAIT``, ``makefile``, ``shutdown``, ``close``, ``fileno``, ``settimeout``), made of a TLS object
    whose handshake is done (:meth:`connect` does one; the accepting end's is driven by
    :class:`~runtime.network.security.Admission`).

    One thread may read while others write: writes are ordered by a write lock, the TLS object is only touched
    under its own lock, and the raw socket is read and written outside it.
    """

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO):
        self.sock = sock
        self._tls = tls
        self._incoming = incoming
        self._outgoing = outgoing
        self._tls_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._send_raw = send_keeping_gil(sock)

    @classmethod
    def connect(cls, sock: socket.socket, context: ssl.SSLContext, timeout_s: float) -> "TlsStream":
        """The connecting end's handshake over ``sock``, within ``timeout_s`` seconds; else :class:`ssl.SSLError`,
        ``socket.timeout`` or ConnectionError."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_side=False)
        deadline = time.monotonic() + timeout_s
        previous_timeout = sock.gettimeout()
        try:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    sock.sendall(outgoing.read())
                    sock.settimeout(max(0.001, deadline - time.monotonic()))
                    raw = sock.recv(_RAW_READ)
                    if not raw:
                        raise ConnectionError("the peer closed the connection during the TLS handshake") from None
                    incoming.write(raw)
            sock.sendall(outgoing.read())
        finally:
            sock.settimeout(previous_timeout)
        return cls(sock, tls, incoming, outgoing)

    # -- socket-like --------------------------------------------------------------------------------------

    def fileno(self) -> int:
        return self.sock.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self.sock.gettimeout()

    def setsockopt(self, *args) -> None:
        self.sock.setsockopt(*args)

    def getpeername(self):
        return self.sock.getpeername()

    def sendall(self, data) -> None:
        view = memoryview(data).cast("B")
        with self._write_lock:
            with self._tls_lock:
                while view:
                    written = self._tls.write(view[:1 << 20])
                    view = view[written:]
                encrypted = self._outgoing.read()
            self._send_raw(encrypted)

    def recv(self, size: int, flags: int = 0) -> bytes:
        """Up to ``size`` bytes; ``b""`` at the end. With ``MSG_DONTWAIT``: BlockingIOError when none is there."""
        nowait = bool(flags & getattr(socket, "MSG_DONTWAIT", 0))
        while True:
            with self._tls_lock:
                data = self._read_decrypted(size)
                owed = self._outgoing.pending
            if owed:  # the TLS layer answered something the peer sent (a key update)
                self._flush()
            if data is not None:
                return data
            if not self._fill(socket.MSG_DONTWAIT if nowait else 0):
                with self._tls_lock:
                    self._incoming.write_eof()

    def _read_decrypted(self, size: int) -> bytes | None:
        """Everything decrypted that is there, up to ``size`` bytes (every whole record received, not only the
        first: a caller that then waits on the socket must not leave a credit behind in the TLS object); None
        when nothing is; ``b""`` at the end."""
        chunks, missing = [], size
        while missing:
            try:
                chunk = self._tls.read(missing)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # closed, with or without TLS's own close
                if not chunks:
                    return b""
                break
            if not chunk:
                if not chunks:
                    return b""
                break
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks) if chunks else None

    def recv_into(self, buffer) -> int:
        data = self.recv(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def makefile(self, mode: str = "rb", buffering: int = io.DEFAULT_BUFFER_SIZE):
        raw = _RawTls(self, mode)
        return io.BufferedReader(raw, buffering) if "r" in mode else io.BufferedWriter(raw, buffering)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()

    # -- the raw socket -----------------------------------------------------------------------------------

    def _fill(self, flags: int) -> bool:
        """Read what the socket has into the TLS object; False at the end of the connection."""
        raw = self.sock.recv(_RAW_READ, flags)
        if not raw:
            return False
        with self._tls_lock:
            self._incoming.write(raw)
        return True

    def _flush(self) -> None:
        with self._write_lock:
            with self._tls_lock:
                encrypted = self._outgoing.read()
            if encrypted:
                self._send_raw(encrypted)


class _RawTls(io.RawIOBase):
    """The stream as a raw file, for ``io.Buffered*`` (Arrow's IPC reader and writer take those)."""

    def __init__(self, stream: TlsStream, mode: str):
        self.stream = stream
        self.mode = mode

    def readable(self) -> bool:
        return "r" in self.mode

    def writable(self) -> bool:
        return "w" in self.mode

    def readinto(self, buffer) -> int:
        return self.stream.recv_into(buffer)

    def write(self, data) -> int:
        self.stream.sendall(data)
        return len(data)
