"""The barrier handler's lifecycle on a real input gate: aligned, at least once, unaligned, aligned until a timeout,
and the ways a recording ends (handed on, aborted, superseded)."""

import pickle
import time
from types import SimpleNamespace

import pytest

from runtime.executor.barrier_handler import BarrierHandler, BarrierHandlerState
from runtime.network.channels import InputGate
from runtime.protocol.events import END_OF_INPUT, CheckpointBarrier

WAITING, ALIGNING, RECORDING = BarrierHandlerState.WAITING, BarrierHandlerState.ALIGNING, BarrierHandlerState.RECORDING


class Keyed:
    def __init__(self):
        self.discarded = False

    def discard(self):
        self.discarded = True


class Subtask:
    """The handler's actions, recorded."""

    def __init__(self):
        self.aligned, self.unaligned, self.submitted = [], [], []

    def snapshot_aligned(self, checkpoint_id, alignment_ms, savepoint, triggered_at_ms, start_delay_ms):
        self.aligned.append((checkpoint_id, savepoint))

    def snapshot_unaligned(self, checkpoint_id, triggered_at_ms, start_delay_ms):
        snapshot = SimpleNamespace(checkpoint_id=checkpoint_id, alignment_ms=None,
                                   operators=[SimpleNamespace(keyed=Keyed(), channel_state=None)])
        self.unaligned.append(snapshot)
        return snapshot

    def submit_snapshot(self, snapshot):
        self.submitted.append(snapshot)


def handler_on(channels=2, exactly_once=True, unaligned=False, aligned_timeout_ms=0.0):
    gate = InputGate([(0, p) for p in range(channels)])
    subtask = Subtask()
    handler = BarrierHandler(gate, subtask, exactly_once, unaligned, aligned_timeout_ms,
                             lambda recorder: SimpleNamespace(recorder=recorder))
    return gate, subtask, handler


def take(gate, handler):
    """Poll the gate once, handing a barrier to the handler; returns what was polled."""
    item = gate.poll(0.0)
    if item is not None and type(item[1]) is CheckpointBarrier:
        handler.on_barrier(*item)
    return item


def test_exactly_once_blocks_a_channel_until_every_channel_delivered_the_barrier():
    gate, subtask, handler = handler_on()
    gate.put(0, CheckpointBarrier(1))
    gate.put(0, ["after the barrier"])
    take(gate, handler)
    assert handler.state is ALIGNING and subtask.aligned == []
    assert gate.poll(0.0) is None  # channel 0 is blocked: its record after the barrier waits
    gate.put(1, ["before the barrier"])
    gate.put(1, CheckpointBarrier(1))
    assert take(gate, handler) == (1, ["before the barrier"])
    take(gate, handler)
    assert subtask.aligned == [(1, None)] and handler.state is WAITING
    assert gate.poll(0.0) == (0, ["after the barrier"])  # unblocked after the snapshot


def test_at_least_once_never_blocks():
    gate, subtask, handler = handler_on(exactly_once=False)
    gate.put(0, CheckpointBarrier(1))
    gate.put(0, ["after the barrier"])
    take(gate, handler)
    assert handler.state is ALIGNING
    assert gate.poll(0.0) == (0, ["after the barrier"])


def test_a_savepoint_is_aligned_even_at_least_once():
    gate, subtask, handler = handler_on(exactly_once=False)
    gate.put(0, CheckpointBarrier(1, "/savepoints"))
    gate.put(0, ["after the barrier"])
    take(gate, handler)
    assert gate.poll(0.0) is None
    gate.put(1, CheckpointBarrier(1, "/savepoints"))
    take(gate, handler)
    assert subtask.aligned == [(1, "/savepoints")]


def test_a_newer_barrier_supersedes_the_checkpoint_being_aligned():
    gate, subtask, handler = handler_on(exactly_once=False)
    for channel, checkpoint_id in ((0, 1), (1, 2), (0, 2)):
        gate.put(channel, CheckpointBarrier(checkpoint_id))
        take(gate, handler)
    assert subtask.aligned == [(2, None)] and handler.state is WAITING


def test_an_ended_channel_counts_as_aligned():
    gate, subtask, handler = handler_on()
    gate.put(0, CheckpointBarrier(1))
    take(gate, handler)
    handler.on_end_of_input(1)
    assert subtask.aligned == [(1, None)] and handler.state is WAITING


def test_unaligned_snapshots_at_the_first_barrier_and_records_what_it_overtook():
    gate, subtask, handler = handler_on(unaligned=True)
    gate.put(0, ["overtaken on 0"], block=False)
    gate.put(1, ["before 1's barrier"], block=False)
    gate.put_priority(0, CheckpointBarrier(1, unaligned=True))
    take(gate, handler)
    assert [s.checkpoint_id for s in subtask.unaligned] == [1] and handler.state is RECORDING
    gate.put(1, ["still before 1's barrier"], block=False)
    handler.tend()
    assert subtask.submitted == []  # channel 1's barrier has not come
    gate.put_priority(1, CheckpointBarrier(1, unaligned=True))
    handler.tend()
    snapshot, = subtask.submitted
    assert handler.state is WAITING and snapshot.alignment_ms >= 0
    recorded = [[pickle.loads(item) for item in items] for items in snapshot.operators[0].channel_state.recorder.items]
    assert recorded == [[["overtaken on 0"]], [["before 1's barrier"], ["still before 1's barrier"]]]
    take(gate, handler)  # channel 1's barrier, polled as a priority event: already taken
    assert len(subtask.unaligned) == 1


def test_an_aborted_checkpoint_is_discarded_while_recording():
    gate, subtask, handler = handler_on(unaligned=True)
    gate.put_priority(0, CheckpointBarrier(1, unaligned=True))
    take(gate, handler)
    handler.abort_later(1)
    handler.tend()
    assert handler.state is WAITING and subtask.submitted == []
    assert subtask.unaligned[0].operators[0].keyed.discarded
    gate.put(1, ["after the abort"], block=False)
    assert subtask.unaligned[0].operators[0].channel_state.recorder.items[1] == []  # recording stopped


def test_a_newer_barrier_supersedes_a_recording():
    gate, subtask, handler = handler_on(unaligned=True)
    gate.put_priority(0, CheckpointBarrier(1, unaligned=True))
    take(gate, handler)
    gate.put_priority(0, CheckpointBarrier(2, unaligned=True))
    take(gate, handler)
    first, second = subtask.unaligned
    assert first.operators[0].keyed.discarded and not second.operators[0].keyed.discarded
    assert handler.state is RECORDING and handler.recording is second


def test_a_recording_complete_when_the_newer_barrier_comes_is_handed_on_not_discarded():
    gate, subtask, handler = handler_on(channels=1, unaligned=True)
    gate.put(0, ["in flight"], block=False)
    gate.put_priority(0, CheckpointBarrier(1, unaligned=True))
    take(gate, handler)
    assert subtask.submitted == [subtask.unaligned[0]]  # one channel: complete at once
    gate.put_priority(0, CheckpointBarrier(2, unaligned=True))
    take(gate, handler)
    assert not subtask.unaligned[0].operators[0].keyed.discarded


def test_end_of_input_completes_a_recording():
    gate, subtask, handler = handler_on(unaligned=True)
    gate.put_priority(0, CheckpointBarrier(1, unaligned=True))
    take(gate, handler)
    gate.put(1, END_OF_INPUT, block=False)
    handler.finish()
    assert subtask.submitted == subtask.unaligned and handler.state is WAITING


@pytest.mark.parametrize("late", [True, False])
def test_aligned_until_the_timeout_then_unaligned(late):
    gate, subtask, handler = handler_on(unaligned=True, aligned_timeout_ms=60_000.0)
    triggered_ms = int(time.time() * 1000) - (120_000 if late else 0)
    gate.put(0, CheckpointBarrier(1, None, triggered_ms))
    take(gate, handler)
    if late:  # triggered two minutes ago: taken unaligned at once
        assert [s.checkpoint_id for s in subtask.unaligned] == [1] and handler.state is RECORDING
    else:  # aligned for now; tend() says when the timeout is due (about a minute from now)
        assert subtask.unaligned == [] and handler.state is ALIGNING
        assert 50 < handler.tend() - time.monotonic() <= 60
