"""A listening socket that hands every accepted connection to a handler on a thread of its own.

Shared by the data server (a slot's inbound channels) and the control server (the driver's end of the
control protocol).
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

__all__ = ["Acceptor"]


class Acceptor:
    def __init__(self, host: str, handler: Callable[[socket.socket], None], name: str, backlog: int = 128):
        self.listener = socket.create_server((host, 0), backlog=backlog)
        self.listener.settimeout(0.2)  # accept() is not woken by close(): poll the closed flag instead
        self.address = (host, self.listener.getsockname()[1])
        self.handler = handler
        self.name = name
        self.threads: list[threading.Thread] = []
        self.connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self.closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self.closed:
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self.closed:
                    sock.close()
                    return
                self.connections.append(sock)
                thread = threading.Thread(target=self.handler, args=(sock,), name=self.name, daemon=True)
                self.threads.append(thread)
            thread.start()

    def close(self) -> None:
        """Stop accepting and shut every accepted connection down (their handlers then see EOF)."""
        with self._lock:
            self.closed = True
            connections = list(self.connections)
        try:
            self.listener.close()
        except OSError:
            pass
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def join(self, timeout: float) -> bool:
        """Wait for the accept loop and every handler; True when all have ended."""
        self._thread.join(timeout)
        for thread in list(self.threads):
            thread.join(timeout)
        return not self._thread.is_alive() and not any(t.is_alive() for t in self.threads)
