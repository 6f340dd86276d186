"""Length-prefixed framing of control messages over an authenticated stream.

A frame is a 4-byte big-endian length and a pickle of one :mod:`runtime.protocol.messages` value. Frames are only
read from a stream whose peer proved that it holds the job attempt's secret
(:mod:`runtime.network.security`): a peer that could not, never gets a byte of it unpickled. A frame longer than
:data:`MAX_FRAME_BYTES`, or one that does not unpickle to a message, is a :class:`ProtocolError` naming the peer.

>>> import socket
>>> from runtime.protocol.messages import Cancel
>>> a, b = socket.socketpair()
>>> sender, receiver = MessageSocket(a, "the driver"), MessageSocket(b, "slot 0")
>>> sender.send(Cancel(attempt=3, reason="cancelled by the user")); receiver.receive()
Cancel(attempt=3, reason='cancelled by the user')
>>> a.sendall(b"\\xff\\xff\\xff\\xff")
>>> try:
...     receiver.receive()
... except ProtocolError as error:
...     print(error)
slot 0 sent a control frame of 4,294,967,295 bytes, more than the 64 MiB a control message may have: it is not a Chandy process of this version
>>> sender.close(); receiver.close()
"""

from __future__ import annotations

import pickle
import socket
import struct
import threading

from runtime.errors import ProtocolError
from runtime.protocol.gil_send import send_keeping_gil
from runtime.protocol.messages import Message

__all__ = ["MessageSocket", "ConnectionClosed", "MAX_FRAME_BYTES"]

_LENGTH = struct.Struct(">I")
# Larger than any control message (the largest: an acknowledgement listing thousands of RocksDB files, a
# failure with its traceback), small enough that a broken peer cannot make the driver allocate gigabytes.
MAX_FRAME_BYTES = 64 << 20
_RECEIVE_BYTES = 64 << 10


class ConnectionClosed(ConnectionError):
    """The peer closed the control connection."""


class MessageSocket:
    """Send and receive whole messages over ``stream`` (a socket, or a TLS stream that reads and writes like
    one); ``send`` is safe from several threads, ``receive`` is called from one. ``peer`` names the other end in
    errors.

    Each call into the socket lets go of the GIL, and taking it back waits for a computing thread's switch
    interval (5 ms in a worker whose subtasks compute): a receive reads what has arrived at once, not a frame's
    length and then its body, and a send hands the socket what fits without letting go (``send_keeping_gil``).
    A lookup of queryable state crosses such a wait at each end."""

    def __init__(self, stream, peer: str):
        self.sock = stream
        self.peer = peer
        self._send_lock = threading.Lock()
        self._sendall = send_keeping_gil(stream) if isinstance(stream, socket.socket) else stream.sendall
        self._received = bytearray()

    def send(self, message: Message) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self._sendall(_LENGTH.pack(len(payload)) + payload)

    def _read_exactly(self, n: int) -> bytes:
        received = self._received
        while len(received) < n:
            chunk = self.sock.recv(max(_RECEIVE_BYTES, min(n - len(received), 1 << 20)))
            if not chunk:
                raise ConnectionClosed(f"the control connection with {self.peer} was closed")
            received += chunk
        data = bytes(received[:n])
        del received[:n]
        return data

    def receive(self) -> Message:
        (length,) = _LENGTH.unpack(self._read_exactly(_LENGTH.size))
        if length > MAX_FRAME_BYTES:
            raise ProtocolError(f"{self.peer} sent a control frame of {length:,} bytes, more than the "
                                f"{MAX_FRAME_BYTES >> 20} MiB a control message may have: it is not a Chandy process "
                                "of this version")
        payload = self._read_exactly(length)
        try:
            message = pickle.loads(payload)
        except Exception as exc:
            raise ProtocolError(f"{self.peer} sent a control frame that is no message ({type(exc).__name__}: "
                                f"{exc}): it is not a Chandy process of this version") from None
        if not isinstance(message, Message):
            raise ProtocolError(f"{self.peer} sent a {type(message).__name__} where a control message belongs: it is "
                                "not a Chandy process of this version")
        return message

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # first: a send that blocks fails now and lets go of the lock
        except OSError:
            pass
        # Closed under the send lock: a send in progress has taken the descriptor's number before the close, so
        # it never writes into a connection accepted later under the same number.
        with self._send_lock:
            self.sock.close()
