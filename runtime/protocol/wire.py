"""Length-prefixed framing of control messages over a socket.

A frame is a 4-byte big-endian length and a pickle of one :mod:`runtime.protocol.messages` value. Both ends are
Chandy processes of the same job, so pickle is safe here; it is never used on data from outside.

>>> from runtime.protocol.messages import Cancel
>>> server = socket.create_server(("127.0.0.1", 0))
>>> sender = MessageSocket(socket.create_connection(server.getsockname()))
>>> receiver = MessageSocket(server.accept()[0])
>>> sender.send(Cancel(attempt=3, reason="cancelled by the user")); receiver.receive()
Cancel(attempt=3, reason='cancelled by the user')
>>> sender.close(); receiver.close(); server.close()
"""

from __future__ import annotations

import pickle
import socket
import struct
import threading

from runtime.protocol.messages import Message

__all__ = ["MessageSocket", "ConnectionClosed"]

_LENGTH = struct.Struct(">I")


class ConnectionClosed(ConnectionError):
    """The peer closed the control connection."""


class MessageSocket:
    """Send and receive whole messages; ``send`` is safe from several threads."""

    def __init__(self, sock: socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: Message) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self.sock.sendall(_LENGTH.pack(len(payload)) + payload)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionClosed("control connection closed by peer")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> Message:
        (length,) = _LENGTH.unpack(self._read_exactly(_LENGTH.size))
        return pickle.loads(self._read_exactly(length))

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
