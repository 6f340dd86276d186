"""The data plane: input gates, and channels between subtasks (in memory within a slot, Arrow IPC over TCP
between slots).

A channel links one producer subtask to one consumer subtask of an edge. Each consumer subtask has one
:class:`InputGate` holding a small bounded queue per input channel: a full queue blocks its producer (for a
remote channel: its reader thread stops granting credits, and the sender runs out of them), which is all
the backpressure there is. The consumer reads channels round-robin and can leave a channel unread
(``block``) while others catch up, which is what barrier alignment needs.

A remote channel is one TCP connection (authenticated first, :mod:`runtime.network.security`, and in TLS when the
job encrypts) carrying a fixed header, then one Arrow IPC stream; back the other way, one byte per batch the
consumer's subtask took from its gate, a credit for the producer to send another (Flink's credit-based flow
control, counted in batches). The reader thread never blocks: what it puts in the
gate was credited, so a remote channel's queue holds at most ``CREDITS`` batches, and a barrier that overtakes
them (unaligned checkpoints) is read as soon as it was sent. Without credits the operating system's socket buffers
(megabytes, autotuned) held the in-flight data, and under backpressure a barrier waited behind all of it:
alignment took 100-200 ms per checkpoint and the producer whose barrier came first stalled meanwhile.

Credits bound the batches in flight, not the records: a channel holds up to ``CREDITS`` batches on the way
or in its queue (a local channel the gate's capacity), and behind a slow consumer each batch is full (up to the
job's batch size, 4,096 records), so a barrier could wait minutes behind them. Buffer debloating (Flink's) sizes the
batches instead: each gate measures how many records per second its subtask takes and sets
:attr:`InputGate.batch_limit` so that everything its channels can hold drains in about the target time (1 s);
each credit byte carries the limit (as a power of two) back to the producer, and a local channel reads it from
the gate. The producer cuts its batches to it (:mod:`runtime.network.record_writer`).

>>> gate = InputGate([(0, 0), (0, 1)], capacity=8, debloat_target_s=1.0, max_batch=4096)
>>> gate.limit_for(500.0)  # records per second: 500 in flight over 2 channels x 12 batches
20
>>> gate.limit_for(10_000_000.0)  # a fast consumer keeps full batches
4096
>>> limit_of_credit(credit_byte(20)[0])  # carried as a power of two, rounded down
16
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from collections import deque
from typing import Callable

import pyarrow as pa

from runtime.errors import ProtocolError
from runtime.network.acceptor import Acceptor
from runtime.network.codec import RecordCodec
from runtime.protocol.gil_send import send_keeping_gil
from runtime.network.in_flight import InFlightRecorder
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsStream
from runtime.network.wait_timer import WaitTimer
from runtime.protocol.events import CheckpointBarrier, EndOfInput, Event, event_from_metadata
from runtime.protocol.records import TimestampedBatch, count_records

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
# Batches a remote channel may have sent that the consumer's subtask has not taken from its gate yet (on the
# wire or queued); a local channel's queue holds the gate's capacity.
CREDITS = 12
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


def _credit_sender(stream) -> Callable[[bytes], None]:
    """Sends one credit without letting go of the GIL (it is sent by the consumer's subtask thread, under its
    gate's lock; see :mod:`runtime.protocol.gil_send`). A connection that cannot take a credit is broken for its
    reader too (shut down), which reports it: its producer would otherwise wait for credits forever."""
    send = stream.sendall if isinstance(stream, TlsStream) else send_keeping_gil(stream)  # TLS's sends keep it too

    def send_credit(credit: bytes) -> None:
        try:
            send(credit)
        except OSError:
            try:
                stream.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            raise
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
        # Unaligned checkpoints: barriers that overtake the queues (channel index, barrier), how many items each
        # overtook on its channel (by channel: (checkpoint id, count)), and the recorder of the checkpoint
        # whose in-flight records are being recorded.
        self._priority: deque = deque()
        self._overtaken: dict[int, tuple[int, int]] = {}
        self._recorder: InFlightRecorder | None = None
        self.announced: CheckpointBarrier | None = None  # the newest barrier put in order (the aligned timeout)
        self._credit_senders: list[Callable[[bytes], None] | None] = [None] * len(self.channels)
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
        # Metrics (runtime.executor.metrics), each written by one thread: records taken per channel and seconds
        # the subtask waited for input (its thread), Arrow bytes arrived (the channel's reader), seconds a local
        # producer waited for room in a full queue (the producer's thread).
        self.records_in = [0] * len(self.channels)
        self.bytes_in = [0] * len(self.channels)
        self._put_waits = [WaitTimer() for _ in self.channels]
        self.idle = WaitTimer()  # the subtask waiting for input

    def __len__(self) -> int:
        return len(self.channels)

    def put(self, index: int, item, block: bool = True) -> None:
        """Enqueue a list of records or an :class:`Event`; blocks while the channel's queue is full, unless
        ``block`` is false (a remote channel, whose credits bound its queue; unaligned checkpoints' overdraft)."""
        queue = self._queues[index]
        with self._cond:
            if block and len(queue) >= self._capacity and not self._closed:
                waits = self._put_waits[index]
                waits.start()
                while len(queue) >= self._capacity and not self._closed:
                    self._cond.wait()
                waits.stop()
            if self._closed:
                raise Cancelled()
            recorder = self._recorder
            if recorder is not None and index in recorder.open:
                recorder.on_put(index, item)
            if item.__class__ is CheckpointBarrier and (self.announced is None
                                                        or item.checkpoint_id > self.announced.checkpoint_id):
                self.announced = item
            queue.append(item)
            self._cond.notify_all()

    def put_priority(self, index: int, barrier: CheckpointBarrier) -> None:
        """Enqueue the barrier of an unaligned checkpoint ahead of everything queued (it is polled first);
        what it overtook on its channel is channel state, counted here and recorded when the subtask snapshots
        (nothing leaves any queue before the subtask has polled it)."""
        with self._cond:
            if self._closed:
                raise Cancelled()
            recorder = self._recorder
            if recorder is not None and barrier.checkpoint_id >= recorder.checkpoint_id:
                recorder.close(index)
            self._overtaken[index] = (barrier.checkpoint_id, len(self._queues[index]))
            self._priority.append((index, barrier))
            self._cond.notify_all()

    def has_priority(self) -> bool:
        """Whether a barrier overtook the queues (read without the lock: a deque's truth is atomic)."""
        return bool(self._priority)

    def poll_priority(self):
        """The next ``(channel index, barrier)`` that overtook the queues, or None; never waits."""
        with self._cond:
            if self._closed:
                raise Cancelled()
            return self._priority.popleft() if self._priority else None

    def record_in_flight(self, checkpoint_id: int, done: set[int], leftover: tuple[int, list] | None = None
                         ) -> InFlightRecorder:
        """Start recording the channel state of unaligned checkpoint ``checkpoint_id``, the subtask's snapshot
        being taken now: per channel, what is queued ahead of its barrier (what its priority barrier overtook),
        and from now on what is put before its barrier. ``done``: channels with nothing to record (their
        barrier or their end was processed already). ``leftover``: ``(channel, records)`` the subtask took
        from the gate but has not processed (it snapshots between two slices of a batch): recorded first."""
        recorder = InFlightRecorder(checkpoint_id, len(self._queues))
        if leftover is not None:
            recorder.capture(leftover[0], [leftover[1]], limit=1)
        with self._cond:
            for index, queue in enumerate(self._queues):
                if index in done:
                    continue
                overtaken = self._overtaken.get(index)
                if overtaken is not None and overtaken[0] >= checkpoint_id:
                    recorder.capture(index, queue, limit=overtaken[1])
                else:
                    recorder.capture(index, queue)
            self._recorder = recorder if recorder.open else None
        return recorder

    def stop_recording(self) -> None:
        with self._cond:
            self._recorder = None

    def put_blocked_s(self, index: int) -> float:
        """Seconds a producer waited for room in channel ``index``'s queue, a wait going on included."""
        return self._put_waits[index].seconds()

    def usage(self, index: int | None = None) -> float:
        """How full channel ``index``'s queue is, or all of them together (0..1; a read without the lock)."""
        if index is not None:
            return min(1.0, len(self._queues[index]) / self._capacity)
        return min(1.0, sum(len(q) for q in self._queues) / (self._capacity * len(self._queues)))

    def has_room(self, index: int) -> bool:
        return len(self._queues[index]) < self._capacity

    def wait_room(self, index: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for room in channel ``index``'s queue (a producer's output availability)."""
        with self._cond:
            if len(self._queues[index]) >= self._capacity and not self._closed:
                self._cond.wait(timeout)
            return len(self._queues[index]) < self._capacity

    def attach_credits(self, index: int, send_credit: Callable[[bytes], None] | None) -> None:
        """Channel ``index`` is remote: each item its subtask takes returns a credit through ``send_credit``
        (None: the connection is closing, no more credits)."""
        with self._cond:
            self._credit_senders[index] = send_credit

    def poll(self, timeout: float):
        """The next ``(channel index, item)`` from an unblocked channel, or None after ``timeout`` s."""
        queues, blocked = self._queues, self._blocked
        n = len(queues)
        with self._cond:
            for attempt in (0, 1):
                if self._closed:
                    raise Cancelled()
                if self._priority:
                    return self._priority.popleft()
                start = self._next
                for offset in range(n):
                    i = (start + offset) % n
                    if queues[i] and not blocked[i]:
                        self._next = (i + 1) % n
                        item = queues[i].popleft()
                        self._cond.notify_all()
                        if item.__class__ in _BATCHES:
                            self.records_in[i] += count_records(item)
                            if self.debloat_target_s is not None:
                                self._measure(len(item), bool(queues[i]))
                        send_credit = self._credit_senders[i]
                        if send_credit is not None and item.__class__ is not EndOfInput:
                            try:
                                send_credit(credit_byte(self.batch_limit))
                            except OSError:  # the connection broke: its reader reports it, naming the producer
                                self._credit_senders[i] = None
                        return i, item
                if attempt == 0:
                    self.idle.start()
                    self._cond.wait(timeout)
                    self.idle.stop()
        return None

    DEBLOAT_WINDOW_S = 0.2
    # The first window is short: until it ends, producers send FIRST_DEBLOATED_BATCH records a batch, which a fast
    # subtask takes at a fraction of its rate. Over a 0.2 s first window a paced source fell that far behind,
    # then caught up in full batches that filled every queue: records waited 141-242 ms about 0.4 s after the
    # start in 4 of 26 runs at 500k records/s, in none with debloating off.
    FIRST_DEBLOAT_WINDOW_S = 0.02

    def _measure(self, records: int, backlogged: bool) -> None:
        """Count records taken, and whether more were waiting; each window, fold its rate into the average and
        set the batch limit: sized to the rate when the subtask is what holds its producers back (records
        waited in its queues most of the time), none otherwise (nothing queues: full batches cost nothing)."""
        self._window_records += records
        self._window_polls += 1
        self._window_backlogged += backlogged
        now = self._clock()
        elapsed = now - self._window_start
        if elapsed < (self.DEBLOAT_WINDOW_S if self._rate else self.FIRST_DEBLOAT_WINDOW_S):
            return
        rate = self._window_records / elapsed
        if self._window_start:  # the first window started with the gate, not with data
            self._rate = rate if not self._rate else 0.5 * self._rate + 0.5 * rate
            bottleneck = self._window_backlogged * 2 >= self._window_polls
            self.batch_limit = self.limit_for(self._rate) if bottleneck else None
        self._window_start, self._window_records = now, 0
        self._window_polls = self._window_backlogged = 0

    def limit_for(self, rate: float) -> int:
        """Records per batch that let everything the channels can hold (``CREDITS`` batches per channel, on the
        way or queued) drain at ``rate`` in about the target time."""
        in_flight = rate * self.debloat_target_s
        batches = len(self._queues) * max(CREDITS, self._capacity)
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

    def wake(self) -> None:
        """End the subtask's wait in :meth:`poll` now (it returns None): it has something else to do."""
        with self._cond:
            self._cond.notify_all()


class LocalChannel:
    """Producer end of a channel to a consumer in the same slot: lists of records, never serialised."""

    def __init__(self, gate: InputGate, index: int):
        self.gate = gate
        self.index = index
        self.records_sent = 0
        self.bytes_sent = 0  # never serialised
        # Unaligned checkpoints: sends never wait (a subtask is never stuck inside an emit when a barrier
        # overtakes its input); the subtask waits for room before it takes more input instead (available()).
        self.overdraft = False

    def send(self, records: list) -> None:
        self.records_sent += count_records(records)
        self.gate.put(self.index, records, not self.overdraft)

    @property
    def blocked_s(self) -> float:
        return self.gate.put_blocked_s(self.index)

    @property
    def usage(self) -> float:
        """How full the consumer's queue of this channel is (0..1)."""
        return self.gate.usage(self.index)

    def send_event(self, event: Event) -> None:
        if event.__class__ is CheckpointBarrier and event.unaligned:
            self.gate.put_priority(self.index, event)
        else:
            self.gate.put(self.index, event, not self.overdraft)

    def available(self) -> bool:
        return self.gate.has_room(self.index)

    def wait_available(self, timeout: float) -> bool:
        return self.gate.wait_room(self.index, timeout)

    @property
    def batch_limit(self) -> int | None:
        return self.gate.batch_limit

    def close(self) -> None:
        pass


class RemoteChannel:
    """Producer end of a channel to a consumer in another slot: an Arrow IPC stream over TCP."""

    def __init__(self, address: tuple[str, int], security: ConnectionSecurity, attempt: int, edge_id: int,
                 producer: int, consumer: int, codec: RecordCodec, connect_timeout: float = 60.0):
        self.codec = codec
        self.consumer = consumer
        self.sock = security.connect(address, "data", connect_timeout)
        self._credits = CREDITS  # below zero after an overdraft
        self.records_sent = 0
        self.bytes_sent = 0
        self._credit_waits = WaitTimer()
        self.batch_limit: int | None = None  # records per batch, as the consumer's last credit said
        self.overdraft = False  # unaligned checkpoints: send without waiting for credits (see LocalChannel)
        self._poller = None
        self.file = self.sock.makefile("wb", buffering=1 << 16)
        self.file.write(_HEADER.pack(_MAGIC, attempt, edge_id, producer, consumer))
        self.writer = pa.ipc.new_stream(self.file, codec.schema)

    def _read_credits(self, block: bool) -> None:
        try:
            granted = self.sock.recv(256, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if not granted:
            raise ConnectionError("the consumer closed the connection")
        self._credits += len(granted)
        self.batch_limit = limit_of_credit(granted[-1])

    def _take_credit(self) -> None:
        if self._credits <= 0:
            if self.overdraft:
                self._read_credits(block=False)
            if self._credits <= 0 and not self.overdraft:  # wait until the consumer takes a batch
                self._credit_waits.start()
                try:
                    while self._credits <= 0:
                        self._read_credits(block=True)
                finally:
                    self._credit_waits.stop()
        self._credits -= 1

    def available(self) -> bool:
        if self._credits <= 0:
            try:
                self._read_credits(block=False)
            except OSError as exc:
                raise ConnectionError(f"data connection to subtask {self.consumer} broke: {exc}") from exc
        return self._credits > 0

    @property
    def blocked_s(self) -> float:
        """Seconds spent waiting for the consumer's credits, a wait going on included."""
        return self._credit_waits.seconds()

    @property
    def usage(self) -> float:
        """Credits in use: batches sent that the consumer has not taken yet (0..1; over 1 in an overdraft)."""
        return min(1.0, (CREDITS - self._credits) / CREDITS)

    def wait_available(self, timeout: float) -> bool:
        if not self.available():
            if self._poller is None:  # poll(2): select(2) fails on descriptors above 1023
                self._poller = select.poll()
                self._poller.register(self.sock, select.POLLIN)
            self._poller.poll(timeout * 1000.0)
        return self.available()

    def send(self, records: list) -> None:
        batch = self.codec.encode(records)
        try:
            self._take_credit()
            self.writer.write_batch(batch)
            self.file.flush()
            self.records_sent += count_records(records)
            self.bytes_sent += batch.nbytes
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise ConnectionError(f"data connection to subtask {self.consumer} broke: {exc}") from exc

    def send_event(self, event: Event) -> None:
        try:
            if not (event.__class__ is CheckpointBarrier and event.unaligned):  # a priority event needs none
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
        # Shut down first: a send blocked on a full socket (or holding a TLS stream's write lock) fails at once,
        # and closing the file then cannot wait behind it.
        for closer in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.file.close, self.sock.close):
            try:
                closer()
            except (OSError, ValueError):
                pass


class DataServer:
    """Accepts remote channels for the consumer subtasks of one slot and feeds their input gates.

    Every connection is authenticated first (:class:`~runtime.network.acceptor.Acceptor`); only then is its header
    read. ``route(edge id, producer, consumer, peer)`` returns ``(gate, channel index, codec)`` for a header, or
    raises ProtocolError naming the peer. One reader thread per connection decodes batches into the gate; it never
    waits there (what it puts was credited). The consumer's subtask thread returns the credits as it takes the
    batches.
    """

    def __init__(self, host: str, attempt: int, security: ConnectionSecurity, slot: int, route: Callable,
                 on_error: Callable[[BaseException], None]):
        self.attempt = attempt
        self.route = route
        self.on_error = on_error
        self._acceptor = Acceptor(host, self._read_loop, "chandy-read", security, "data",
                                  f"the data server of slot {slot} (attempt {attempt})")
        self.address = self._acceptor.address

    @property
    def _closed(self) -> bool:
        return self._acceptor.closed

    def start(self) -> None:
        self._acceptor.start()

    def _read_loop(self, stream, peer: str) -> None:
        producer = f"the slot at {peer}"
        gate = index = None
        try:
            file = stream.makefile("rb", buffering=1 << 16)
            header = file.read(_HEADER.size)
            if len(header) < _HEADER.size:
                raise ConnectionError("connection closed before its header")
            magic, attempt, edge_id, subtask, consumer = _HEADER.unpack(header)
            if magic != _MAGIC or attempt != self.attempt:  # authenticated for this attempt: a bug, or a version
                raise ProtocolError(f"the data connection from {peer} opened with {header!r}, not a channel "
                                    f"header of attempt {self.attempt}")
            gate, index, codec = self.route(edge_id, subtask, consumer, peer)
            producer = f"subtask {subtask} at {peer}"
            try:
                reader = pa.ipc.open_stream(file)
            except pa.ArrowInvalid as exc:
                raise ProtocolError(f"the data connection from {producer} carries no Arrow stream: {exc}") from None
            gate.attach_credits(index, _credit_sender(stream))
            while True:
                try:
                    batch, metadata = reader.read_next_batch_with_custom_metadata()
                except StopIteration:
                    raise ConnectionError("stream ended without end-of-input") from None
                event = event_from_metadata(metadata)
                if event is None:
                    gate.bytes_in[index] += batch.nbytes
                    gate.put(index, codec.decode(batch), block=False)  # credited: the queue has room for it
                elif event.__class__ is CheckpointBarrier and event.unaligned:
                    gate.put_priority(index, event)
                else:
                    gate.put(index, event, block=False)
                    if event.__class__ is EndOfInput:
                        break
        except Cancelled:
            pass
        except ProtocolError as exc:  # the peer is the job's own: a bug or another version, which a restart repeats
            if not self._closed:
                self.on_error(exc)
        except BaseException as exc:  # a broken peer or a corrupt stream fails the slot
            if not self._closed:
                self.on_error(ConnectionError(f"data connection from {producer} broke: "
                                              f"{type(exc).__name__}: {exc}"))
        finally:
            if gate is not None:  # no credit may go to a closed socket (its descriptor may be reused)
                gate.attach_credits(index, None)
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        self._acceptor.close()

    def join(self, timeout: float) -> None:
        self._acceptor.join(timeout)
