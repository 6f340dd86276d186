"""Proving that the other end of a connection holds the job's secret, before anything else is read from it.

A challenge-response with HMAC-SHA256, in both directions, so the secret never crosses the wire and each end
knows the other is the job's:

1. the accepting end sends ``MAGIC`` and a fresh 32-byte nonce (its greeting);
2. the connecting end answers ``MAGIC``, a nonce of its own and ``HMAC(secret, "C" service nonces)``;
3. the accepting end checks it (``hmac.compare_digest``) and answers ``HMAC(secret, "S" service nonces)``,
   which the connecting end checks.

Every read has a fixed size and the whole exchange a deadline. A replayed answer fails (the accepting end's nonce
is new each time), as does an answer for another service (``control``, ``data``) or made with another job's or
attempt's secret (each attempt has its own).

The accepting end's half does no I/O (:class:`ServerHandshake`): one thread drives the handshakes of every
connection a server accepts (:mod:`runtime.network.acceptor`), so a stranger's connection costs no thread.

>>> import socket, threading
>>> a, b = socket.socketpair()
>>> secret = b"s" * 32
>>> thread = threading.Thread(target=connect_peer, args=(b, secret, "data", 5.0)); thread.start()
>>> server = ServerHandshake(secret, "data")
>>> a.sendall(server.greeting)
>>> proof = server.feed(a.recv(server.missing))
>>> a.sendall(proof); thread.join()
>>> impostor = ServerHandshake(secret, "data")
>>> try:
...     impostor.feed(MAGIC + b"n" * NONCE_BYTES + b"m" * 32)
... except AuthenticationError as error:
...     print(error)
the peer does not know this job's secret
>>> a.close(); b.close()
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import time

from runtime.errors import AuthenticationError

__all__ = ["ServerHandshake", "connect_peer", "MAGIC", "NONCE_BYTES", "CHALLENGE_BYTES", "ANSWER_BYTES"]

MAGIC = b"CHDYAUTH\x01"  # the protocol's name and version
NONCE_BYTES = 32
_MAC_BYTES = hashlib.sha256().digest_size
CHALLENGE_BYTES = len(MAGIC) + NONCE_BYTES
ANSWER_BYTES = len(MAGIC) + NONCE_BYTES + _MAC_BYTES


def _mac(secret: bytes, role: bytes, service: str, accepting_nonce: bytes, connecting_nonce: bytes) -> bytes:
    message = role + service.encode() + b"\0" + accepting_nonce + connecting_nonce
    return hmac.new(secret, message, hashlib.sha256).digest()


class ServerHandshake:
    """The accepting end's half, without I/O: send :attr:`greeting`, then :meth:`feed` what arrives (at most
    :attr:`missing` bytes at a time) until it returns the proof to send back: the peer is then authenticated.
    Raises AuthenticationError as soon as what arrived cannot be a right answer."""

    def __init__(self, secret: bytes, service: str):
        self._secret = secret
        self._service = service
        self._nonce = os.urandom(NONCE_BYTES)
        self.greeting = MAGIC + self._nonce
        self._answer = b""

    @property
    def missing(self) -> int:
        """Bytes of the answer still to come."""
        return ANSWER_BYTES - len(self._answer)

    def feed(self, data: bytes) -> bytes | None:
        if len(data) > self.missing:
            raise AuthenticationError("the peer said more than the handshake before it was answered")
        self._answer += data
        said = self._answer[:len(MAGIC)]
        if said != MAGIC[:len(said)]:
            raise AuthenticationError("the peer does not speak Chandy's handshake")
        if self.missing:
            return None
        theirs = self._answer[len(MAGIC):len(MAGIC) + NONCE_BYTES]
        expected = _mac(self._secret, b"C", self._service, self._nonce, theirs)
        if not hmac.compare_digest(self._answer[len(MAGIC) + NONCE_BYTES:], expected):
            raise AuthenticationError("the peer does not know this job's secret")
        return _mac(self._secret, b"S", self._service, self._nonce, theirs)


def _read_exactly(sock, size: int, deadline: float, closed: str) -> bytes:
    chunks, missing = [], size
    while missing:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AuthenticationError("the peer did not complete the handshake in time")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(missing)
        except socket.timeout:
            raise AuthenticationError("the peer did not complete the handshake in time") from None
        if not chunk:
            raise AuthenticationError(closed)
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def connect_peer(sock, secret: bytes, service: str, timeout_s: float) -> None:
    """The connecting end's half, blocking; raises AuthenticationError when the other end is not this job's
    ``service``."""
    deadline = time.monotonic() + timeout_s
    previous = sock.gettimeout()
    try:
        challenge = _read_exactly(sock, CHALLENGE_BYTES, deadline, "the peer closed the connection during the handshake")
        if challenge[:len(MAGIC)] != MAGIC:
            raise AuthenticationError(f"the other end is not a Chandy {service} endpoint")
        nonce = os.urandom(NONCE_BYTES)
        theirs = challenge[len(MAGIC):]
        sock.sendall(MAGIC + nonce + _mac(secret, b"C", service, theirs, nonce))
        proof = _read_exactly(sock, _MAC_BYTES, deadline,
                              f"the {service} endpoint refused this connection: it belongs to another job or attempt")
        if not hmac.compare_digest(proof, _mac(secret, b"S", service, theirs, nonce)):
            raise AuthenticationError(f"the other end is a Chandy {service} endpoint of another job or attempt")
    except OSError as exc:
        raise AuthenticationError(f"the connection broke during the handshake ({exc})") from None
    finally:
        try:
            sock.settimeout(previous)
        except OSError:  # closed meanwhile
            pass
