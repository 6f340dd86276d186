"""Buffer debloating: a gate sizes its producers' batches from the rate its subtask takes records, credits carry
the size to remote producers, and writers cut their buffers to it."""

import socket
import threading

from runtime.graph.job_graph import ChainEdge, Partitioner
from runtime.network.security import ConnectionSecurity
from runtime.network.channels import CREDITS, InputGate, RemoteChannel, credit_byte, limit_of_credit
from runtime.network.codec import codec_for
from runtime.network.record_writer import EdgeWriter
from runtime.protocol.records import TimestampedBatch


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_slow_subtask_gets_small_batches_and_a_fast_one_full_ones():
    clock = Clock()
    gate = InputGate([(0, 0), (0, 1)], capacity=8, debloat_target_s=1.0, max_batch=4096, clock=clock)
    assert gate.batch_limit == 32, "small batches until the first measurement"
    gate.put(0, list(range(100)))
    for _ in range(40):  # 100 records every 0.25 s: 400 records/s, with more waiting each time
        gate.put(0, list(range(100)))
        assert gate.poll(0)[1]
        clock.now += 0.25
    assert gate.batch_limit == 400 // (2 * max(CREDITS, 8))
    gate.poll(0)
    for _ in range(40):  # then 4,000 records every 10 ms, still backlogged: full batches again
        gate.put(1, list(range(4000)))
        gate.put(1, list(range(4000)))
        gate.poll(0)
        gate.poll(0)
        clock.now += 0.01
    assert gate.batch_limit == 4096


def test_the_first_measurement_ends_the_small_batches_within_tens_of_milliseconds():
    """Small first batches hold a fast subtask back: they last one short window, not a full one."""
    clock = Clock()
    gate = InputGate([(0, 0), (0, 1)], capacity=8, debloat_target_s=1.0, max_batch=4096, clock=clock)
    gate.put(0, list(range(32)))
    for _ in range(12):  # 32 records every 5 ms (6,400 records/s), with more waiting each time
        gate.put(0, list(range(32)))
        gate.poll(0)
        clock.now += 0.005
    assert clock.now <= 0.06 and gate.batch_limit == 6400 // (2 * max(CREDITS, 8)), gate.batch_limit
    limit = gate.batch_limit
    for _ in range(10):  # the same rate for 50 ms more: within the next (full) window, the limit holds
        gate.put(0, list(range(32)))
        gate.poll(0)
        clock.now += 0.005
    assert gate.batch_limit == limit


def test_a_subtask_that_keeps_up_sets_no_limit():
    clock = Clock()
    gate = InputGate([(0, 0)], capacity=8, debloat_target_s=1.0, max_batch=4096, clock=clock)
    for _ in range(40):  # 10 records every 0.25 s, and nothing waiting: the producer is what is slow
        gate.put(0, list(range(10)))
        gate.poll(0)
        clock.now += 0.25
    assert gate.batch_limit is None


def test_without_a_target_nothing_is_measured():
    gate = InputGate([(0, 0)], capacity=8)
    gate.put(0, [1, 2, 3])
    gate.poll(0)
    assert gate.batch_limit is None


def test_credits_carry_the_limit_as_a_power_of_two():
    assert [limit_of_credit(credit_byte(n)[0]) for n in (1, 8, 20, 4096, 5000)] == [1, 8, 16, 4096, 4096]
    assert limit_of_credit(credit_byte(None)[0]) is None, "debloating off: the producer keeps its batch size"


class Collected:
    def __init__(self, limit):
        self.batch_limit, self.batches = limit, []

    def send(self, records):
        self.batches.append(records)


def test_the_writer_cuts_buffers_to_the_channel_limit_keeping_timestamps():
    edge = ChainEdge(0, 0, 1, Partitioner("forward"), None, 1, 1)
    channel = Collected(limit=16)
    writer = EdgeWriter(edge, 0, {0: channel}, batch_size=4096, max_parallelism=128)
    writer.emit(TimestampedBatch.of(list(range(40)), list(range(100, 140))))
    writer.flush()
    assert [len(b) for b in channel.batches] == [16, 16, 8]
    assert [r for b in channel.batches for r in b] == list(range(40))
    assert [t for b in channel.batches for t in b.timestamps] == list(range(100, 140))
    channel.batch_limit = None  # the consumer stopped asking: one batch again
    writer.emit(list(range(40)))
    writer.flush()
    assert len(channel.batches[-1]) == 40


def test_a_remote_producer_learns_the_limit_from_its_consumers_credits():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    codec = codec_for(None, None, "test")
    accepted = []
    security = ConnectionSecurity.new()
    accepting = threading.Thread(target=lambda: accepted.append(security.accept(server.accept()[0], "data")),
                                 daemon=True)
    accepting.start()
    channel = RemoteChannel(server.getsockname(), security, 0, 0, 0, 0, codec)
    try:
        for _ in range(CREDITS):
            channel.send([1])
        accepting.join(60)
        accepted[0].sendall(credit_byte(4096) + credit_byte(20))
        channel.send([2])  # out of credits: it reads the two granted, the last one saying 16 records
        assert channel.batch_limit == 16
    finally:
        channel.abort()
        for sock in accepted:
            sock.close()
        server.close()


def test_a_source_polls_no_more_than_its_consumers_debloated_batches_take():
    from runtime.network.record_writer import RecordWriter

    hashed = EdgeWriter(ChainEdge(0, 0, 1, Partitioner("hash", key_selector=lambda r: r), None, 1, 2), 0,
                        {0: Collected(16), 1: Collected(32)}, batch_size=4096, max_parallelism=128)
    broadcast = EdgeWriter(ChainEdge(1, 0, 2, Partitioner("broadcast"), None, 1, 2), 0,
                           {0: Collected(64), 1: Collected(8)}, batch_size=4096, max_parallelism=128)
    assert RecordWriter([hashed]).batch_capacity() == 48, "one record goes to one channel: the limits add up"
    assert RecordWriter([hashed, broadcast]).batch_capacity() == 8, "a broadcast record goes to every channel"
    hashed.channels[1].batch_limit = None
    assert RecordWriter([hashed]).batch_capacity() is None, "a consumer that set no limit: no cap"
