"""The driver's end of the control protocol for one job attempt.

Slots connect and ``Register``; when every slot has registered the server answers all of them with the
full address map (the rendezvous). Afterwards it delivers what slots say: checkpoint messages straight to
the checkpoint coordinator's inbox, everything else (``SlotFailed``, ``SlotFinished``, a lost connection) to
the job master's event queue; and it broadcasts what the driver says to every slot.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from runtime.errors import ProtocolError
from runtime.ids import Attempt, SlotIndex
from runtime.network.acceptor import Acceptor
from runtime.network.security import ConnectionSecurity
from runtime.protocol.messages import (
    Addresses,
    Cancel,
    CheckpointMessage,
    Heartbeat,
    Message,
    MetricsReport,
    QueryableStateMessage,
    Register,
    SlotFinished,
)
from runtime.protocol.wire import ConnectionClosed, MessageSocket

__all__ = ["ControlServer", "SlotDisconnected", "SlotUnresponsive"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotUnresponsive:
    """A registered slot sent nothing (not even a heartbeat) for ``silent_s`` seconds, more than the timeout."""

    attempt: Attempt
    slot: SlotIndex
    silent_s: float
    timeout_s: float


@dataclass(frozen=True)
class SlotDisconnected:
    """A slot's control connection closed before it reported finishing."""

    attempt: Attempt
    slot: SlotIndex


class ControlServer:
    def __init__(self, host: str, attempt: Attempt, slots: int, events: queue.Queue, security: ConnectionSecurity,
                 checkpoint_inbox: queue.Queue | None = None, on_metrics=None, on_all_registered=None,
                 on_queryable_state=None):
        self.attempt = attempt
        self.on_metrics = on_metrics  # takes each MetricsReport, on the slot's serving thread; must be quick
        # Takes each QueryableStateMessage (declarations, answers to lookups), on the serving thread; quick too.
        self.on_queryable_state = on_queryable_state
        # Called once every slot registered (state restored, data server up), before they learn each other's
        # addresses: so before any record flows.
        self.on_all_registered = on_all_registered
        self.slots = slots
        self.events = events
        self.checkpoint_inbox = checkpoint_inbox
        self.registrations: dict[int, Register] = {}
        self._sockets: dict[int, MessageSocket] = {}
        self._finished: set[int] = set()
        self._rendezvous_done = False
        self._cancel: Cancel | None = None  # once the attempt is cancelled: every slot that registers gets it
        self._last_heard: dict[int, float] = {}  # slot -> monotonic time of its last message
        self._lock = threading.Lock()
        self._acceptor = Acceptor(host, self._serve, "chandy-control-conn", security, "control",
                                  f"the control server of attempt {attempt}", backlog=max(16, slots * 2))
        self.address = self._acceptor.address
        self._acceptor.start()

    @property
    def _closed(self) -> bool:
        return self._acceptor.closed

    def _serve(self, stream, peer: str) -> None:
        conn = MessageSocket(stream, f"the slot at {peer}")
        slot = None
        try:
            while True:
                message = conn.receive()
                if message.attempt != self.attempt:
                    continue
                if slot is not None:
                    self._last_heard[slot] = time.monotonic()
                if isinstance(message, Heartbeat):
                    continue
                if isinstance(message, MetricsReport):
                    if self.on_metrics is not None:
                        self._take_metrics(message)
                    continue
                if isinstance(message, Register):
                    if not 0 <= message.slot < self.slots:
                        raise ProtocolError(f"the slot at {peer} registered as slot {message.slot}, but attempt "
                                            f"{self.attempt} has slots 0..{self.slots - 1}")
                    slot = message.slot
                    conn.peer = f"slot {slot} at {peer}"
                    self._register(message, conn)
                elif isinstance(message, CheckpointMessage):
                    if self.checkpoint_inbox is not None:  # None: checkpointing is off, nobody listens
                        self.checkpoint_inbox.put(message)
                elif isinstance(message, QueryableStateMessage):
                    if self.on_queryable_state is not None:
                        self.on_queryable_state(message)
                else:
                    if isinstance(message, SlotFinished):
                        with self._lock:
                            self._finished.add(message.slot)
                    self.events.put(message)
        except (ConnectionClosed, OSError, EOFError):
            pass
        except ProtocolError as exc:  # an authenticated peer that breaks the protocol: a bug, or another version
            log.error("Control connection of attempt %d closed: %s", self.attempt, exc)
        finally:
            conn.close()
            with self._lock:
                finished = slot in self._finished
            if slot is not None and not finished and not self._closed:
                self.events.put(SlotDisconnected(self.attempt, slot))

    def _take_metrics(self, report: MetricsReport) -> None:
        try:
            self.on_metrics(report)
        except Exception:  # metrics are for people: a bug there must never end a slot's connection
            log.exception("a metrics report of slot %d could not be taken", report.slot)

    def _register(self, message: Register, conn: MessageSocket) -> None:
        with self._lock:
            self.registrations[message.slot] = message
            self._sockets[message.slot] = conn
            self._last_heard[message.slot] = time.monotonic()
            complete = len(self.registrations) == self.slots
            cancel = self._cancel
        if cancel is not None:  # a slot that starts after the cancel must not wait for the others
            try:
                conn.send(cancel)
            except OSError:
                pass
            return
        log.debug("slot %d registered at %s:%d (pid %d)", message.slot, message.host, message.port, message.pid)
        if complete:
            if self.on_all_registered is not None:
                self.on_all_registered()
            addresses = tuple((self.registrations[s].host, self.registrations[s].port) for s in range(self.slots))
            self.broadcast(Addresses(self.attempt, addresses))
            self._rendezvous_done = True  # only now: a trigger sent earlier would reach a slot still registering

    @property
    def all_registered(self) -> bool:
        """Every slot registered and has every address: messages broadcast from now on reach every slot, after
        the addresses."""
        return self._rendezvous_done

    def wait_until_all_disconnected(self, timeout: float) -> bool:
        """Wait for every slot's connection to close: slots close it last, after all their other sockets."""
        deadline = time.monotonic() + timeout
        for thread in list(self._acceptor.threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._acceptor.threads)

    def finished_slots(self) -> frozenset[int]:
        """Slots that reported finishing (their control connection closes without a :class:`SlotDisconnected`)."""
        with self._lock:
            return frozenset(self._finished)

    def unresponsive(self, timeout_s: float) -> list[SlotUnresponsive]:
        """Registered slots that have not finished and have said nothing for longer than ``timeout_s``."""
        now = time.monotonic()
        with self._lock:
            heard = {slot: at for slot, at in self._last_heard.items() if slot not in self._finished}
        return [SlotUnresponsive(self.attempt, SlotIndex(slot), round(now - at, 1), timeout_s)
                for slot, at in sorted(heard.items()) if now - at > timeout_s]

    def send_to(self, slot: int, message: Message) -> None:
        """Send ``message`` to slot ``slot``; OSError when it is not connected."""
        with self._lock:
            conn = self._sockets.get(slot)
        if conn is None:
            raise OSError(f"slot {slot} is not connected")
        conn.send(message)

    def broadcast(self, message: Message) -> None:
        with self._lock:
            sockets = list(self._sockets.values())
        for conn in sockets:
            try:
                conn.send(message)
            except OSError:
                pass  # that slot is gone already; its loss is reported by its serving thread

    def cancel(self, message: Cancel) -> None:
        """Tell every slot to stop, also those that register from now on (Spark starts them late, or not at
        all, after cancelling the stage: a slot waiting for the others' addresses would wait for minutes)."""
        with self._lock:
            self._cancel = message
        self.broadcast(message)

    def close(self) -> None:
        self._acceptor.close()
