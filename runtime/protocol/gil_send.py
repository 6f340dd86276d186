"""Sending a few bytes without letting go of the GIL.

``socket.send`` releases the GIL, and a thread that does so waits for a busy thread's switch interval (5 ms) to
get it back: for the one-byte credit a consumer sends per batch, that was a bottleneck. A non-blocking
``send(2)`` through ``ctypes.PyDLL`` (which keeps the GIL) takes what fits in the socket's buffer at once; only
the rest goes by ``sendall``, which blocks.

>>> import socket
>>> a, b = socket.socketpair()
>>> send_keeping_gil(a)(b"credit"); b.recv(6)
b'credit'
>>> a.close(); b.close()
"""

from __future__ import annotations

import ctypes
import errno
import socket
from typing import Callable

__all__ = ["send_keeping_gil"]


def send_keeping_gil(sock: socket.socket) -> Callable[[bytes], None]:
    """``send(data)`` for ``sock``: all of ``data``, blocking only for what the socket cannot take at once."""
    try:
        libc_send = ctypes.PyDLL(None).send
        libc_send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
        libc_send.restype = ctypes.c_ssize_t
        flags = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)
    except (AttributeError, OSError):  # no libc send(2) here
        return sock.sendall

    def send(data: bytes) -> None:
        fd = sock.fileno()  # -1 once closed: never a stale descriptor number that another socket now has
        if fd < 0:
            raise OSError(errno.EBADF, "the socket is closed")
        sent = libc_send(fd, data, len(data), flags) if data else 0
        if sent < len(data):
            sock.sendall(memoryview(data)[max(0, sent):])
    return send
