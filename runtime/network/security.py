"""What a job attempt's processes prove to each other on every connection they open, and how.

The driver makes a :class:`ConnectionSecurity` for each attempt: a new random secret, and the job's TLS material
when encryption is on. It reaches the slots inside the barrier stage's task (Spark's own channel, which
``spark.authenticate`` and ``spark.network.crypto.enabled`` protect), never over Chandy's sockets. Every
connection then opens with TLS (when on) and the challenge-response of :mod:`runtime.network.auth`; only a stream
that passed both is handed to the code that reads frames, unpickles, decodes Arrow or routes.

>>> import threading
>>> security = ConnectionSecurity.new()
>>> security
ConnectionSecurity(tls=None)
>>> server = socket.create_server(("127.0.0.1", 0))
>>> accepted = []
>>> thread = threading.Thread(target=lambda: accepted.append(security.accept(server.accept()[0], "control")))
>>> thread.start()
>>> stream = security.connect(server.getsockname(), "control", timeout_s=5); thread.join()
>>> stream.sendall(b"ping"); accepted[0].recv(4)
b'ping'
>>> stream.close(); accepted[0].close(); server.close()
"""

from __future__ import annotations

import secrets
import socket
import ssl
import time
from dataclasses import dataclass, field

from runtime.errors import AuthenticationError
from runtime.network.auth import ServerHandshake, connect_peer
from runtime.network.tls import TlsMaterial, TlsStream

__all__ = ["ConnectionSecurity", "Admission", "HANDSHAKE_TIMEOUT_S", "Stream"]

# A peer that has not proved itself within this time is dropped: long enough for a loaded machine's TLS
# handshake, short enough that stalled connections free their threads soon.
HANDSHAKE_TIMEOUT_S = 10.0

Stream = socket.socket | TlsStream  # what accept() and connect() return: both read and write like a socket


@dataclass(frozen=True)
class ConnectionSecurity:
    """The secret both ends must prove they hold, and TLS material when connections are encrypted."""

    secret: bytes = field(repr=False)
    tls: TlsMaterial | None = None
    handshake_timeout_s: float = field(default=HANDSHAKE_TIMEOUT_S, repr=False)

    @classmethod
    def new(cls, tls: TlsMaterial | None = None) -> "ConnectionSecurity":
        """A fresh random secret (one per job attempt)."""
        return cls(secrets.token_bytes(32), tls)

    @property
    def encrypted(self) -> bool:
        return self.tls is not None

    def admit(self, sock: socket.socket, service: str) -> "Admission":
        """The handshake of an accepted ``sock``, to drive (:class:`Admission`)."""
        return Admission(sock, self, service)

    def accept(self, sock: socket.socket, service: str) -> Stream:
        """Authenticate the peer of an accepted ``sock``, blocking; returns the stream to use from now on, or
        raises :class:`AuthenticationError` (the caller closes ``sock``). Servers drive many admissions on one
        thread instead (:mod:`runtime.network.acceptor`)."""
        admission = self.admit(sock, service)
        deadline = time.monotonic() + self.handshake_timeout_s
        previous = sock.gettimeout()
        try:
            sock.sendall(admission.first_words())
            while not admission.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AuthenticationError("the peer did not complete the handshake in time")
                sock.settimeout(remaining)
                try:
                    raw = sock.recv(admission.wanted)
                except socket.timeout:
                    raise AuthenticationError("the peer did not complete the handshake in time") from None
                sock.sendall(admission.receive(raw))
        except OSError as exc:
            raise AuthenticationError(f"the connection broke during the handshake ({exc})") from None
        finally:
            try:
                sock.settimeout(previous)
            except OSError:
                pass
        return admission.stream()

    def connect(self, address: tuple[str, int], service: str, timeout_s: float) -> Stream:
        """Connect to ``address`` and prove this end to it (and it to this end). Raises OSError when nothing
        answers, :class:`AuthenticationError` when what answers is not this job's ``service``."""
        sock = socket.create_connection(address, timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return self.open(sock, service, f"{address[0]}:{address[1]}")
        except BaseException:
            sock.close()
            raise

    def open(self, sock: socket.socket, service: str, peer: str) -> Stream:
        """The connecting end's handshake over the connected ``sock``; returns the stream to use from now on."""
        deadline = time.monotonic() + self.handshake_timeout_s
        stream: Stream = sock
        if self.tls is not None:
            try:
                stream = TlsStream.connect(sock, self.tls.client_context(), self.handshake_timeout_s)
            except (ssl.SSLError, OSError) as exc:
                raise AuthenticationError(f"no TLS handshake with {peer} ({_reason(exc)})") from None
        connect_peer(stream, self.secret, service, max(0.0, deadline - time.monotonic()))
        stream.settimeout(None)
        return stream


class Admission:
    """One accepted connection proving itself, without I/O of its own: send :meth:`first_words`, then hand every
    read of at most :attr:`wanted` bytes to :meth:`receive` and send what it returns, until :attr:`done`; then
    :meth:`stream` is the connection to use. :meth:`receive` raises AuthenticationError when the peer fails
    (an empty read is the peer leaving). With TLS, the TLS handshake comes first and the challenge-response runs
    inside it."""

    def __init__(self, sock: socket.socket, security: ConnectionSecurity, service: str):
        self.sock = sock
        self.done = False
        self._auth = ServerHandshake(security.secret, service)
        self._tls = None
        if security.tls is not None:
            self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._tls = security.tls.server_context().wrap_bio(
                self._incoming, self._outgoing, server_side=True)
            self._tls_done = False

    @property
    def wanted(self) -> int:
        """How much to read next: never more than the handshake (a plain peer's next bytes are payload)."""
        return self._auth.missing if self._tls is None else 1 << 16

    def first_words(self) -> bytes:
        """What the accepting end says first: the challenge (in TLS, the client speaks first)."""
        return self._auth.greeting if self._tls is None else b""

    def receive(self, raw: bytes) -> bytes:
        """Take what the peer sent; returns what to send back."""
        if not raw:
            raise AuthenticationError("the peer closed the connection during the handshake")
        if self._tls is None:
            proof = self._auth.feed(raw)
            self.done = proof is not None
            return proof or b""
        self._incoming.write(raw)
        try:
            if not self._tls_done:
                self._tls.do_handshake()
                self._tls_done = True
                self._tls.write(self._auth.greeting)
            while not self.done:
                data = self._tls.read(self._auth.missing)
                if not data:
                    raise AuthenticationError("the peer closed the connection during the handshake")
                proof = self._auth.feed(data)
                if proof is not None:
                    self._tls.write(proof)
                    self.done = True
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            raise AuthenticationError("the peer closed the connection during the handshake") from None
        except ssl.SSLError as exc:
            raise AuthenticationError(f"no TLS handshake ({_reason(exc)})") from None
        return self._outgoing.read()

    def stream(self) -> Stream:
        if not self.done:
            raise AuthenticationError("the handshake is not complete")
        return self.sock if self._tls is None else TlsStream(self.sock, self._tls, self._incoming, self._outgoing)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return f"{type(exc).__name__}: {exc}"
