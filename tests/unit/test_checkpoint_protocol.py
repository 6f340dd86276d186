import pytest

from runtime.checkpoint_config import CheckpointConfig
from runtime.driver.coordinator import CheckpointCoordinator
from runtime.executor.aligner import Alignment, BarrierAligner
from runtime.graph.job_graph import Chain, JobGraph
from runtime.protocol.checkpoints import (
    OPERATOR_STATE_GROUP,
    AckResult,
    CompletedCheckpoint,
    PendingCheckpoint,
    SharedFile,
    StateHandle,
    SubtaskAck,
    SubtaskId,
    should_trigger,
)
from runtime.protocol.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    SubtaskFinished,
    TriggerCheckpoint,
)
from state_backends.storage import CheckpointStorage


def test_exactly_once_alignment_blocks_each_channel_until_all_delivered_the_barrier():
    aligner = BarrierAligner(3, exactly_once=True, clock=iter([0.0, 0.25]).__next__)
    assert aligner.on_barrier(0, 1) is Alignment.BLOCK and aligner.should_block(0)
    assert aligner.on_barrier(2, 1) is Alignment.BLOCK and aligner.should_block(2)
    assert not aligner.should_block(1)
    assert aligner.on_barrier(1, 1) is Alignment.COMPLETE
    assert aligner.alignment_ms == 250.0
    assert aligner.on_barrier(0, 1) is Alignment.IGNORE  # a duplicate of a completed checkpoint


def test_at_least_once_alignment_never_blocks():
    aligner = BarrierAligner(2, exactly_once=False)
    assert aligner.on_barrier(0, 1) is Alignment.BLOCK
    assert not aligner.should_block(0)
    assert aligner.on_barrier(1, 1) is Alignment.COMPLETE


def test_ended_channels_count_as_aligned():
    aligner = BarrierAligner(2, exactly_once=True)
    assert aligner.on_barrier(0, 4) is Alignment.BLOCK
    assert aligner.on_end_of_input(1) is Alignment.COMPLETE
    assert aligner.on_barrier(0, 5) is Alignment.COMPLETE  # channel 1 stays ended


def test_a_newer_barrier_supersedes_an_unfinished_alignment():
    aligner = BarrierAligner(2, exactly_once=True)
    aligner.on_barrier(0, 1)
    assert aligner.on_barrier(0, 2) is Alignment.BLOCK
    assert aligner.on_barrier(1, 1) is Alignment.IGNORE
    assert aligner.on_barrier(1, 2) is Alignment.COMPLETE


@pytest.mark.parametrize("kwargs,expected", [
    (dict(), True),
    (dict(interval_ms=None), False),
    (dict(last_trigger_ms=950), False),
    (dict(last_completion_ms=990, min_pause_ms=50), False),
    (dict(pending=1), False),
    (dict(pending=1, max_concurrent=2), True),
    (dict(all_subtasks_running=False), False),
])
def test_should_trigger(kwargs, expected):
    facts = dict(now_ms=1000, interval_ms=100, last_trigger_ms=800, last_completion_ms=None, min_pause_ms=0,
                 pending=0, max_concurrent=1, all_subtasks_running=True)
    facts.update(kwargs)
    assert should_trigger(**facts) is expected


def test_pending_checkpoint_completes_with_every_expected_subtask():
    subtasks = frozenset({SubtaskId(0, 0), SubtaskId(0, 1)})
    pending = PendingCheckpoint(7, 0.0, subtasks)
    assert pending.acknowledge(SubtaskAck(SubtaskId(0, 0), (), 1.0, 2.0, 0.5)) is AckResult.SUCCESS
    assert not pending.is_complete
    assert pending.acknowledge(SubtaskAck(SubtaskId(9, 9), (), 1.0, 2.0, 0.5)) is AckResult.UNKNOWN  # not ours
    assert pending.acknowledge(SubtaskAck(SubtaskId(0, 1), (), 3.0, 1.0, 0.1)) is AckResult.SUCCESS
    assert pending.is_complete
    stats = pending.stats(40.0)
    assert (stats.duration_ms, stats.sync_ms, stats.async_ms, stats.alignment_ms) == (40.0, 3.0, 2.0, 0.5)


class FakeControl:
    def __init__(self):
        self.sent = []
        self.all_registered = True

    def broadcast(self, message):
        self.sent.append(message)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make_coordinator(tmp_path, **config):
    graph = JobGraph("job", [Chain(0, [], 2)], [], 128, 5, 100)
    checkpoint_config = CheckpointConfig().set_checkpoint_interval(1000)
    for name, value in config.items():
        getattr(checkpoint_config, name)(value)
    clock = FakeClock()
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    coordinator = CheckpointCoordinator(checkpoint_config, storage, graph, clock=clock)
    control = FakeControl()
    coordinator.start_attempt(0, control)
    return coordinator, control, clock, storage


def ack(checkpoint_id, subtask):
    return AcknowledgeCheckpoint(0, checkpoint_id, 0, subtask, (), 0.1, 1.0, 0.0, {})


def test_coordinator_triggers_on_interval_commits_and_notifies(tmp_path):
    coordinator, control, clock, storage = make_coordinator(tmp_path)
    assert coordinator.tick() is None and control.sent == []
    clock.now += 1.0
    coordinator.tick()
    assert control.sent == [TriggerCheckpoint(0, 1)]
    clock.now += 1.0
    coordinator.tick()
    assert len(control.sent) == 1, "max concurrent 1: no second trigger while one is pending"
    coordinator.on_message(ack(1, 0))
    assert storage.checkpoint_ids() == []
    coordinator.on_message(ack(1, 1))
    assert control.sent[-1] == NotifyCheckpointComplete(0, 1)
    assert storage.read_checkpoint(1).checkpoint_id == 1
    assert coordinator.completed_ids == [1]


def test_coordinator_retains_the_last_n(tmp_path):
    coordinator, control, clock, storage = make_coordinator(tmp_path, set_max_retained_checkpoints=2)
    for checkpoint_id in (1, 2, 3):
        clock.now += 1.0
        coordinator.tick()
        coordinator.on_message(ack(checkpoint_id, 0))
        coordinator.on_message(ack(checkpoint_id, 1))
    assert storage.checkpoint_ids() == [2, 3]


def test_timeouts_and_declines_fail_the_job_beyond_the_tolerated_number(tmp_path):
    coordinator, control, clock, storage = make_coordinator(
        tmp_path, set_checkpoint_timeout=500, set_tolerable_checkpoint_failure_number=1)
    clock.now += 1.0
    coordinator.tick()
    clock.now += 0.6
    assert coordinator.tick() is None, "one failure is tolerated"
    assert NotifyCheckpointAborted(0, 1) in control.sent
    clock.now += 0.5
    coordinator.tick()
    failure = coordinator.on_message(DeclineCheckpoint(0, 2, 0, 1, "disk full"))
    assert failure is not None and "checkpoint 2" in str(failure) and "disk full" in str(failure)


def make_source_coordinator(tmp_path, parallelism=3):
    """A coordinator of a job with one source chain of ``parallelism`` subtasks."""
    from operators import SequenceSource
    from operators.sources import SourceReaderOperator
    from runtime.graph.job_graph import OperatorNode

    source = OperatorNode("numbers", "numbers", parallelism, SourceReaderOperator("numbers", SequenceSource(0, 9)),
                          None, is_source=True, is_sink=False)
    graph = JobGraph("job", [Chain(0, [source], parallelism)], [], 128, 5, 100)
    clock = FakeClock()
    coordinator = CheckpointCoordinator(CheckpointConfig().set_checkpoint_interval(1000),
                                        CheckpointStorage(f"file://{tmp_path}", "job"), graph, clock=clock)
    control = FakeControl()
    coordinator.start_attempt(0, control)
    return coordinator, control, clock


def test_checkpoint_ids_continue_after_existing_ones(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    storage.write_metadata(CompletedCheckpoint(41, "job", 0, 0, 1, 128, ()))
    coordinator, control, clock, _ = make_coordinator(tmp_path)
    clock.now += 1.0
    coordinator.tick()
    assert control.sent == [TriggerCheckpoint(0, 42)]


def test_the_last_acks_are_handled_before_the_coordinator_finishes(tmp_path):
    """At the end of a job the acks wait in the coordinator's inbox while the job master hears the stage is
    done: flushing the loop first is what keeps the last checkpoint from being aborted."""
    from runtime.driver.coordinator_loop import CoordinatorLoop

    coordinator, control, clock, storage = make_coordinator(tmp_path)
    failures = []
    loop = CoordinatorLoop(coordinator, lambda attempt, error: failures.append(error))
    try:
        clock.now += 1.0
        coordinator.tick()
        assert control.sent == [TriggerCheckpoint(0, 1)]
        loop.inbox.put(ack(1, 0))
        loop.inbox.put(ack(1, 1))
        assert loop.flush(timeout=60)
        coordinator.finish()
    finally:
        loop.stop()
    assert coordinator.completed_checkpoints() == [1] and storage.read_checkpoint(1).checkpoint_id == 1
    assert failures == []


def test_the_rendezvous_is_done_only_once_the_addresses_went_out():
    """A trigger sent before the addresses would reach a slot still registering, which drops it."""
    import queue

    from runtime.driver.control_server import ControlServer
    from runtime.network.security import ConnectionSecurity
    from runtime.protocol.messages import Addresses, Register
    from runtime.protocol.wire import MessageSocket
    from tests.integration.waiting import wait_for

    seen_when_broadcasting = []

    class Recording(ControlServer):
        def broadcast(self, message):
            if isinstance(message, Addresses):
                seen_when_broadcasting.append(self.all_registered)
            super().broadcast(message)

    security = ConnectionSecurity.new()
    server = Recording("127.0.0.1", 0, 1, queue.Queue(), security)
    slot = MessageSocket(security.connect(server.address, "control", timeout_s=60), "the driver")
    try:
        slot.send(Register(0, 0, "127.0.0.1", 1, 123))
        assert isinstance(slot.receive(), Addresses)
        wait_for(lambda: server.all_registered, 60, "the rendezvous to be marked done")  # just after the send
        assert seen_when_broadcasting == [False]
    finally:
        slot.close()
        server.close()


def final_state(storage, subtask, token="fin"):
    """A finished source subtask's final state file, as its slot writes it."""
    return storage.write_state_file(0, "numbers", subtask, [(OPERATOR_STATE_GROUP, b"done")], finished=token)


def test_checkpoints_go_on_after_a_subtask_finished_holding_its_final_state(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path)
    storage = coordinator.storage
    handle = final_state(storage, 2)
    coordinator.on_message(SubtaskFinished(0, 0, 2, (handle,), {"numbers": "split 2 at its end"}))
    clock.now += 1.0
    coordinator.tick()
    assert control.sent == [TriggerCheckpoint(0, 1)], "a finished subtask with a final state stops nothing"
    for subtask in (0, 1):
        coordinator.on_message(ack(1, subtask))
    assert coordinator.completed_checkpoints() == [1]
    checkpoint = storage.read_checkpoint(1)
    assert [h.path for h in checkpoint.operator("numbers").handles] == ["../finished/fin/numbers/2.arrow"]
    assert storage.problems(checkpoint) == []
    storage.delete_checkpoint(1)  # retention removes a checkpoint: the final state stays for the later ones
    assert list(storage.read_state_rows(1, handle)) == [(OPERATOR_STATE_GROUP, b"done")]


def test_a_subtask_finishing_without_the_barrier_completes_the_pending_checkpoint(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path)
    clock.now += 1.0
    coordinator.tick()
    coordinator.on_message(ack(1, 0))
    coordinator.on_message(ack(1, 1))
    assert coordinator.completed_checkpoints() == []
    coordinator.on_message(SubtaskFinished(0, 0, 2, (final_state(coordinator.storage, 2),), {}))
    assert coordinator.completed_checkpoints() == [1]


def test_when_every_subtask_finished_their_final_states_make_the_final_checkpoint(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path, parallelism=2)
    storage = coordinator.storage
    clock.now += 1.0
    coordinator.tick()
    coordinator.on_message(ack(1, 0))  # subtask 0 took part in checkpoint 1, then finished
    coordinator.on_message(SubtaskFinished(0, 0, 0, (final_state(storage, 0, token="a"),), {}))
    assert coordinator.completed_checkpoints() == []
    coordinator.on_message(SubtaskFinished(0, 0, 1, (final_state(storage, 1, token="b"),), {}))
    assert coordinator.completed_checkpoints() == [1, 2], "1 completed by subtask 1's final state, then the final"
    assert control.sent[-2:] == [NotifyCheckpointComplete(0, 1), NotifyCheckpointComplete(0, 2)]
    final = storage.read_checkpoint(2)
    assert sorted(h.path for h in final.operator("numbers").handles) == [
        "../finished/a/numbers/0.arrow", "../finished/b/numbers/1.arrow"]
    clock.now += 5
    coordinator.tick()
    assert not any(isinstance(m, TriggerCheckpoint) and m.checkpoint_id > 1 for m in control.sent), \
        "nothing is left to trigger"


def test_a_final_checkpoint_that_could_not_be_written_is_retried(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path, parallelism=1)
    coordinator.config.set_tolerable_checkpoint_failure_number(1)
    storage = coordinator.storage
    handle = final_state(storage, 0)
    real_write = storage.write_metadata
    storage.write_metadata = lambda checkpoint: (_ for _ in ()).throw(OSError("disk full"))
    assert coordinator.on_message(SubtaskFinished(0, 0, 0, (handle,), {})) is None, "one failure is tolerated"
    assert coordinator.completed_checkpoints() == []
    storage.write_metadata = real_write
    clock.now += 1.0
    coordinator.tick()
    assert coordinator.completed_checkpoints() == [2] and control.sent[-1] == NotifyCheckpointComplete(0, 2)


def test_a_subtask_finishing_without_a_final_state_fails_the_attempt(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path)
    failure = coordinator.on_message(SubtaskFinished(0, 0, 1))
    assert failure is not None and "finished without a final state" in str(failure)


def test_final_states_no_checkpoint_references_are_deleted_between_attempts_and_at_the_end(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path)
    storage = coordinator.storage
    coordinator.on_message(SubtaskFinished(0, 0, 2, (final_state(storage, 2, token="kept"),), {}))
    clock.now += 1.0
    coordinator.tick()
    for subtask in (0, 1):
        coordinator.on_message(ack(1, subtask))
    final_state(storage, 1, token="written-late")  # a subtask stored it, then its attempt ended
    assert storage.final_state_tokens() == ["kept", "written-late"], "nothing is deleted while slots write"
    coordinator.start_attempt(1, control)
    assert storage.final_state_tokens() == ["kept"], "checkpoint 1 references it"
    storage.delete_checkpoint(1)
    coordinator.finish()
    assert storage.final_state_tokens() == []


def savepoint_request(directory, drain=None):
    from runtime.driver.savepoints import SavepointRequest

    outcomes = []
    return SavepointRequest(str(directory), lambda url, error: outcomes.append((url, error)), drain), outcomes


def test_a_savepoint_is_stored_apart_never_notified_nor_retained_and_restorable(tmp_path):
    import json
    import os

    from state_backends.storage import SavepointStorage

    coordinator, control, clock = make_source_coordinator(tmp_path / "ck", parallelism=2)
    coordinator.on_message(SubtaskFinished(0, 0, 1, (final_state(coordinator.storage, 1),), {}))
    request, outcomes = savepoint_request(tmp_path / "sp")
    coordinator.request_savepoint(request)
    coordinator.tick()
    (trigger,) = control.sent
    assert trigger.checkpoint_id == 1 and trigger.savepoint.startswith(f"file://{tmp_path}/sp/savepoint-1-")
    target = SavepointStorage(trigger.savepoint)
    handle = target.write_state_file(1, "numbers", 0, [(OPERATOR_STATE_GROUP, b"at 5")])
    coordinator.on_message(AcknowledgeCheckpoint(0, 1, 0, 0, (handle,), 0.1, 1.0, 0.0, {}))
    assert outcomes == [(trigger.savepoint, None)]
    assert coordinator.completed_checkpoints() == [] and control.sent == [trigger], "no notification, not retained"
    savepoint = target.validated()
    assert savepoint.savepoint and sorted(h.path for h in savepoint.state_handles) == ["numbers/0.arrow",
                                                                                      "numbers/1.arrow"]
    assert list(target.read_state_rows(1, savepoint.operator("numbers").handles[1])) == [
        (OPERATOR_STATE_GROUP, b"done")], "the finished subtask's final state was copied into the savepoint"
    assert json.load(open(os.path.join(target.job_dir, "_metadata")))["type"] == "savepoint"


def test_a_savepoint_asked_for_while_the_slots_start_is_taken_once_every_slot_runs(tmp_path):
    """Flink refuses a savepoint while tasks initialise; Chandy's waits for them (INITIALIZING -> RUNNING)."""
    coordinator, control, clock = make_source_coordinator(tmp_path / "ck", parallelism=2)
    control.all_registered = False  # INITIALIZING: the slots restore their state and connect
    request, outcomes = savepoint_request(tmp_path / "sp")
    coordinator.request_savepoint(request)
    for _ in range(3):
        clock.now += 1.0
        coordinator.tick()
    assert control.sent == [] and outcomes == [], "nothing triggered before every slot runs"
    control.all_registered = True  # RUNNING
    coordinator.tick()
    (trigger,) = control.sent
    assert trigger.savepoint.startswith(f"file://{tmp_path}/sp/savepoint-")


def test_a_declined_savepoint_fails_alone_and_its_directory_goes(tmp_path):
    import os

    coordinator, control, clock = make_source_coordinator(tmp_path / "ck", parallelism=1)
    request, outcomes = savepoint_request(tmp_path / "sp")
    coordinator.request_savepoint(request)
    coordinator.tick()
    directory = control.sent[0].savepoint[len("file://"):]
    os.makedirs(directory)
    assert coordinator.on_message(DeclineCheckpoint(0, 1, 0, 0, "disk full")) is None, "no job fails for it"
    (url, error), = outcomes
    assert url is None and "Savepoint 1" in str(error) and "disk full" in str(error)
    assert not os.path.exists(directory) and coordinator.consecutive_failures == 0


def test_stopping_sends_stop_sources_and_the_final_checkpoint_is_also_the_savepoint(tmp_path):
    from runtime.protocol.messages import StopSources
    from state_backends.storage import SavepointStorage

    coordinator, control, clock = make_source_coordinator(tmp_path / "ck", parallelism=1)
    request, outcomes = savepoint_request(tmp_path / "sp", drain=False)
    coordinator.request_savepoint(request)
    coordinator.tick()
    assert control.sent == [StopSources(0, drain=False)] and coordinator.stop_sources == StopSources(0, False)
    coordinator.on_message(SubtaskFinished(0, 0, 0, (final_state(coordinator.storage, 0),), {}))
    assert coordinator.completed_checkpoints() == [1] and control.sent[-1] == NotifyCheckpointComplete(0, 1)
    (url, error), = outcomes
    assert error is None and SavepointStorage(url).validated().operator("numbers").handles[0].path == "numbers/0.arrow"
    coordinator.end_attempt("a slot was lost before the job ended")
    coordinator.start_attempt(1, control)
    assert coordinator.stop_sources == StopSources(0, False), "a restart after the savepoint reads nothing either"
    request, outcomes = savepoint_request(tmp_path / "sp", drain=False)
    coordinator.request_savepoint(request)
    assert "already stopping" in str(outcomes[0][1])
    coordinator.give_up_requests("the job is FINISHED")
    request, outcomes = savepoint_request(tmp_path / "sp")
    coordinator.request_savepoint(request)
    assert "has ended" in str(outcomes[0][1]), "no request waits for an answer after the end"


def test_a_savepoint_into_a_directory_no_filesystem_takes_fails_alone(tmp_path):
    coordinator, control, clock = make_source_coordinator(tmp_path / "ck", parallelism=1)
    request, outcomes = savepoint_request("nosuchprotocol://bucket/savepoints")
    coordinator.request_savepoint(request)
    assert coordinator.tick() is None and coordinator.pending == {}
    (url, error), = outcomes
    assert url is None and "nosuchprotocol://bucket/savepoints" in str(error)


def test_a_checkpoint_referencing_shared_files_retention_deleted_meanwhile_is_aborted_not_completed(tmp_path):
    """A subtask that had not heard of checkpoint 2 completing took checkpoint 3 from checkpoint 1's files; one that
    had took checkpoint 4 from checkpoint 2's. Checkpoint 3 completing (one retained) deletes checkpoint 2 and its
    file, which checkpoint 4 references: 4 must not complete as a checkpoint that cannot be restored."""
    coordinator, control, clock = make_source_coordinator(tmp_path, parallelism=2)
    coordinator.config.set_max_retained_checkpoints(1).set_max_concurrent_checkpoints(3)
    storage = coordinator.storage

    def shared(name, uploaded_in):
        path = f"shared/op/{name}"
        (tmp_path / "job" / "shared" / "op").mkdir(parents=True, exist_ok=True)
        (tmp_path / "job" / path).write_bytes(b"rows")
        return SharedFile(path, 4, "crc32:00000000", uploaded_in)

    def acknowledge(checkpoint_id, files):
        for subtask in (0, 1):
            handle = StateHandle("numbers", subtask, f"numbers/{subtask}.arrow", 1, (-5,), None, (0, 127), tuple(files))
            coordinator.on_message(AcknowledgeCheckpoint(0, checkpoint_id, 0, subtask, (handle,), 0.1, 1.0, 0.0, {}))

    for _ in range(4):
        clock.now += 1.0
        coordinator.tick()
    assert [m.checkpoint_id for m in control.sent if isinstance(m, TriggerCheckpoint)] == [1, 2, 3]
    one, two, three = shared("1.rows", 1), shared("2.rows", 2), shared("3.rows", 3)
    acknowledge(1, [one])
    acknowledge(2, [one, two])
    clock.now += 1.0
    coordinator.tick()  # checkpoint 4, taken from checkpoint 2's files
    acknowledge(3, [one, three])  # completes: checkpoint 2 and its file go
    assert not (tmp_path / "job" / two.path).exists() and coordinator.completed_ids == [1, 2, 3]
    acknowledge(4, [one, two, shared("4.rows", 4)])
    assert 4 not in coordinator.completed_ids and storage.checkpoint_ids() == [3]
    assert NotifyCheckpointAborted(0, 4) in control.sent
