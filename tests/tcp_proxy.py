"""A TCP proxy for tests that need a server to go away for a while without losing what it holds (moto keeps its
objects in memory: restarting it would empty it).

Clients connect to ``proxy.port`` on 127.0.0.1; each connection is relayed to the target. During an outage every
open connection is reset and every new one is reset as soon as it is accepted, so clients see the server vanish
at once (a reset, not a hang until their read timeout). Nothing sent through is parsed.

>>> import socket, threading
>>> server = socket.create_server(("127.0.0.1", 0))
>>> def echo():
...     connection, _ = server.accept()
...     with connection:
...         connection.sendall(connection.recv(100))
>>> threading.Thread(target=echo, daemon=True).start()
>>> proxy = TcpProxy("127.0.0.1", server.getsockname()[1])
>>> with socket.create_connection(("127.0.0.1", proxy.port)) as client:
...     client.sendall(b"ping"); client.recv(100)
b'ping'
>>> proxy.close(); server.close()
"""

from __future__ import annotations

import socket
import struct
import threading
import time

__all__ = ["TcpProxy"]

_CHUNK = 1 << 16


def _reset(connection: socket.socket) -> None:
    """Close with a reset (RST), as a vanished server would look, rather than an orderly end of stream."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.shutdown(socket.SHUT_RDWR)  # wakes a relay thread blocked in recv() on it
    except OSError:
        pass
    connection.close()


class TcpProxy:
    """Relays 127.0.0.1:``port`` to ``host``:``target_port`` until :meth:`close`; :meth:`outage` cuts it off."""

    def __init__(self, host: str, target_port: int):
        self.target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._down = False
        self._closed = False
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def outage(self, seconds: float, until=None, at_most: float = 120.0) -> threading.Event:
        """Reset every connection now and every new one for ``seconds``, and with ``until`` (a predicate) until it
        holds too (checked every 50 ms, ``at_most`` seconds in all): an outage that lasts until its effect was seen,
        however slow the machine. The returned event is set when the outage is over."""
        over = threading.Event()
        with self._lock:
            self._down = True
            cut, self._open = self._open, set()
        for connection in cut:
            _reset(connection)

        def end():
            deadline = time.monotonic() + at_most - seconds
            while until is not None and not until() and time.monotonic() < deadline:
                time.sleep(0.05)
            with self._lock:
                self._down = False
            over.set()

        timer = threading.Timer(seconds, end)
        timer.daemon = True
        timer.start()
        return over

    def close(self) -> None:
        with self._lock:
            self._closed = True
            cut, self._open = self._open, set()
        self._listener.close()
        for connection in cut:
            _reset(connection)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                refuse = self._down or self._closed
            if refuse:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(source, sink), name="tcp-proxy-relay", daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
            for connection in (source, sink):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                connection.close()
