"""The parts of unaligned checkpoints: priority barriers in the gate and on the wire, the recording of the records
in flight, channel state by key group and its restore at another parallelism, and the settings."""

import pickle
import threading

import pytest

from operators import DiscardingSink
from runtime import StreamExecutionEnvironment
from runtime.checkpoint_config import CheckpointConfig
from runtime.settings.configuration import Configuration
from runtime.driver.restore_plan import check_compatible, plan_restore
from runtime.settings.durations import Duration
from runtime.errors import IncompatibleCheckpointError
from runtime.executor.channel_state import ChannelState, read_channel_state
from runtime.graph.job_graph import ChainEdge, Partitioner
from runtime.keys.key_groups import assign_to_key_group, key_group_range
from runtime.network.channels import CREDITS, DataServer, InputGate, RemoteChannel
from runtime.network.codec import RecordCodec
from runtime.network.in_flight import InFlightRecorder
from runtime.protocol.checkpoints import (
    CHANNEL_STATE_GROUP,
    PINNED_CHANNEL_STATE_GROUP,
    CompletedCheckpoint,
    OperatorState,
)
from runtime.protocol.events import END_OF_INPUT, CheckpointBarrier, Watermark
from state_backends.storage import CheckpointStorage


def _recorded(recorder):
    return [[pickle.loads(item) for item in items] for items in recorder.items]


def test_a_priority_barrier_overtakes_the_queue_and_what_it_overtook_is_recorded():
    gate = InputGate([(0, 0), (0, 1)], capacity=8)
    gate.put(0, [1, 2])
    gate.put(0, [3])
    gate.put(1, [10])
    gate.put_priority(0, CheckpointBarrier(5, unaligned=True))
    gate.put(0, [4])  # after the barrier: not in flight for checkpoint 5
    channel, barrier = gate.poll(timeout=1)
    assert (channel, barrier.checkpoint_id) == (0, 5), "the barrier comes first"
    recorder = gate.record_in_flight(5, done=set())
    assert not recorder.complete, "channel 1's barrier has not come"
    gate.put(1, [11])
    gate.put(1, Watermark(7))  # events are not state
    gate.put(1, CheckpointBarrier(5))
    gate.put(1, [12])
    assert recorder.complete
    assert _recorded(recorder) == [[[1, 2], [3]], [[10], [11]]]
    # the subtask goes on processing everything in order, the overtaken records included
    taken = [gate.poll(timeout=1)[1] for _ in range(8)]
    assert [item for item in taken if isinstance(item, list)] == [[1, 2], [10], [3], [11], [4], [12]]


def test_switching_after_the_aligned_timeout_records_what_is_queued_ahead_of_each_barrier():
    gate = InputGate([(0, 0), (0, 1), (0, 2)], capacity=8)
    gate.put(0, [1])
    gate.put(0, CheckpointBarrier(2, timestamp_ms=100))  # in order: queued behind [1]
    gate.put(0, [2])
    gate.put(1, [20])
    gate.put(2, END_OF_INPUT)
    assert gate.announced.checkpoint_id == 2 and gate.announced.timestamp_ms == 100
    recorder = gate.record_in_flight(2, done=set())
    assert not recorder.complete
    gate.put(1, CheckpointBarrier(3))  # a later barrier closes the channel too
    assert recorder.complete and _recorded(recorder) == [[[1]], [[20]], []]


def test_a_batch_interrupted_between_two_slices_records_its_rest_first():
    gate = InputGate([(0, 0), (0, 1)], capacity=8)
    gate.put(0, [3, 4])
    gate.put_priority(1, CheckpointBarrier(6, unaligned=True))
    assert gate.has_priority()
    gate.poll_priority()
    recorder = gate.record_in_flight(6, done=set(), leftover=(0, [1, 2]))  # taken, half processed
    gate.put(0, CheckpointBarrier(6))
    assert recorder.complete and _recorded(recorder) == [[[1, 2], [3, 4]], []]
    assert not gate.has_priority()


def test_channels_already_aligned_or_ended_record_nothing():
    gate = InputGate([(0, 0), (0, 1)], capacity=8)
    gate.put(0, [1])  # after channel 0's barrier, which the subtask processed while aligning
    recorder = gate.record_in_flight(4, done={0})
    gate.put(1, [2])
    gate.put(1, END_OF_INPUT)
    assert recorder.complete and _recorded(recorder) == [[], [[2]]]


def test_a_record_changed_in_place_after_it_was_recorded_stays_as_it_was():
    gate = InputGate([(0, 0)], capacity=8)
    record = {"n": 1}
    recorder = gate.record_in_flight(1, done=set())
    gate.put(0, [record])
    _, batch = gate.poll(timeout=1)
    batch[0]["n"] = 99  # an operator that mutates its input
    gate.put(0, CheckpointBarrier(1))
    assert _recorded(recorder) == [[[{"n": 1}]]]


def test_an_unaligned_barrier_needs_no_credit_and_overtakes_the_credited_batches(connection_security):
    gate = InputGate([(0, 0)], capacity=2)
    errors = []
    codec = RecordCodec(None)
    server = DataServer("127.0.0.1", 0, connection_security, 0,
                        lambda edge, producer, consumer, peer: (gate, 0, codec), errors.append)
    server.start()
    channel = RemoteChannel(server.address, connection_security, 0, 0, 0, 0, codec, connect_timeout=10)
    try:
        for i in range(CREDITS):  # every credit used: the reader queues them all (beyond the capacity)
            channel.send([i])
        assert not channel.available()
        done = threading.Event()

        def send_barrier():
            channel.send_event(CheckpointBarrier(9, unaligned=True))  # would block if it needed a credit
            done.set()

        threading.Thread(target=send_barrier, daemon=True).start()
        assert done.wait(60), "the barrier waited for a credit"
        with gate._cond:  # the reader puts it (put_priority notifies)
            assert gate._cond.wait_for(gate.has_priority, timeout=60)
        channel_index, barrier = gate.poll(timeout=60)
        assert barrier == CheckpointBarrier(9) and barrier.unaligned
        recorder = gate.record_in_flight(9, done=set())
        assert recorder.complete and len(recorder.items[0]) == CREDITS
        assert gate.poll(timeout=60)[1] == [0]
        assert channel.wait_available(60), "taking a batch returned a credit"
        assert not errors
    finally:
        server.close()
        channel.abort()


def test_an_overdrawn_channel_sends_without_credits_and_says_it_is_unavailable(connection_security):
    gate = InputGate([(0, 0)], capacity=2)
    codec = RecordCodec(None)
    server = DataServer("127.0.0.1", 0, connection_security, 0,
                        lambda edge, producer, consumer, peer: (gate, 0, codec), [].append)
    server.start()
    channel = RemoteChannel(server.address, connection_security, 0, 0, 0, 0, codec, connect_timeout=10)
    channel.overdraft = True
    try:
        for i in range(CREDITS + 3):
            channel.send([i])  # never waits
        assert not channel.available()
        received = [gate.poll(timeout=60)[1] for _ in range(CREDITS + 3)]
        assert received == [[i] for i in range(CREDITS + 3)]
        assert channel.wait_available(60)
    finally:
        server.close()
        channel.abort()


def _keyed_state(max_parallelism=128):
    recorder = InFlightRecorder(1, 2)
    recorder.capture(0, [list(range(0, 40))])
    recorder.capture(1, [list(range(40, 60))])
    keyed = ChainEdge(0, 0, 1, Partitioner("hash", key_selector=lambda n: n), None, 2, 2)
    shuffled = ChainEdge(1, 0, 1, Partitioner("rebalance"), None, 2, 2)
    return ChannelState(recorder, [(0, 0), (1, 0)], {0: keyed, 1: shuffled}, max_parallelism)


def test_channel_state_restored_at_another_parallelism_gives_each_subtask_its_key_groups():
    storage = CheckpointStorage("memory://unaligned-rescale", "job")
    handles = tuple(storage.write_state_file(1, "count", subtask, _keyed_state().rows()) for subtask in (0, 1))
    checkpoint = CompletedCheckpoint(1, "job", 0, 0, 2, 128, (OperatorState("count", "count", 2, handles),))
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
    env.from_sequence(0, 9).key_by(lambda n: n).map(lambda n: n).uid("count").sink_to(DiscardingSink())
    graph = env.get_job_graph("job")
    plan = plan_restore(checkpoint, graph)["count"]
    replayed = {s: read_channel_state(storage, plan[s], s, 3) for s in range(3)}
    keyed = {s: sorted(r for number, batch in replayed[s] for r in batch if r < 40) for s in range(3)}
    assert sorted(r for s in range(3) for r in keyed[s]) == sorted(list(range(40)) * 2), "each once per file"
    for s in range(3):
        assert all(assign_to_key_group(r, 128) in key_group_range(128, 3, s) for r in keyed[s])
    shuffled = {s: [r for number, batch in replayed[s] for r in batch if r >= 40] for s in range(3)}
    assert shuffled == {0: list(range(40, 60)), 1: list(range(40, 60)), 2: []}, "dealt by old subtask"


def test_records_in_flight_on_a_forward_edge_refuse_a_rescale_and_restore_at_the_same_parallelism():
    pinned = ChainEdge(0, 0, 1, Partitioner("forward"), None, 2, 2)
    recorder = InFlightRecorder(1, 1)
    recorder.capture(0, [[1, 2]])
    rows = ChannelState(recorder, [(0, 0)], {0: pinned}, 128).rows()
    assert [group for group, _ in rows] == [PINNED_CHANNEL_STATE_GROUP]
    storage = CheckpointStorage("memory://unaligned-pinned", "job")
    handles = (storage.write_state_file(1, "head", 0, rows),)
    checkpoint = CompletedCheckpoint(1, "job", 0, 0, 2, 128, (OperatorState("head", "head", 2, handles),))

    def graph(parallelism):
        env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
        env.from_sequence(0, 9).map(lambda n: n).uid("first").disable_chaining() \
            .map(lambda n: n).uid("head").disable_chaining().sink_to(DiscardingSink())
        return env.get_job_graph("job")

    with pytest.raises(IncompatibleCheckpointError, match=r"forward, broadcast or custom.*uid head.*Restore at "
                                                          r"parallelism 2"):
        check_compatible(checkpoint, graph(3))
    plan = plan_restore(checkpoint, graph(2))["head"]
    assert read_channel_state(storage, plan[0], 0, 2) == [(1, [1, 2])] and not plan[1].channel


def test_a_record_that_cannot_be_pickled_names_the_subtask_and_the_fix():
    recorder = InFlightRecorder(1, 1)
    recorder.capture(0, [[threading.Lock()]])
    state = ChannelState(recorder, [(0, 0)], {0: ChainEdge(0, 0, 1, Partitioner("rebalance"), None, 1, 1)}, 128,
                         "subtask 0 of chain 1")
    with pytest.raises(Exception, match="records in flight into subtask 0 of chain 1 cannot be pickled.*aligned"):
        state.rows()
    assert CHANNEL_STATE_GROUP != PINNED_CHANNEL_STATE_GROUP


def test_unaligned_settings_by_api_and_by_flink_keys():
    config = CheckpointConfig().enable_unaligned_checkpoints().set_aligned_checkpoint_timeout(Duration.of_seconds(3))
    assert config.is_unaligned_checkpoints_enabled() and config.get_aligned_checkpoint_timeout().to_milliseconds() \
        == 3000
    env = StreamExecutionEnvironment.get_execution_environment(Configuration()
                                                               .set_string("execution.checkpointing.unaligned", "true")
                                                               .set_string("execution.checkpointing."
                                                                           "aligned-checkpoint-timeout", "250 ms"))
    checkpoints = env.get_checkpoint_config()
    assert checkpoints.is_unaligned_checkpoints_enabled()
    assert checkpoints.get_aligned_checkpoint_timeout() == Duration.of_millis(250)
    assert not CheckpointConfig().enable_unaligned_checkpoints().disable_unaligned_checkpoints() \
        .is_unaligned_checkpoints_enabled()
