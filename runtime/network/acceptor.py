"""A listening socket that authenticates every connection and hands those that pass to a handler, each on a
thread of its own.

Shared by the data server (a slot's inbound channels) and the control server (the driver's end of the control
protocol). One thread accepts and drives the handshakes of all the connections still proving themselves
(:class:`~runtime.network.security.Admission`, non-blocking, with a selector): a stranger's connection costs no
thread and a few microseconds of the interpreter, so a burst of them barely touches the job's own threads. A connection whose peer does not prove that it belongs to the job is closed before a byte of
it reaches the handler, and told of in one WARNING; more refusals within :data:`REFUSAL_LOG_INTERVAL_S` are summed
up in one line, never a traceback per connection. At most :data:`MAX_PENDING_HANDSHAKES` connections may be
proving themselves at once (each for at most the handshake timeout): beyond that a flood is refused at once.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from typing import Callable

from runtime.errors import AuthenticationError
from runtime.network.security import Admission, ConnectionSecurity, Stream

__all__ = ["Acceptor", "RefusalLog", "MAX_PENDING_HANDSHAKES", "REFUSAL_LOG_INTERVAL_S"]

log = logging.getLogger(__name__)

MAX_PENDING_HANDSHAKES = 256
REFUSAL_LOG_INTERVAL_S = 10.0
_POLL_S = 0.2  # the selector wakes at least this often to expire handshakes and to notice close()


class RefusalLog:
    """Logs refused connections: the first at once, later ones summed up at most once per interval.

    >>> now = [0.0]
    >>> refusals = RefusalLog("the data server of slot 1", clock=lambda: now[0])
    >>> refusals.refused("10.0.0.9:4711", "the peer does not know this job's secret")  # logged
    >>> now[0] = 3.0; refusals.refused("10.0.0.9:4712", "the peer closed the connection during the handshake")
    >>> now[0] = 11.0; refusals.refused("10.0.0.7:5000", "the peer does not speak Chandy's handshake")  # summed up
    >>> refusals.total
    3
    """

    def __init__(self, what: str, interval_s: float = REFUSAL_LOG_INTERVAL_S, clock=time.monotonic):
        self.what = what
        self.interval_s = interval_s
        self.clock = clock
        self.total = 0
        self._lock = threading.Lock()
        self._logged_at: float | None = None
        self._unlogged = 0
        self._unlogged_peers: list[str] = []

    def refused(self, peer: str, reason: str) -> None:
        with self._lock:
            self.total += 1
            now = self.clock()
            if self._logged_at is None:
                self._logged_at = now
                first = True
            else:
                first = False
                self._unlogged += 1
                if len(self._unlogged_peers) < 5 and peer not in self._unlogged_peers:
                    self._unlogged_peers.append(peer)
                if now - self._logged_at < self.interval_s:
                    return
                count, peers = self._unlogged, self._unlogged_peers
                self._logged_at, self._unlogged, self._unlogged_peers = now, 0, []
        if first:
            log.warning("Refused a connection to %s from %s: %s. Only the job's own processes may connect; further "
                        "refusals are summed up every %.0f s.", self.what, peer, reason, self.interval_s)
        else:
            self._summary(count, peers)

    def flush(self) -> None:
        """Log the refusals not told of yet (when the server closes)."""
        with self._lock:
            count, peers = self._unlogged, self._unlogged_peers
            self._unlogged, self._unlogged_peers = 0, []
        if count:
            self._summary(count, peers)

    def _summary(self, count: int, peers: list[str]) -> None:
        log.warning("Refused %d more connection%s to %s (from %s%s)", count, "s" if count != 1 else "", self.what,
                    ", ".join(peers), ", ..." if count > len(peers) else "")


class _Proving:
    """A connection in its handshake: what remains to send, and by when it must be done."""

    __slots__ = ("sock", "peer", "admission", "deadline")

    def __init__(self, sock: socket.socket, peer: str, admission: Admission, deadline: float):
        self.sock, self.peer, self.admission, self.deadline = sock, peer, admission, deadline


class Acceptor:
    """Accepts connections on ``host`` (any free port) for ``service``; ``handler(stream, peer)`` gets each
    authenticated one on a thread of its own, ``peer`` being ``"host:port"``. ``what`` names the server in the
    log."""

    def __init__(self, host: str, handler: Callable[[Stream, str], None], name: str, security: ConnectionSecurity,
                 service: str, what: str, backlog: int = 128):
        self.listener = socket.create_server((host, 0), backlog=backlog)
        self.listener.setblocking(False)
        self.address = (host, self.listener.getsockname()[1])
        self.handler = handler
        self.name = name
        self.security = security
        self.service = service
        self.refusals = RefusalLog(what)
        self.threads: list[threading.Thread] = []  # handlers of authenticated connections, alive or not
        self._served: set[socket.socket] = set()  # authenticated connections
        self._proving: dict[socket.socket, _Proving] = {}  # only the accepting thread touches it
        self._lock = threading.Lock()
        self.closed = False
        self._wakeup, self._waker = socket.socketpair()  # close() writes to _waker: select() returns at once
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- the accepting thread ------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self._wakeup, selectors.EVENT_READ)
        try:
            while not self.closed:
                now = time.monotonic()
                timeout = min([_POLL_S] + [p.deadline - now for p in self._proving.values()])
                for key, _ in selector.select(max(0.0, timeout)):
                    if self.closed:
                        break
                    if key.fileobj is self.listener:
                        self._accept_all(selector)
                    elif key.fileobj in self._proving:
                        self._advance(selector, self._proving[key.fileobj])
                now = time.monotonic()
                for proving in [p for p in self._proving.values() if p.deadline <= now]:
                    self._refuse(selector, proving, "the peer did not complete the handshake in time")
        finally:
            for proving in self._proving.values():
                proving.sock.close()
            self._proving.clear()
            selector.close()
            self._wakeup.close()

    def _accept_all(self, selector) -> None:
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors (a flood), or a peer gone before it was accepted
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("%s cannot accept more connections now (%s)", self.refusals.what, exc)
                    time.sleep(_POLL_S)  # the backlog waits; spinning would only take the interpreter
                return
            peer = _peer(address)
            if len(self._proving) >= MAX_PENDING_HANDSHAKES:
                self.refusals.refused(peer, f"more than {MAX_PENDING_HANDSHAKES} connections were proving "
                                            "themselves at once")
                sock.close()
                continue
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:
                self.refusals.refused(peer, f"the connection broke before its handshake ({exc})")
                sock.close()
                continue
            proving = _Proving(sock, peer, self.security.admit(sock, self.service),
                               time.monotonic() + self.security.handshake_timeout_s)
            self._proving[sock] = proving
            selector.register(sock, selectors.EVENT_READ)
            self._send(selector, proving, proving.admission.first_words())

    def _advance(self, selector, proving: _Proving) -> None:
        try:
            raw = proving.sock.recv(proving.admission.wanted)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._refuse(selector, proving, f"the connection broke during the handshake ({exc})")
            return
        try:
            reply = proving.admission.receive(raw)
        except AuthenticationError as exc:
            self._refuse(selector, proving, str(exc))
            return
        except Exception as exc:  # a bug of ours must not stop the server: this connection fails, the next is served
            log.exception("the handshake of a connection from %s failed", proving.peer)
            self._refuse(selector, proving, f"{type(exc).__name__}: {exc}")
            return
        if not self._send(selector, proving, reply) or not proving.admission.done:
            return
        selector.unregister(proving.sock)
        del self._proving[proving.sock]
        stream = proving.admission.stream()
        with self._lock:
            if self.closed:
                proving.sock.close()
                return
            self._served.add(proving.sock)
            self.threads = [t for t in self.threads if t.is_alive()]
            thread = threading.Thread(target=self._serve, args=(proving.sock, stream, proving.peer), name=self.name,
                                      daemon=True)
            self.threads.append(thread)
        thread.start()

    def _send(self, selector, proving: _Proving, data: bytes) -> bool:
        """Send a handshake's few bytes at once; a peer whose socket cannot take them (it reads nothing) is refused."""
        try:
            if data and proving.sock.send(data) != len(data):
                raise BlockingIOError("the peer does not read")
            return True
        except OSError as exc:
            self._refuse(selector, proving, f"the connection broke during the handshake ({exc})")
            return False

    def _refuse(self, selector, proving: _Proving, reason: str) -> None:
        selector.unregister(proving.sock)
        del self._proving[proving.sock]
        if not self.closed:
            self.refusals.refused(proving.peer, reason)
        proving.sock.close()

    # -- an authenticated connection's thread --------------------------------------------------------------

    def _serve(self, sock: socket.socket, stream: Stream, peer: str) -> None:
        try:
            sock.setblocking(True)
            self.handler(stream, peer)
        finally:
            with self._lock:
                self._served.discard(sock)

    # -- ending --------------------------------------------------------------------------------------------

    def stop_accepting(self) -> None:
        """Accept no more connections and drop those still proving themselves; the authenticated ones finish
        what they are doing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        try:
            self._waker.send(b"x")
        except OSError:
            pass
        self._waker.close()
        try:
            self.listener.close()
        except OSError:
            pass
        self.refusals.flush()

    def close(self) -> None:
        """Stop accepting and shut every accepted connection down (their handlers then see EOF)."""
        self.stop_accepting()
        with self._lock:
            served = list(self._served)
        for sock in served:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def join(self, timeout: float) -> bool:
        """Wait for the accepting thread and every handler; True when all have ended."""
        self._thread.join(timeout)
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(timeout)
        return not self._thread.is_alive() and not any(t.is_alive() for t in threads)


def _peer(address) -> str:
    host, port = address[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
