"""Remote channels: credit-based flow control bounds the batches in flight, and nothing is lost on close."""

import threading

from runtime.network.channels import CREDITS, DataServer, InputGate, RemoteChannel
from runtime.network.codec import RecordCodec
from runtime.protocol.events import END_OF_INPUT

CAPACITY = 3
BATCHES = 200  # small batches: without credits the socket buffers would take them all at once


def _connected_pair(errors):
    gate = InputGate([(0, 0)], capacity=CAPACITY)
    codec = RecordCodec(None)
    server = DataServer("127.0.0.1", 0, lambda edge, producer, consumer: (gate, 0, codec), errors.append)
    server.start()
    return gate, server, RemoteChannel(server.address, 0, 0, 0, 0, codec, connect_timeout=10)


def test_a_producer_runs_at_most_gate_capacity_plus_credits_ahead_and_loses_nothing_on_close():
    errors = []
    gate, server, channel = _connected_pair(errors)
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
        # Nobody polls the gate: the producer must stop once the gate is full and its credits are spent
        # (a negative check, so it needs a bounded wait).
        producer.join(timeout=1.0)
        assert producer.is_alive()
        assert len(sent) == CAPACITY + CREDITS

        received = []
        while (item := gate.poll(timeout=10)) is not None:
            _, value = item
            if value is END_OF_INPUT:
                break
            received.extend(value)
        producer.join(timeout=10)
        assert not producer.is_alive()
        assert received == list(range(BATCHES)) and not errors
    finally:
        server.close()
        channel.abort()
