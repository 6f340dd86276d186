"""Remote channels: credit-based flow control bounds the batches in flight, and nothing is lost on close."""

import select
import threading

from runtime.network.channels import CREDITS, DataServer, InputGate, RemoteChannel
from runtime.network.codec import RecordCodec
from runtime.protocol.events import END_OF_INPUT

CAPACITY = 3
BATCHES = 200  # small batches: without credits the socket buffers would take them all at once


class BlockedProducerSpy:
    """Stands in for the producer's socket: says when the producer waits for a credit that cannot come (its
    credits are all queued in the gate, which nobody polls, so no credit is readable)."""

    def __init__(self, sock, gate: InputGate):
        self.sock = sock
        self.gate = gate
        self.blocked = threading.Event()

    def recv(self, n, flags=0):
        if flags:  # a look without waiting
            return self.sock.recv(n, flags)
        # Wait for a credit the way recv would, but keep looking: the gate may fill while the producer waits.
        while not select.select([self.sock], [], [], 0.01)[0]:
            if len(self.gate._queues[0]) >= CREDITS:
                self.blocked.set()
        return self.sock.recv(n)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def _connected_pair(errors, security):
    gate = InputGate([(0, 0)], capacity=CAPACITY)
    codec = RecordCodec(None)
    server = DataServer("127.0.0.1", 0, security, 0, lambda edge, producer, consumer, peer: (gate, 0, codec),
                        errors.append)
    server.start()
    return gate, server, RemoteChannel(server.address, security, 0, 0, 0, 0, codec, connect_timeout=10)


def test_a_producer_runs_at_most_its_credits_ahead_and_loses_nothing_on_close(connection_security):
    errors = []
    gate, server, channel = _connected_pair(errors, connection_security)
    spy = channel.sock = BlockedProducerSpy(channel.sock, gate)
    sent = []

    def produce():
        for i in range(BATCHES):
            channel.send([i])
            sent.append(i)
        channel.send_event(END_OF_INPUT)
        channel.close()

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        # Nobody polls the gate: no credit comes back, and the producer blocks with all its credits queued (the
        # reader puts what was credited without waiting, beyond the capacity a local channel has).
        assert spy.blocked.wait(timeout=60), "the producer never blocked"
        assert len(sent) == CREDITS and len(gate._queues[0]) == CREDITS
        received = []
        while (item := gate.poll(timeout=60)) is not None:
            _, value = item
            if value is END_OF_INPUT:
                break
            received.extend(value)
        producer.join(timeout=60)
        assert received == list(range(BATCHES)) and not errors
    finally:
        server.close()
        channel.abort()


def test_the_gate_holds_at_most_its_capacity_per_channel():
    gate = InputGate([(0, 0)], capacity=CAPACITY)
    for i in range(CAPACITY):
        gate.put(0, [i])
    blocked = threading.Event()
    done = threading.Event()

    def put_one_more():
        blocked.set()
        gate.put(0, [CAPACITY])  # waits until the consumer takes one
        done.set()

    threading.Thread(target=put_one_more, daemon=True).start()
    assert blocked.wait(timeout=60)
    assert gate.poll(timeout=60) == (0, [0])
    assert done.wait(timeout=60)
    assert [gate.poll(timeout=60)[1] for _ in range(CAPACITY)] == [[1], [2], [CAPACITY]]
