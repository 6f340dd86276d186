"""The data plane: input gates, and channels between subtasks (in memory within a slot, Arrow IPC over TCP
between slots).

A channel links one producer subtask to one consumer subtask of an edge. Each consumer subtask has one
:class:`InputGate` holding a small bounded queue per input channel: a full queue blocks its producer (for a
remote channel: its reader thread stops granting credits, and the sender runs out of them), which is all
the backpressure there is. The consumer reads channels round-robin and can leave a channel unread
(``block``) while others catch up, which is what barrier alignment needs.

A remote channel is one TCP connection carrying a fixed header, then one Arrow IPC stream; back the other
way, one byte per batch the consumer's gate took, a credit for the producer to send another (Flink's
credit-based flow control, counted in batches). Without credits the operating system's socket buffers
(megabytes, autotuned) held the in-flight data, and under backpressure a barrier waited behind all of it:
alignment took 100-200 ms per checkpoint and the producer whose barrier came first stalled meanwhile.

Credits bound the batches in flight, not the records: a channel holds up to ``CREDITS`` batches on the way
and the gate's capacity in its queue, and behind a slow consumer each batch is full (up to the job's batch
size, 4,096 records), so a barrier could wait minutes behind them. Buffer debloating (Flink's) sizes the
batches instead: each gate measures how many records per second its subtask takes and sets
:attr:`InputGate.batch_limit` so that everything its channels can hold drains in about the target time (1 s);
each credit byte carries the limit (as a power of two) back to the producer, and a local channel reads it from
the gate. The producer cuts its batches to it (:mod:`runtime.network.record_writer`).

>>> gate = InputGate([(0, 0), (0, 1)], capacity=8, debloat_target_s=1.0, max_batch=4096)
>>> gate.limit_for(500.0)  # records per second: 500 in flight over 2 channels x (4 + 8) batches
20
>>> gate.limit_for(10_000_000.0)  # a fast consumer keeps full batches
4096
>>> limit_of_credit(credit_byte(20)[0])  # carried as a power of two, rounded down
16
"""

from __future__ import annotations

import ctypes
import logging
import socket
import struct
import threading
import time
from collections import deque
from typing import Callable

import pyarrow as pa

from runtime.network.acceptor import Acceptor
from runtime.network.codec import RecordCodec
from runtime.protocol.events import EndOfInput, Event, event_from_metadata
from runtime.protocol.records import TimestampedBatch

__all__ = [
    "ChannelId",
    "Cancelled",
    "InputGate",
    "LocalChannel",
    "RemoteChannel",
    "DataServer",
]

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">4sIIII")  # magic, attempt, edge id, producer subtask, consumer subtask
_MAGIC = b"CHDY"
# Batches a remote channel may have sent that the consumer's gate has not taken yet; the gate then holds up
# to its capacity more, as a local channel's does.
CREDITS = 4
MIN_DEBLOATED_BATCH = 8  # records: below this the cost per batch would dominate
# Until the first measurement: small enough that a slow consumer's queues never fill with minutes of records
# before it is measured, large enough that a fast one loses nothing in the 0.2 s before its rate is known.
FIRST_DEBLOATED_BATCH = 32


def credit_byte(limit: int | None) -> bytes:
    """One credit announcing a batch limit of ``limit`` records (sent as the power of two at or below it), or
    none (0: debloating is off, the producer's own batch size holds)."""
    return _CREDIT_BYTES[0 if limit is None else min(255, max(1, int(limit).bit_length()))]


def limit_of_credit(value: int) -> int | None:
    return 1 << (value - 1) if value else None


_CREDIT_BYTES = [bytes([v]) for v in range(256)]


def _credit_sender(sock: socket.socket) -> Callable[[bytes], None]:
    """Sends one credit without letting go of the GIL. ``socket.send`` releases it, and getting it back from
    the consumer's busy operator thread takes a switch interval (5 ms): once per batch, that made the
    reader the bottleneck. The byte always fits (at most CREDITS are ever unread), so a non-blocking
    ``send(2)`` through ctypes.PyDLL, which keeps the GIL, returns at once; anything else falls back."""
    try:
        libc_send = ctypes.PyDLL(None).send
        libc_send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
        libc_send.restype = ctypes.c_ssize_t
        flags = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)
    except (AttributeError, OSError):  # no libc send(2) here
        return sock.sendall
    fd = sock.fileno()  # stays open while the reader holds its makefile(): close() from elsewhere defers to it

    def send_credit(credit: bytes) -> None:
        if libc_send(fd, credit, 1, flags) != 1:
            sock.sendall(credit)  # would block or failed: the ordinary way, which raises if it fails

    return send_credit


_BATCHES = (list, TimestampedBatch)  # what the gate counts as records (anything else is an event or Arrow)


class Cancelled(Exception):
    """The slot is being torn down; raised in threads blocked on a gate."""


ChannelId = tuple  # (edge id, producer subtask)


class InputGate:
    """The input channels of one consumer subtask; written by producers, read by the subtask's own thread."""

    def __init__(self, channels: list[ChannelId], capacity: int = 8, debloat_target_s: float | None = None,
                 max_batch: int = 4096, clock: Callable[[], float] = time.monotonic):
        self.channels = list(channels)
        self.index_of = {c: i for i, c in enumerate(self.channels)}
        self._queues = [deque() for _ in self.channels]
        self._capacity = capacity
        self._cond = threading.Condition()
        self._blocked = [False] * len(self.channels)
        self._next = 0
        self._closed = False
        # Buffer debloating: records per batch the producers should send (None: as large as they like).
        self.debloat_target_s = debloat_target_s
        self.max_batch = max_batch
        self.batch_limit: int | None = min(max_batch, FIRST_DEBLOATED_BATCH) if debloat_target_s else None
        self._window_start = 0.0
        self._window_records = 0
        self._window_polls = 0
        self._window_backlogged = 0  # polls that left records waiting in the channel
        self._rate = 0.0  # records per second taken by the subtask, smoothed
        self._clock = clock

    def __len__(self) -> int:
        return len(self.channels)

    def put(self, index: int, item) -> None:
        """Enqueue a list of records or an :class:`Event`; blocks while the channel's queue is full."""
        queue = self._queues[index]
        with self._cond:
            while len(queue) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                raise Cancelled()
            queue.append(item)
            self._cond.notify_all()

    def poll(self, timeout: float):
        """The next ``(channel index, item)`` from an unblocked channel, or None after ``timeout`` s."""
        queues, blocked = self._queues, self._blocked
        n = len(queues)
        with self._cond:
            for attempt in (0, 1):
                if self._closed:
                    raise Cancelled()
                start = self._next
                for offset in range(n):
                    i = (start + offset) % n
                    if queues[i] and not blocked[i]:
                        self._next = (i + 1) % n
                        item = queues[i].popleft()
                        self._cond.notify_all()
                        if self.debloat_target_s is not None and item.__class__ in _BATCHES:
                            self._measure(len(item), bool(queues[i]))
                        return i, item
                if attempt == 0:
                    self._cond.wait(timeout)
        return None

    DEBLOAT_WINDOW_S = 0.2

    def _measure(self, records: int, backlogged: bool) -> None:
        """Count records taken, and whether more were waiting; each window, fold its rate into the average and
        set the batch limit: sized to the rate when the subtask is what holds its producers back (records
        waited in its queues most of the time), none otherwise (nothing queues: full batches cost nothing)."""
        self._window_records += records
        self._window_polls += 1
        self._window_backlogged += backlogged
        now = self._clock()
        elapsed = now - self._window_start
        if elapsed < self.DEBLOAT_WINDOW_S:
            return
        rate = self._window_records / elapsed
        if self._window_start:  # the first window started with the gate, not with data
            self._rate = rate if not self._rate else 0.5 * self._rate + 0.5 * rate
            bottleneck = self._window_backlogged * 2 >= self._window_polls
            self.batch_limit = self.limit_for(self._rate) if bottleneck else None
        self._window_start, self._window_records = now, 0
        self._window_polls = self._window_backlogged = 0

    def limit_for(self, rate: float) -> int:
        """Records per batch that let everything the channels can hold (``CREDITS`` batches on the way and the
        queue's capacity, per channel) drain at ``rate`` in about the target time."""
        in_flight = rate * self.debloat_target_s
        batches = len(self._queues) * (CREDITS + self._capacity)
        return max(MIN_DEBLOATED_BATCH, min(self.max_batch, int(in_flight / batches)))

    def block(self, index: int) -> None:
        with self._cond:
            self._blocked[index] = True

    def unblock_all(self) -> None:
        with self._cond:
            self._blocked = [False] * len(self._blocked)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class LocalChannel:
    """Producer end of a channel to a consumer in the same slot: lists of records, never serialised."""

    def __init__(self, gate: InputGate, index: int):
        self.gate = gate
        self.index = index

    def send(self, records: list) -> None:
        self.gate.put(self.index, records)

    def send_event(self, event: Event) -> None:
        self.gate.put(self.index, event)

    @property
    def batch_limit(self) -> int | None:
        return self.gate.batch_limit

    def close(self) -> None:
        pass


def _connect(address: tuple[str, int], timeout: float) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class RemoteChannel:
    """Producer end of a channel to a consumer in another slot: an Arrow IPC stream over TCP."""

    def __init__(self, address: tuple[str, int], attempt: int, edge_id: int, producer: int, consumer: int,
                 codec: RecordCodec, connect_timeout: float = 60.0):
        self.codec = codec
        self.consumer = consumer
        self.sock = _connect(address, connect_timeout)
        self._credits = CREDITS
        self.batch_limit: int | None = None  # records per batch, as the consumer's last credit said
        self.file = self.sock.makefile("wb", buffering=1 << 16)
        self.file.write(_HEADER.pack(_MAGIC, attempt, edge_id, producer, consumer))
        self.writer = pa.ipc.new_stream(self.file, codec.schema)

    def _take_credit(self) -> None:
        if self._credits == 0:  # the consumer has CREDITS batches unread: wait until its gate takes one
            granted = self.sock.recv(256)
            if not granted:
                raise ConnectionError("the consumer closed the connection")
            self._credits = len(granted)
            self.batch_limit = limit_of_credit(granted[-1])
        self._credits -= 1

    def send(self, records: list) -> None:
        batch = self.codec.encode(records)
        try:
            self._take_credit()
            self.writer.write_batch(batch)
            self.file.flush()
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise ConnectionError(f"data connection to subtask {self.consumer} broke: {exc}") from exc

    def send_event(self, event: Event) -> None:
        try:
            self._take_credit()
            self.writer.write_batch(self.codec.empty, custom_metadata=event.to_metadata())
            self.file.flush()
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise ConnectionError(f"data connection to subtask {self.consumer} broke: {exc}") from exc

    def close(self) -> None:
        try:
            self.writer.close()
            self.file.flush()
            # Read the last credits before closing: a socket closed with unread input is reset, and a reset
            # can discard data the consumer has not read yet. The consumer closes after end-of-input.
            self.sock.shutdown(socket.SHUT_WR)
            while self.sock.recv(4096):
                pass
        except (OSError, ValueError, pa.ArrowException):
            pass
        finally:
            self.abort()

    def abort(self) -> None:
        """Tear the connection down without ending the stream (cancellation)."""
        for closer in (self.file.close, lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close):
            try:
                closer()
            except (OSError, ValueError):
                pass


class DataServer:
    """Accepts remote channels for the consumer subtasks of one slot and feeds their input gates.

    ``route(edge id, producer, consumer)`` returns ``(gate, channel index, codec)`` for a channel header.
    One reader thread per connection decodes batches and blocks on the gate when it is full.
    """

    def __init__(self, host: str, attempt: int, route: Callable, on_error: Callable[[BaseException], None]):
        self.attempt = attempt
        self.route = route
        self.on_error = on_error
        self._acceptor = Acceptor(host, self._read_loop, "chandy-read")
        self.address = self._acceptor.address

    @property
    def _closed(self) -> bool:
        return self._acceptor.closed

    def start(self) -> None:
        self._acceptor.start()

    def _read_loop(self, sock: socket.socket) -> None:
        producer = "?"
        try:
            file = sock.makefile("rb", buffering=1 << 16)
            header = file.read(_HEADER.size)
            if len(header) < _HEADER.size:
                raise ConnectionError("connection closed before its header")
            magic, attempt, edge_id, producer, consumer = _HEADER.unpack(header)
            if magic != _MAGIC or attempt != self.attempt:
                log.warning("Dropping data connection of attempt %s (expected %s)", attempt, self.attempt)
                return
            gate, index, codec = self.route(edge_id, producer, consumer)
            reader = pa.ipc.open_stream(file)
            send_credit = _credit_sender(sock)
            while True:
                try:
                    batch, metadata = reader.read_next_batch_with_custom_metadata()
                except StopIteration:
                    raise ConnectionError("stream ended without end-of-input") from None
                event = event_from_metadata(metadata)
                gate.put(index, event if event is not None else codec.decode(batch))
                if type(event) is EndOfInput:
                    break
                send_credit(credit_byte(gate.batch_limit))
        except Cancelled:
            pass
        except BaseException as exc:  # a broken peer or a corrupt stream fails the slot
            if not self._closed:
                self.on_error(ConnectionError(f"data connection from subtask {producer} broke: "
                                              f"{type(exc).__name__}: {exc}"))
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        self._acceptor.close()

    def join(self, timeout: float) -> None:
        self._acceptor.join(timeout)
