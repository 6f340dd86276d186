"""The driver's decisions, without Spark: failure diagnosis and the restart decision, restore planning, the
job lifecycle, the checkpoint coordinator (fake clock, real files under tmp_path) and the checkpoint metadata.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import uuid

import pytest
from fsspec.implementations.local import LocalFileSystem

from operators import DiscardingSink
from runtime import StreamExecutionEnvironment
from runtime.checkpoint_config import CheckpointConfig
from runtime.driver.coordinator import CheckpointCoordinator
from runtime.driver.failure_diagnosis import Diagnosis, FailureEvidence, decide_restart, diagnose
from runtime.driver.lifecycle import TRANSITIONS, JobLifecycle
from runtime.driver.restore_plan import check_compatible, plan_restore, resolve_restore
from runtime.driver.result import JobStatus
from runtime.errors import (
    ApiUsageError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    JobFailedError,
    ProtocolError,
    UnpicklableStateError,
)
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import (
    METADATA_FORMAT,
    OPERATOR_STATE_GROUP,
    AckResult,
    CheckpointStats,
    CompletedCheckpoint,
    OperatorState,
    PendingCheckpoint,
    StateHandle,
    SubtaskAck,
    SubtaskId,
)
from runtime.protocol.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    DeclineKind,
    FailurePhase,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    SlotFailed,
    SubtaskFinished,
    TriggerCheckpoint,
)
from state_backends.storage import CheckpointStatus, CheckpointStorage
from tests.unit.test_checkpoint_protocol import FakeClock, FakeControl

# =========================================================================================================
# diagnose
# =========================================================================================================


def slot_failed(slot, operator=None, uid=None, subtask=0, error_type="ValueError", message="boom",
                phase=FailurePhase.RUN, retryable=True, exception=None, traceback="Traceback: boom"):
    return SlotFailed(0, slot, operator, uid, subtask, error_type, message, traceback, exception, retryable, phase)


def test_operator_error_outranks_silent_slots_runtime_errors_and_spark():
    evidence = FailureEvidence(
        reports=[slot_failed(0, error_type="ConnectionResetError", message="peer gone"),
                 slot_failed(2, "Map", "parse", subtask=2, error_type="KeyError", message="'id'",
                             traceback="Traceback (most recent call last):\nKeyError: 'id'")],
        disconnected_slots=[1, 3],
        stage_error=RuntimeError("org.apache.spark.SparkException: barrier stage failed"))
    diagnosis = diagnose("orders", evidence)
    error = diagnosis.error
    assert error.message == ("Job 'orders' failed: operator 'Map' (subtask 2, uid 'parse') raised "
                             "KeyError: 'id'")
    assert (error.operator_name, error.operator_uid, error.subtask) == ("Map", "parse", 2)
    assert error.user_traceback.endswith("KeyError: 'id'")
    assert "Traceback from the executor" in str(error)
    assert diagnosis.phase is FailurePhase.RUN
    assert diagnosis.signature == ("parse", "KeyError", "'id'")
    assert "in open()" not in str(error) and "died" not in str(error) and "Spark" not in str(error)


def test_the_first_operator_report_is_the_cause():
    evidence = FailureEvidence(reports=[slot_failed(1, "Sink", "out", subtask=1, message="first"),
                                        slot_failed(0, "Map", "m", subtask=0, message="second")])
    error = diagnose("job", evidence).error
    assert error.operator_uid == "out" and "first" in str(error) and "second" not in str(error)


def test_an_operator_without_a_uid_is_named_without_one():
    error = diagnose("job", FailureEvidence(reports=[slot_failed(0, "Map", None, subtask=3)])).error
    assert "operator 'Map' (subtask 3) raised ValueError: boom" in str(error) and "uid" not in error.message


def test_open_phase_is_named_and_kept():
    report = slot_failed(1, "JDBC Sink", "db", subtask=1, error_type="OSError", message="refused",
                         phase=FailurePhase.OPEN)
    diagnosis = diagnose("job", FailureEvidence(reports=[report]))
    assert "operator 'JDBC Sink' (subtask 1, uid 'db') in open() raised OSError: refused" in diagnosis.error.message
    assert diagnosis.phase is FailurePhase.OPEN
    assert diagnosis.signature == ("db", "OSError", "refused")


def test_a_silent_slot_outranks_runtime_errors_of_its_peers():
    evidence = FailureEvidence(
        reports=[slot_failed(0, error_type="ConnectionResetError", message="peer gone")],
        disconnected_slots=[3, 0, 1, 3],  # slot 0 reported before disconnecting: it is not silent
        stage_error=RuntimeError("stage failed"))
    diagnosis = diagnose("job", evidence)
    message = diagnosis.error.message
    assert "the slots 1, 3 died without reporting an error" in message
    assert "slot 0" not in message and "peer gone" not in message
    assert "out of memory" in message and "executor logs" in message
    assert diagnosis.error.__cause__ is evidence.stage_error
    assert diagnosis.error.retryable and diagnosis.phase is FailurePhase.RUNTIME
    assert diagnosis.error.operator_name is None


def test_a_slot_that_reported_and_disconnected_is_diagnosed_by_its_report():
    evidence = FailureEvidence(reports=[slot_failed(2, error_type="OSError", message="disk full")],
                               disconnected_slots=[2], stage_error=RuntimeError("SparkException: x"))
    message = diagnose("job", evidence).error.message
    assert message == "Job 'job' failed: the Chandy runtime (slot 2) raised OSError: disk full"


CONNECTION_LOST = dict(error_type="ConnectionError", message="data connection from subtask 0 broke: ArrowInvalid: "
                       "Expected to be able to read 1024 bytes for message body, got 12", phase=FailurePhase.RUNTIME)


@pytest.mark.parametrize("order", ["consequence first", "cause first"])
def test_a_root_cause_outranks_a_peers_broken_connection_whatever_the_arrival_order(order):
    cause = slot_failed(0, error_type="RecordEncodingError", message="cannot pickle '_thread.lock' object",
                        phase=FailurePhase.RUNTIME)
    reports = [slot_failed(1, **CONNECTION_LOST), cause]
    evidence = FailureEvidence(reports=reports if order == "consequence first" else reports[::-1],
                               disconnected_slots=[0, 1], stage_error=RuntimeError("SparkException: barrier"))
    message = diagnose("job", evidence).error.message
    assert message == ("Job 'job' failed: the Chandy runtime (slot 0) raised RecordEncodingError: "
                       "cannot pickle '_thread.lock' object")


@pytest.mark.parametrize("error_type, message", [
    ("ConnectionError", "data connection to subtask 0 broke: [Errno 32] Broken pipe"),
    ("ConnectionError", "the consumer closed the connection"),
    ("ConnectionResetError", "[Errno 104] Connection reset by peer"),
    ("BrokenPipeError", "[Errno 32] Broken pipe"),
    ("EOFError", "Ran out of input"),
    ("ConnectionClosed", "control connection closed by peer"),
    ("OSError", "connection lost to the peer"),
])
def test_a_silent_slot_outranks_a_peers_broken_connection(error_type, message):
    evidence = FailureEvidence(reports=[slot_failed(1, error_type=error_type, message=message)],
                               disconnected_slots=[1, 0], stage_error=RuntimeError("stage failed"))
    diagnosis = diagnose("job", evidence)
    assert "the slot 0 died without reporting an error" in diagnosis.error.message
    assert message not in diagnosis.error.message and diagnosis.error.__cause__ is evidence.stage_error


def test_a_channel_error_an_operator_reported_ranks_below_a_silent_slot_but_its_own_connection_error_does_not():
    channel = slot_failed(1, "Map", "m", subtask=1, **CONNECTION_LOST)
    assert "slot 0 died" in diagnose("job", FailureEvidence([channel], disconnected_slots=[0])).error.message
    own = slot_failed(1, "JDBC Sink", "db", subtask=1, error_type="ConnectionResetError",
                      message="Connection reset by peer")
    message = diagnose("job", FailureEvidence([own], disconnected_slots=[0])).error.message
    assert "operator 'JDBC Sink' (subtask 1, uid 'db') raised ConnectionResetError" in message


def test_a_connection_error_while_loading_is_a_cause_not_a_consequence():
    storage = slot_failed(1, error_type="ConnectionError", message="connection reset reading s3://b/chk-3",
                          phase=FailurePhase.LOAD)
    message = diagnose("job", FailureEvidence([slot_failed(0, **CONNECTION_LOST), storage])).error.message
    assert message == ("Job 'job' failed: the Chandy runtime (slot 1) raised ConnectionError: "
                       "connection reset reading s3://b/chk-3")


def test_only_broken_connections_still_report_the_first_one():
    evidence = FailureEvidence(reports=[slot_failed(1, **CONNECTION_LOST),
                                        slot_failed(0, error_type="BrokenPipeError", message="[Errno 32] Broken pipe")],
                               disconnected_slots=[1, 0], stage_error=RuntimeError("SparkException: barrier"))
    diagnosis = diagnose("job", evidence)
    assert diagnosis.error.message == ("Job 'job' failed: the Chandy runtime (slot 1) raised ConnectionError: "
                                       + CONNECTION_LOST["message"])
    assert diagnosis.error.retryable and "Spark" not in diagnosis.error.message


def test_runtime_error_outranks_spark_error():
    evidence = FailureEvidence(reports=[slot_failed(4, error_type="ProtocolError", message="bad frame",
                                                    phase=FailurePhase.RUNTIME)],
                               stage_error=RuntimeError("org.apache.spark.SparkException: failed"))
    diagnosis = diagnose("job", evidence)
    assert "the Chandy runtime (slot 4) raised ProtocolError: bad frame" in diagnosis.error.message
    assert "Spark" not in diagnosis.error.message
    assert diagnosis.phase is FailurePhase.RUNTIME and diagnosis.error.operator_name is None


def test_a_runtime_error_in_open_says_so():
    report = slot_failed(0, error_type="OSError", message="no port", phase=FailurePhase.OPEN)
    assert "the Chandy runtime (slot 0) in open() raised" in diagnose("job", FailureEvidence([report])).error.message


def test_spark_only_errors_are_summarised_to_their_error_line():
    stage_error = RuntimeError(
        "\nAn error occurred while calling o42.collect.\n"
        "org.apache.spark.SparkException: Job aborted due to stage failure: barrier stage lost\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJob(DAGScheduler.scala:1)\n"
        "Caused by: java.lang.OutOfMemoryError: Java heap space\n")
    diagnosis = diagnose("job", FailureEvidence(stage_error=stage_error))
    assert diagnosis.error.message == ("Job 'job' failed in Spark before any slot reported an error: "
                                       "org.apache.spark.SparkException: Job aborted due to stage failure: "
                                       "barrier stage lost")
    assert diagnosis.error.__cause__ is stage_error and diagnosis.error.retryable


def test_spark_summary_falls_back_to_the_first_line_and_is_bounded():
    assert diagnose("job", FailureEvidence(stage_error=RuntimeError("lost\nmore"))).error.message.endswith(": lost")
    long = diagnose("job", FailureEvidence(stage_error=RuntimeError("Error " + "x" * 2000))).error.message
    assert long.endswith("x" * 494) and len(long) < 600
    assert diagnose("job", FailureEvidence()).error.message.endswith(": unknown error")


def test_retryable_is_carried_over():
    for retryable in (True, False):
        for operator in ("Map", None):
            report = slot_failed(0, operator, "m" if operator else None, retryable=retryable)
            assert diagnose("job", FailureEvidence([report])).error.retryable is retryable


def test_the_pickled_exception_becomes_the_cause():
    original = ZeroDivisionError("division by zero")
    report = slot_failed(0, "Map", "m", error_type="ZeroDivisionError", message="division by zero",
                         exception=pickle.dumps(original))
    cause = diagnose("job", FailureEvidence([report])).error.__cause__
    assert type(cause) is ZeroDivisionError and cause.args == ("division by zero",)


class VanishingError(Exception):
    """An exception class the executors have and the driver does not (deleted from this module below)."""


@pytest.mark.parametrize("breakage", ["missing class", "garbage"])
def test_an_unloadable_pickled_exception_still_diagnoses(monkeypatch, breakage):
    if breakage == "missing class":
        payload = pickle.dumps(VanishingError("gone"))
        monkeypatch.delattr(sys.modules[__name__], "VanishingError")
    else:
        payload = b"\x80\x04not a pickle"
    report = slot_failed(0, "Map", "m", error_type="VanishingError", message="gone", exception=payload)
    error = diagnose("job", FailureEvidence([report])).error
    assert error.__cause__ is None
    assert "operator 'Map' (subtask 0, uid 'm') raised VanishingError: gone" in error.message


# =========================================================================================================
# decide_restart
# =========================================================================================================


def failure(phase=FailurePhase.RUN, signature=("m", "ValueError", "boom"), retryable=True):
    return Diagnosis(JobFailedError("it failed", retryable=retryable), phase, signature)


def test_a_non_retryable_failure_never_restarts():
    for previous in (None, failure()):
        decision = decide_restart(failure(retryable=False), previous, None)
        assert not decision.restart and "would happen again" in decision.reason


def test_the_same_open_failure_twice_in_a_row_stops_restarting():
    in_open = failure(FailurePhase.OPEN, ("db", "OSError", "refused"))
    assert decide_restart(in_open, None, None).restart
    again = failure(FailurePhase.OPEN, ("db", "OSError", "refused"))  # an equal, not the same, object
    decision = decide_restart(again, in_open, None)
    assert not decision.restart and "open()" in decision.reason and "two attempts in a row" in decision.reason


def test_other_open_failures_restart():
    in_open = failure(FailurePhase.OPEN, ("db", "OSError", "refused"))
    assert decide_restart(failure(FailurePhase.OPEN, ("db", "OSError", "timed out")), in_open, None).restart
    assert decide_restart(failure(FailurePhase.OPEN, ("cache", "OSError", "refused")), in_open, None).restart
    assert decide_restart(in_open, failure(FailurePhase.RUN, ("db", "OSError", "refused")), None).restart
    assert decide_restart(failure(FailurePhase.RUN), failure(FailurePhase.RUN), None).restart
    assert decide_restart(failure(FailurePhase.RUN, in_open.signature), in_open, None).restart


def test_the_restart_strategys_refusal_is_the_reason():
    decision = decide_restart(failure(), None, "after 3 restart(s); the restart strategy allows 3")
    assert not decision.restart and decision.reason == "after 3 restart(s); the restart strategy allows 3"
    assert not decide_restart(failure(), None, "").restart


def test_fixed_delay_counts_restarts_and_failure_rate_counts_failures_in_the_interval():
    from runtime.restart_strategies import FailureRateRestartStrategy, FixedDelayRestartStrategy

    fixed = FixedDelayRestartStrategy(3, 100)
    assert [fixed.delay_after(tuple(range(n))) for n in (1, 3, 4)] == [100, 100, None]
    assert fixed.refusal((0, 1, 2, 3)) == "after 3 restart(s); the restart strategy allows 3"
    assert FixedDelayRestartStrategy(0, 0).refusal((0,)) == ""
    rate = FailureRateRestartStrategy(2, 10_000, 50)  # the second failure within 10 s fails the job
    assert rate.delay_after((0.0,)) == 50 and rate.delay_after((0.0, 11.0)) == 50
    assert rate.delay_after((0.0, 11.0, 15.0)) is None


def test_exponential_delay_grows_caps_resets_and_jitters_within_its_factor():
    from runtime.restart_strategies import ExponentialDelayRestartStrategy

    plain = ExponentialDelayRestartStrategy(100, 1_000, 3.0, 60_000, jitter_factor=0.0)
    assert [plain.delay_after(tuple(float(t) for t in range(n))) for n in (1, 2, 3, 4)] == [100, 300, 900, 1_000]
    assert plain.delay_after((0.0, 1.0, 100.0)) == 100  # 99 s without failure: back to the start
    jittered = ExponentialDelayRestartStrategy(1_000, 60_000, 2.0, 60_000, jitter_factor=0.5)
    delays = {jittered.delay_after((0.0, 1.0)) for _ in range(200)}
    assert min(delays) >= 1_000 and max(delays) <= 3_000 and len(delays) > 10


# =========================================================================================================
# plan_restore / check_compatible
# =========================================================================================================


def keyed_graph(parallelism, max_parallelism=None, reduce_uid="max"):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    if max_parallelism is not None:
        env.set_max_parallelism(max_parallelism)
    (env.from_sequence(0, 9).uid("src").map(lambda x: x).uid("m").key_by(lambda x: x).reduce(max)
        .uid(reduce_uid).sink_to(DiscardingSink()))
    return env.get_job_graph("job")


def old_checkpoint(operators, max_parallelism=128, checkpoint_id=7):
    return CompletedCheckpoint(checkpoint_id, "job", 0, 0, 2, max_parallelism, tuple(operators))


def dense_keyed_state(uid="max", old_parallelism=2, max_parallelism=128):
    """Every key group has state; subtask s of the old job held its whole range."""
    return OperatorState(uid, "Keyed Reduce", old_parallelism, tuple(
        StateHandle(uid, s, f"{uid}/{s}.arrow", 100, tuple(key_group_range(max_parallelism, old_parallelism, s)))
        for s in range(old_parallelism)))


def sparse_keyed_state(uid="max"):
    """Subtask 0 of the old job held groups 0..10 only, subtask 1 groups 100..127 (keys hash unevenly)."""
    return OperatorState(uid, "Keyed Reduce", 2, (
        StateHandle(uid, 1, f"{uid}/1.arrow", 100, tuple(range(100, 128))),  # out of order on purpose
        StateHandle(uid, 0, f"{uid}/0.arrow", 100, tuple(range(0, 11)))))


def assert_groups_land_once(checkpoint, plan, uid, new_parallelism):
    specs = plan[uid]
    assert sorted(specs) == list(range(new_parallelism))
    ranges = [range(specs[s].key_groups[0], specs[s].key_groups[1] + 1) for s in range(new_parallelism)]
    assert sorted(g for r in ranges for g in r) == list(range(checkpoint.max_parallelism))  # a partition
    for handle in checkpoint.operator(uid).handles:
        for group in handle.keyed_groups:
            readers = [s for s in range(new_parallelism) if group in ranges[s] and handle in specs[s].keyed]
            assert len(readers) == 1, f"key group {group} of {handle.path} is read by subtasks {readers}"
    for subtask, spec in specs.items():
        assert spec.checkpoint_id == checkpoint.checkpoint_id
        for handle in spec.keyed:  # reads only files that hold some of its groups
            assert any(g in ranges[subtask] for g in handle.keyed_groups), (subtask, handle.path)
        assert [h.subtask for h in spec.keyed] == sorted(h.subtask for h in spec.keyed)


@pytest.mark.parametrize("new_parallelism", [1, 2, 3, 4])
@pytest.mark.parametrize("state", [dense_keyed_state, sparse_keyed_state])
def test_rescaling_from_two_subtasks_puts_every_key_group_in_exactly_one_spec(new_parallelism, state):
    checkpoint = old_checkpoint([state()])
    plan = plan_restore(checkpoint, keyed_graph(new_parallelism))
    assert set(plan) == {"max"}
    assert_groups_land_once(checkpoint, plan, "max", new_parallelism)


def test_rescaling_with_sparse_state_skips_files_without_owned_groups():
    checkpoint = old_checkpoint([sparse_keyed_state()])
    specs = plan_restore(checkpoint, keyed_graph(4))["max"]  # ranges 0-31, 32-63, 64-95, 96-127
    assert [[h.subtask for h in specs[s].keyed] for s in range(4)] == [[0], [], [], [1]]
    assert [specs[s].key_groups for s in range(4)] == [(0, 31), (32, 63), (64, 95), (96, 127)]
    specs = plan_restore(checkpoint, keyed_graph(3))["max"]  # ranges 0-42, 43-85, 86-127
    assert [[h.subtask for h in specs[s].keyed] for s in range(3)] == [[0], [], [1]]
    specs = plan_restore(checkpoint, keyed_graph(1))["max"]
    assert [h.subtask for h in specs[0].keyed] == [0, 1] and specs[0].key_groups == (0, 127)


def test_operator_state_goes_to_every_subtask_and_stateless_operators_get_no_spec():
    source = OperatorState("src", "Sequence Source", 2, tuple(
        StateHandle("src", s, f"src/{s}.arrow", 10, (OPERATOR_STATE_GROUP,)) for s in range(2)))
    mixed = OperatorState("max", "Keyed Reduce", 2, (
        StateHandle("max", 0, "max/0.arrow", 10, (3, OPERATOR_STATE_GROUP)),
        StateHandle("max", 1, "max/1.arrow", 10, (70,))))
    stateless = OperatorState("m", "Map", 2, ())
    checkpoint = old_checkpoint([source, stateless, mixed])
    for new_parallelism in (1, 3):
        plan = plan_restore(checkpoint, keyed_graph(new_parallelism))
        assert set(plan) == {"src", "max"}, "the map and the sink have no state"
        for subtask in range(new_parallelism):
            assert plan["src"][subtask].operator == source.handles
            assert plan["src"][subtask].keyed == ()
            assert plan["max"][subtask].operator == (mixed.handles[0],)
    plan = plan_restore(checkpoint, keyed_graph(3))
    assert [[h.subtask for h in plan["max"][s].keyed] for s in range(3)] == [[0], [1], []]


def test_a_max_parallelism_mismatch_is_incompatible_and_names_the_fix():
    checkpoint = old_checkpoint([dense_keyed_state(max_parallelism=256)], max_parallelism=256)
    with pytest.raises(IncompatibleCheckpointError) as caught:
        plan_restore(checkpoint, keyed_graph(2, max_parallelism=128))
    message = str(caught.value)
    assert "Checkpoint 7" in message and "max parallelism 256" in message and "now has 128" in message
    assert "set_max_parallelism()" in message and "set it to 256" in message
    assert not caught.value.retryable
    plan_restore(checkpoint, keyed_graph(2, max_parallelism=256))  # the same value fits


def test_orphaned_state_is_incompatible_and_names_the_uids_and_the_fix():
    gone_a = OperatorState("old-count", "Keyed Count", 2, (StateHandle("old-count", 0, "old-count/0.arrow", 5, (1,)),))
    gone_b = OperatorState("old-dedup", "Dedup", 1, (StateHandle("old-dedup", 0, "old-dedup/0.arrow", 5, (2,)),))
    checkpoint = old_checkpoint([gone_b, dense_keyed_state(), gone_a])
    with pytest.raises(IncompatibleCheckpointError) as caught:
        check_compatible(checkpoint, keyed_graph(2))
    message = str(caught.value)
    assert "uid old-count (Keyed Count), uid old-dedup (Dedup)" in message
    assert "uid max" not in message
    assert ".uid(...)" in message
    with pytest.raises(IncompatibleCheckpointError):
        plan_restore(checkpoint, keyed_graph(2))


def test_an_operator_in_the_checkpoint_without_state_is_not_orphaned():
    checkpoint = old_checkpoint([OperatorState("removed-map", "Map", 2, ()), dense_keyed_state()])
    check_compatible(checkpoint, keyed_graph(2))
    assert set(plan_restore(checkpoint, keyed_graph(2))) == {"max"}


def test_state_under_a_changed_uid_is_orphaned():
    checkpoint = old_checkpoint([dense_keyed_state()])
    with pytest.raises(IncompatibleCheckpointError, match="uid max"):
        plan_restore(checkpoint, keyed_graph(2, reduce_uid="maximum"))


# =========================================================================================================
# resolve_restore
# =========================================================================================================


def write_checkpoint(storage, checkpoint_id, rows=((5, b"five"),)):
    handle = storage.write_state_file(checkpoint_id, "max", 0, list(rows))
    checkpoint = CompletedCheckpoint(checkpoint_id, "job", 0, 0, 1, 128,
                                     (OperatorState("max", "Keyed Reduce", 1, (handle,)),))
    storage.write_metadata(checkpoint)
    return checkpoint


@pytest.fixture
def restorable(tmp_path):
    """chk-1 and chk-2 usable; chk-3 misses a state file; chk-4 has an unparsable _metadata; chk-5 is
    incomplete."""
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    for checkpoint_id in (1, 2, 3, 4):
        write_checkpoint(storage, checkpoint_id)
    os.remove(os.path.join(storage.checkpoint_dir(3), "max", "0.arrow"))
    with open(storage.metadata_path(4), "w") as f:
        f.write("{not json")
    storage.write_state_file(5, "max", 0, [(1, b"late")])
    return storage


def test_resolve_an_id_and_a_numeric_string(restorable):
    for restore_from in (2, "2", " 2 ", "2\n"):
        point = resolve_restore(restorable, restore_from)
        assert point.checkpoint.checkpoint_id == 2 and point.storage is restorable
    assert resolve_restore(restorable, 1).checkpoint.checkpoint_id == 1


def test_resolve_latest_skips_broken_and_incomplete_checkpoints(restorable):
    for restore_from in ("latest", " LATEST ", "Latest"):
        assert resolve_restore(restorable, restore_from).checkpoint.checkpoint_id == 2


def test_resolve_latest_without_a_usable_checkpoint(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    os.remove(os.path.join(storage.checkpoint_dir(1), "max", "0.arrow"))
    with pytest.raises(CheckpointNotFoundError, match="holds no usable checkpoint"):
        resolve_restore(storage, "latest")


@pytest.mark.parametrize("form", ["local", "local/", "relative", "file-url", "metadata", "file-url-metadata"])
def test_resolve_a_chk_path(restorable, tmp_path, monkeypatch, form):
    chk = os.path.join(str(tmp_path), "job", "chk-2")
    restore_from = {
        "local": chk,
        "local/": chk + "/",
        "relative": os.path.join("job", "chk-2"),
        "file-url": f"file://{chk}",
        "metadata": os.path.join(chk, "_metadata"),
        "file-url-metadata": f"file://{chk}/_metadata",
    }[form]
    monkeypatch.chdir(tmp_path)
    other = CheckpointStorage("memory://resolve-elsewhere", "other")  # the path, not this storage, decides
    point = resolve_restore(other, restore_from)
    assert point.checkpoint.checkpoint_id == 2
    assert point.storage.job_dir.rstrip("/") == restorable.job_dir.rstrip("/")
    assert list(point.storage.read_state_rows(2, point.checkpoint.state_handles[0])) == [(5, b"five")]


def test_resolve_a_chk_path_of_a_broken_checkpoint_names_the_usable_ones(restorable, tmp_path):
    with pytest.raises(CorruptCheckpointError, match=r"missing.*Usable checkpoints: \[1, 2\]"):
        resolve_restore(restorable, os.path.join(str(tmp_path), "job", "chk-3"))


def test_resolve_bad_ids_name_the_usable_checkpoints(restorable):
    with pytest.raises(CorruptCheckpointError, match=r"Checkpoint 3 cannot be restored.*Usable checkpoints: \[1, 2\]"):
        resolve_restore(restorable, 3)
    with pytest.raises(CorruptCheckpointError, match=r"Usable checkpoints: \[1, 2\]"):
        resolve_restore(restorable, "4")
    with pytest.raises(CorruptCheckpointError, match=r"never completed.*Usable checkpoints: \[1, 2\]"):
        resolve_restore(restorable, 5)
    with pytest.raises(CheckpointNotFoundError, match=r"Checkpoint 9 does not exist.*Usable checkpoints: \[1, 2\]"):
        resolve_restore(restorable, 9)


@pytest.mark.parametrize("restore_from", [True, False, None, 2.0, b"2", [2], {"id": 2}])
def test_resolve_rejects_values_of_the_wrong_type(restorable, restore_from):
    with pytest.raises(ApiUsageError, match="restore_from must be a checkpoint id, 'latest' or a path"):
        resolve_restore(restorable, restore_from)


@pytest.mark.parametrize("restore_from", ["newest", "", "chk-x", "-1", "1.5", "²", "job/chk-"])
def test_resolve_rejects_garbage_strings_naming_what_is_accepted(restorable, restore_from):
    with pytest.raises(CorruptCheckpointError) as caught:
        resolve_restore(restorable, restore_from)
    message = str(caught.value)
    assert "neither a checkpoint id, 'latest', the path of a chk-<n> directory, nor a savepoint" in message
    assert "Usable checkpoints: [1, 2]" in message


# =========================================================================================================
# JobLifecycle
# =========================================================================================================


ALLOWED = {
    JobStatus.CREATED: {JobStatus.INITIALIZING, JobStatus.FAILED, JobStatus.CANCELLING},
    JobStatus.INITIALIZING: {JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.FAILED, JobStatus.CANCELLING},
    JobStatus.RUNNING: {JobStatus.RESTARTING, JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLING},
    JobStatus.RESTARTING: {JobStatus.INITIALIZING, JobStatus.FAILED, JobStatus.CANCELLING},
    JobStatus.CANCELLING: {JobStatus.CANCELED},
    JobStatus.FINISHED: set(),
    JobStatus.FAILED: set(),
    JobStatus.CANCELED: set(),
}
PATH_TO = {
    JobStatus.CREATED: [],
    JobStatus.INITIALIZING: [JobStatus.INITIALIZING],
    JobStatus.RUNNING: [JobStatus.INITIALIZING, JobStatus.RUNNING],
    JobStatus.RESTARTING: [JobStatus.INITIALIZING, JobStatus.RESTARTING],
    JobStatus.CANCELLING: [JobStatus.CANCELLING],
    JobStatus.FINISHED: [JobStatus.INITIALIZING, JobStatus.RUNNING, JobStatus.FINISHED],
    JobStatus.FAILED: [JobStatus.FAILED],
    JobStatus.CANCELED: [JobStatus.CANCELLING, JobStatus.CANCELED],
}


def test_the_transition_table_is_the_documented_one():
    assert {status: set(targets) for status, targets in TRANSITIONS.items()} == ALLOWED


@pytest.mark.parametrize("source", list(JobStatus))
@pytest.mark.parametrize("target", list(JobStatus))
def test_every_transition_is_allowed_or_refused(source, target):
    lifecycle = JobLifecycle("demo", clock=lambda: 0.0)
    for step in PATH_TO[source]:
        lifecycle.transition(step)
    assert lifecycle.status is source
    if target in ALLOWED[source]:
        lifecycle.transition(target)
        assert lifecycle.status is target
    else:
        with pytest.raises(ProtocolError, match=f"Job 'demo' cannot go from {source.name} to {target.name}"):
            lifecycle.transition(target)
        assert lifecycle.status is source and len(lifecycle.history) == len(PATH_TO[source]) + 1


def test_terminal_states_have_no_way_out():
    for status in JobStatus:
        assert (not ALLOWED[status]) == status.is_globally_terminal_state()
    for terminal in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED):
        lifecycle = JobLifecycle("demo", clock=lambda: 0.0)
        for step in PATH_TO[terminal]:
            lifecycle.transition(step)
        for target in JobStatus:
            with pytest.raises(ProtocolError):
                lifecycle.transition(target)
        assert lifecycle.status is terminal


def test_history_records_when_each_state_began_and_the_log_how_long_each_lasted(caplog):
    times = iter([10.0, 11.0, 11.5, 14.0, 14.25, 14.5, 20.0])
    lifecycle = JobLifecycle("demo", clock=lambda: next(times))
    caplog.set_level(logging.INFO, logger="runtime.driver.lifecycle")
    lifecycle.transition(JobStatus.INITIALIZING, "attempt 0")
    lifecycle.transition(JobStatus.RUNNING)
    with pytest.raises(ProtocolError):
        lifecycle.transition(JobStatus.CANCELED)  # refused: reads no time, records nothing
    lifecycle.transition(JobStatus.RESTARTING)
    lifecycle.transition(JobStatus.INITIALIZING, "attempt 1")
    lifecycle.transition(JobStatus.RUNNING)
    lifecycle.transition(JobStatus.FINISHED)
    assert lifecycle.history == [(JobStatus.CREATED, 10.0), (JobStatus.INITIALIZING, 11.0), (JobStatus.RUNNING, 11.5),
                                 (JobStatus.RESTARTING, 14.0), (JobStatus.INITIALIZING, 14.25),
                                 (JobStatus.RUNNING, 14.5), (JobStatus.FINISHED, 20.0)]
    durations = [b - a for (_, a), (_, b) in zip(lifecycle.history, lifecycle.history[1:])]
    assert durations == [1.0, 0.5, 2.5, 0.25, 0.25, 5.5]
    messages = [r.getMessage() for r in caplog.records if r.name == "runtime.driver.lifecycle"]
    assert messages == ["Job 'demo': CREATED -> INITIALIZING after 1.000 s (attempt 0)",
                        "Job 'demo': INITIALIZING -> RUNNING after 0.500 s",
                        "Job 'demo': RUNNING -> RESTARTING after 2.500 s",
                        "Job 'demo': RESTARTING -> INITIALIZING after 0.250 s (attempt 1)",
                        "Job 'demo': INITIALIZING -> RUNNING after 0.250 s",
                        "Job 'demo': RUNNING -> FINISHED after 5.500 s"]


# =========================================================================================================
# CheckpointCoordinator
# =========================================================================================================


class FlakyLocalFileSystem(LocalFileSystem):
    """A local filesystem whose listing or deleting can be made to fail with PermissionError."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, skip_instance_cache=True, **kwargs)
        self.fail_listing = False
        self.fail_deleting = False
        self.deleted = []

    def ls(self, path, *args, **kwargs):
        if self.fail_listing:
            raise PermissionError(f"permission denied: {path}")
        return super().ls(path, *args, **kwargs)

    def rm(self, path, *args, **kwargs):
        if self.fail_deleting:
            raise PermissionError(f"permission denied: {path}")
        self.deleted.append(path)
        return super().rm(path, *args, **kwargs)


def two_subtask_graph():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.from_sequence(0, 9).uid("src").map(lambda x: x).uid("m").sink_to(DiscardingSink())
    return env.get_job_graph("job")  # one chain, 2 subtasks


class Harness:
    def __init__(self, tmp_path, filesystem=None, **config):
        checkpoint_config = CheckpointConfig().set_checkpoint_interval(1000).set_checkpoint_timeout(500)
        for name, value in config.items():
            getattr(checkpoint_config, name)(value)
        self.clock = FakeClock()
        self.storage = CheckpointStorage(f"file://{tmp_path}", "job", filesystem=filesystem)
        self.graph = two_subtask_graph()
        self.coordinator = CheckpointCoordinator(checkpoint_config, self.storage, self.graph, clock=self.clock,
                                                 wall_clock=lambda: 1700000000.0)
        self.control = FakeControl()
        self.attempt = 0
        self.coordinator.start_attempt(0, self.control)

    def trigger(self) -> int:
        """Advance one interval and tick: the id of the checkpoint triggered."""
        self.clock.now += 1.0
        assert self.coordinator.tick() is None
        sent = self.control.sent[-1]
        assert isinstance(sent, TriggerCheckpoint) and sent.attempt == self.attempt
        return sent.checkpoint_id

    def state(self, checkpoint_id, subtask, uid="m", payload=b"x"):
        return self.storage.write_state_file(checkpoint_id, uid, subtask, [(OPERATOR_STATE_GROUP, payload)])

    def ack(self, checkpoint_id, subtask, state=(), attempt=None, **kwargs):
        message = AcknowledgeCheckpoint(self.attempt if attempt is None else attempt, checkpoint_id, 0, subtask,
                                        tuple(state), **kwargs)
        return self.coordinator.on_message(message)

    def decline(self, checkpoint_id, subtask, kind, reason="disk full", attempt=None):
        return self.coordinator.on_message(DeclineCheckpoint(self.attempt if attempt is None else attempt,
                                                             checkpoint_id, 0, subtask, reason, kind))

    def complete(self) -> int:
        checkpoint_id = self.trigger()
        assert self.ack(checkpoint_id, 0, [self.state(checkpoint_id, 0)]) is None
        assert self.ack(checkpoint_id, 1, [self.state(checkpoint_id, 1)]) is None
        assert self.control.sent[-1] == NotifyCheckpointComplete(self.attempt, checkpoint_id)
        return checkpoint_id

    def exists(self, checkpoint_id, handle=None) -> bool:
        path = self.storage.checkpoint_dir(checkpoint_id)
        if handle is not None:
            path = self.storage.absolute(checkpoint_id, handle.path)
        return os.path.exists(path)

    def statuses(self) -> dict:
        return {s.checkpoint_id: s.status for s in self.storage.survey()}


def test_acks_complete_a_checkpoint_with_their_state_files(tmp_path):
    h = Harness(tmp_path)
    checkpoint_id = h.trigger()
    assert checkpoint_id == 1
    first, second = h.state(1, 0), h.state(1, 1)
    assert h.ack(1, 1, [second], sync_ms=2.0, async_ms=3.0, alignment_ms=1.0, source_positions={"src": "7"}) is None
    assert h.statuses() == {1: CheckpointStatus.INCOMPLETE}
    assert h.ack(1, 0, [first], source_positions={"src": "3"}) is None
    assert h.control.sent[-1] == NotifyCheckpointComplete(0, 1)
    assert h.coordinator.completed_checkpoints() == [1]
    committed = h.storage.read_checkpoint(1)
    assert committed.operator("m").handles == (first, second)
    assert committed.operator("src").source_positions == {0: "3", 1: "7"}
    assert committed.attempt == 0 and committed.timestamp_ms == 1700000000000
    assert h.storage.problems(committed) == []
    [stats] = h.coordinator.checkpoint_stats()
    assert (stats.sync_ms, stats.async_ms, stats.alignment_ms, stats.bytes) == (2.0, 3.0, 1.0, first.size + second.size)


def test_a_duplicate_ack_keeps_its_files(tmp_path):
    h = Harness(tmp_path)
    h.trigger()
    handle = h.state(1, 0)
    h.ack(1, 0, [handle])
    assert h.ack(1, 0, [handle]) is None  # the same subtask again: ignored, not discarded
    assert h.exists(1, handle)
    h.ack(1, 1, [h.state(1, 1)])
    assert h.coordinator.completed_checkpoints() == [1]
    assert h.storage.problems(h.storage.read_checkpoint(1)) == []


def test_an_ack_from_an_unexpected_subtask_has_its_files_deleted(tmp_path):
    h = Harness(tmp_path)
    h.trigger()
    expected = h.state(1, 0)
    h.ack(1, 0, [expected])
    stray = h.state(1, 5)
    assert h.ack(1, 5, [stray]) is None
    assert not h.exists(1, stray) and h.exists(1, expected)
    assert h.coordinator.completed_checkpoints() == [] and 1 in h.coordinator.pending
    h.ack(1, 1, [h.state(1, 1)])
    assert h.coordinator.completed_checkpoints() == [1]


def test_acks_never_delete_the_files_of_a_completed_checkpoint(tmp_path):
    h = Harness(tmp_path)
    checkpoint_id = h.complete()
    handles = h.storage.read_checkpoint(checkpoint_id).state_handles
    h.ack(checkpoint_id, 0, handles)  # a late duplicate naming the committed files
    h.ack(checkpoint_id, 5, handles)  # a subtask the checkpoint never expected, naming them too
    h.ack(checkpoint_id, 0, handles, attempt=7)  # another attempt's
    h.coordinator.end_attempt("failed")
    h.ack(checkpoint_id, 1, handles)  # after the attempt ended
    assert all(h.exists(checkpoint_id, handle) for handle in handles)
    assert h.storage.problems(h.storage.read_checkpoint(checkpoint_id)) == []


def test_after_a_timeout_a_late_ack_has_its_files_deleted(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5)
    h.trigger()
    early = h.state(1, 0)
    h.ack(1, 0, [early])
    h.clock.now += 0.6
    assert h.coordinator.tick() is None
    assert NotifyCheckpointAborted(0, 1) in h.control.sent
    assert not h.exists(1), "an aborted checkpoint's directory is removed"
    late = h.state(1, 1)
    assert h.ack(1, 1, [late]) is None
    assert not h.exists(1, late)
    assert h.coordinator.completed_checkpoints() == []


def test_an_ack_for_a_checkpoint_never_triggered_has_its_files_deleted(tmp_path):
    h = Harness(tmp_path)
    stray = h.state(42, 0)
    assert h.ack(42, 0, [stray]) is None
    assert not h.exists(42, stray)


def test_a_finished_decline_aborts_without_counting_a_failure(tmp_path):
    h = Harness(tmp_path)  # tolerates no failure at all
    h.trigger()
    h.ack(1, 0, [h.state(1, 0)])
    assert h.decline(1, 1, DeclineKind.FINISHED, "input ended") is None
    assert h.coordinator.consecutive_failures == 0
    assert NotifyCheckpointAborted(0, 1) in h.control.sent and not h.exists(1)
    assert h.coordinator.pending == {}


def test_failed_declines_count_towards_the_tolerated_failures(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=1)
    h.trigger()
    assert h.decline(1, 0, DeclineKind.FAILED) is None
    assert h.coordinator.consecutive_failures == 1
    h.trigger()
    error = h.decline(2, 1, DeclineKind.FAILED, "disk full again")
    assert isinstance(error, JobFailedError) and error.retryable
    assert "checkpoint 2 failed" in str(error) and "disk full again" in str(error)
    assert "subtask 1 of 'Sequence Source -> Map -> Sink: discard'" in str(error)
    assert "2 consecutive checkpoint failure(s), more than the 1 tolerated" in str(error)


def test_a_completed_checkpoint_resets_the_failure_count(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=1)
    h.trigger()
    assert h.decline(1, 0, DeclineKind.FAILED) is None
    h.complete()
    h.trigger()
    assert h.decline(3, 0, DeclineKind.FAILED) is None


def test_a_fatal_decline_fails_at_once_and_is_not_retryable(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5)
    h.trigger()
    h.ack(1, 1, [h.state(1, 1)])
    error = h.decline(1, 0, DeclineKind.FATAL, "state cannot be pickled")
    assert isinstance(error, JobFailedError) and not error.retryable
    assert "checkpoint 1 failed" in str(error) and "state cannot be pickled" in str(error)
    assert "subtask 0 of 'Sequence Source -> Map -> Sink: discard'" in str(error)
    assert NotifyCheckpointAborted(0, 1) in h.control.sent and not h.exists(1)


def test_a_decline_for_an_unknown_checkpoint_changes_nothing(tmp_path):
    h = Harness(tmp_path)
    h.trigger()
    assert h.decline(9, 0, DeclineKind.FAILED) is None
    assert 1 in h.coordinator.pending and h.coordinator.consecutive_failures == 0


def test_a_timeout_names_the_missing_subtasks(tmp_path):
    h = Harness(tmp_path)
    h.trigger()
    h.ack(1, 0, [h.state(1, 0)])
    h.clock.now += 0.5
    assert h.coordinator.tick() is None and 1 in h.coordinator.pending, "exactly the timeout is not over it"
    h.clock.now += 0.01
    error = h.coordinator.tick()
    assert isinstance(error, JobFailedError) and error.retryable
    message = str(error)
    assert "checkpoint 1 failed (not acknowledged within 500 ms by subtask 1 of 'Sequence Source -> Map -> " \
           "Sink: discard' (uids src, m, sink" in message
    assert "subtask 0 of" not in message
    assert h.coordinator.pending == {} and not h.exists(1)


def write_unreadable(storage, checkpoint_id):
    path = storage.metadata_path(checkpoint_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("{truncated")


def test_retention_keeps_unreadable_checkpoints_and_removes_superseded_ones(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)  # of an earlier execution
    write_unreadable(storage, 2)
    storage.write_state_file(3, "m", 0, [(OPERATOR_STATE_GROUP, b"x")])  # incomplete
    write_checkpoint(storage, 4)
    h = Harness(tmp_path, set_max_retained_checkpoints=1)
    assert h.statuses() == {1: CheckpointStatus.COMPLETED, 2: CheckpointStatus.UNREADABLE,
                            3: CheckpointStatus.INCOMPLETE, 4: CheckpointStatus.COMPLETED}
    assert h.complete() == 5
    assert h.statuses() == {2: CheckpointStatus.UNREADABLE, 5: CheckpointStatus.COMPLETED}
    assert h.complete() == 6
    assert h.statuses() == {2: CheckpointStatus.UNREADABLE, 6: CheckpointStatus.COMPLETED}


def test_retention_keeps_the_retained_number(tmp_path):
    h = Harness(tmp_path, set_max_retained_checkpoints=2)
    for _ in range(4):
        h.complete()
    assert h.statuses() == {3: CheckpointStatus.COMPLETED, 4: CheckpointStatus.COMPLETED}
    assert h.coordinator.completed_checkpoints() == [1, 2, 3, 4]


def test_retention_keeps_pending_and_newer_incomplete_checkpoints(tmp_path):
    h = Harness(tmp_path, set_max_retained_checkpoints=1, set_max_concurrent_checkpoints=2,
                set_checkpoint_timeout=60_000)
    older, newer = h.trigger(), h.trigger()
    assert (older, newer) == (1, 2)
    h.ack(older, 0, [h.state(older, 0)])  # still pending while the newer one completes
    h.ack(newer, 0, [h.state(newer, 0)])
    h.ack(newer, 1, [h.state(newer, 1)])
    assert h.coordinator.completed_checkpoints() == [2]
    assert h.statuses() == {1: CheckpointStatus.INCOMPLETE, 2: CheckpointStatus.COMPLETED}
    third = h.trigger()
    h.ack(third, 0, [h.state(third, 0)])  # pending, newer than every completed one
    h.ack(older, 1, [h.state(older, 1)])  # completes 1 out of order: 2 is newer, so 1 is superseded
    assert h.coordinator.completed_checkpoints() == [2, 1]
    assert h.statuses() == {2: CheckpointStatus.COMPLETED, 3: CheckpointStatus.INCOMPLETE}


def test_retention_keeps_an_aborted_checkpoint_newer_than_the_newest_completed(tmp_path):
    h = Harness(tmp_path, set_max_retained_checkpoints=1, set_max_concurrent_checkpoints=2,
                set_checkpoint_timeout=60_000, set_tolerable_checkpoint_failure_number=5)
    older, newer = h.trigger(), h.trigger()
    assert h.decline(newer, 0, DeclineKind.FAILED) is None  # aborted, and no longer pending
    h.state(newer, 1)  # written late
    h.ack(older, 0, [h.state(older, 0)])
    h.ack(older, 1, [h.state(older, 1)])
    assert h.coordinator.completed_checkpoints() == [1] and h.coordinator.pending == {}
    assert h.statuses() == {1: CheckpointStatus.COMPLETED, 2: CheckpointStatus.INCOMPLETE}


def test_retention_deletes_nothing_when_the_storage_cannot_be_listed_at_an_attempts_start(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    storage.write_state_file(2, "m", 0, [(OPERATOR_STATE_GROUP, b"x")])  # incomplete, older than what follows
    filesystem = FlakyLocalFileSystem()
    h = Harness(tmp_path, filesystem=filesystem, set_max_retained_checkpoints=1)
    filesystem.fail_listing = True
    h.attempt = 1
    h.coordinator.start_attempt(1, h.control)  # the store cannot be filled: it does not know what is there
    assert h.complete() == 3  # commits, notifies, and does not crash
    assert h.coordinator.completed_checkpoints() == [3]
    assert filesystem.deleted == []
    filesystem.fail_listing = False
    assert h.statuses() == {1: CheckpointStatus.COMPLETED, 2: CheckpointStatus.INCOMPLETE,
                            3: CheckpointStatus.COMPLETED}
    h.complete()
    assert h.statuses() == {4: CheckpointStatus.COMPLETED}


def test_retention_needs_no_listing_after_an_attempts_start(tmp_path):
    """The completed-checkpoint store is filled once per attempt; later checkpoints subsume in memory (on an object
    store, a listing and a read of every retained _metadata per checkpoint would cost more than the checkpoint)."""
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    filesystem = FlakyLocalFileSystem()
    h = Harness(tmp_path, filesystem=filesystem, set_max_retained_checkpoints=2)
    filesystem.fail_listing = True  # any listing from now on fails
    for _ in range(3):
        h.complete()
    filesystem.fail_listing = False
    assert h.statuses() == {3: CheckpointStatus.COMPLETED, 4: CheckpointStatus.COMPLETED}


def test_retention_stops_quietly_when_deleting_fails(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    filesystem = FlakyLocalFileSystem()
    h = Harness(tmp_path, filesystem=filesystem, set_max_retained_checkpoints=1)
    filesystem.fail_deleting = True
    assert h.complete() == 2
    assert h.statuses() == {1: CheckpointStatus.COMPLETED, 2: CheckpointStatus.COMPLETED}


def test_end_attempt_aborts_what_is_pending_and_triggers_nothing_more(tmp_path):
    h = Harness(tmp_path)
    h.trigger()
    early = h.state(1, 0)
    h.ack(1, 0, [early])
    h.coordinator.end_attempt("the job attempt failed")
    assert h.control.sent[-1] == NotifyCheckpointAborted(0, 1)
    assert h.coordinator.pending == {} and not h.exists(1)
    assert h.coordinator.consecutive_failures == 0, "an attempt ending is not a checkpoint failure"
    sent = len(h.control.sent)
    h.clock.now += 10
    assert h.coordinator.tick() is None and len(h.control.sent) == sent
    late = h.state(1, 1)
    assert h.ack(1, 1, [late]) is None
    assert not h.exists(1, late) and h.coordinator.completed_checkpoints() == []


def test_start_attempt_aborts_the_old_attempts_checkpoints_and_ignores_its_messages(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5)
    h.trigger()
    old_ack = h.state(1, 0)
    h.ack(1, 0, [old_ack])
    old_control, new_control = h.control, FakeControl()
    h.coordinator.start_attempt(1, new_control)
    h.control, h.attempt = new_control, 1
    assert old_control.sent[-1] == NotifyCheckpointAborted(0, 1)
    assert h.coordinator.pending == {} and not h.exists(1)
    # messages of attempt 0 arriving during attempt 1: ignored, their acks' files discarded
    late = h.state(1, 1)
    assert h.ack(1, 1, [late], attempt=0) is None and not h.exists(1, late)
    assert h.coordinator.completed_checkpoints() == []
    assert new_control.sent == []
    assert h.trigger() == 2
    stray = h.state(2, 0, payload=b"from attempt 0")
    assert h.ack(2, 0, [stray], attempt=0) is None
    assert not h.exists(2, stray) and h.coordinator.pending[2].acks == {}
    assert h.decline(2, 0, DeclineKind.FATAL, attempt=0) is None
    assert h.coordinator.on_message(SubtaskFinished(0, 0, 0)) is None
    assert 2 in h.coordinator.pending and h.coordinator.finished_subtasks == set()
    h.ack(2, 0, [h.state(2, 0)])
    h.ack(2, 1, [h.state(2, 1)])
    assert new_control.sent[-1] == NotifyCheckpointComplete(1, 2)
    assert h.storage.read_checkpoint(2).attempt == 1


def test_finish_removes_incomplete_directories_of_this_execution_only(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)  # an earlier execution's, completed
    storage.write_state_file(2, "m", 0, [(OPERATOR_STATE_GROUP, b"x")])  # an earlier execution's, incomplete
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5, set_max_retained_checkpoints=5)
    assert h.complete() == 3
    assert 2 not in h.statuses(), "retention removes incomplete directories older than the newest completed"
    h.trigger()
    h.clock.now += 0.6
    h.coordinator.tick()  # checkpoint 4 times out
    h.state(4, 1)  # a slot writes its file after the abort, and never acks
    h.trigger()
    h.ack(5, 0, [h.state(5, 0)])  # pending when the job finishes
    h.coordinator.finish()
    assert h.coordinator.pending == {} and h.control.sent[-1] == NotifyCheckpointAborted(0, 5)
    sent = len(h.control.sent)
    h.clock.now += 10
    assert h.coordinator.tick() is None and len(h.control.sent) == sent, "nothing is triggered after finish()"
    statuses = h.statuses()
    assert 4 not in statuses and 5 not in statuses
    assert statuses[1] is CheckpointStatus.COMPLETED and statuses[3] is CheckpointStatus.COMPLETED


def test_finish_keeps_an_earlier_executions_incomplete_directory_when_it_completed_none(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    storage.write_state_file(2, "m", 0, [(OPERATOR_STATE_GROUP, b"x")])  # an earlier execution's, incomplete
    write_unreadable(storage, 3)
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5)
    assert h.trigger() == 4
    h.clock.now += 0.6
    h.coordinator.tick()
    h.state(4, 0)  # late
    h.coordinator.finish()
    assert h.statuses() == {1: CheckpointStatus.COMPLETED, 2: CheckpointStatus.INCOMPLETE,
                            3: CheckpointStatus.UNREADABLE}


def test_finish_removes_this_executions_incomplete_directories_older_than_its_first_completed(tmp_path):
    h = Harness(tmp_path, set_tolerable_checkpoint_failure_number=5)
    h.trigger()
    h.clock.now += 0.6
    h.coordinator.tick()  # checkpoint 1 times out
    assert h.complete() == 2
    h.state(1, 0)  # a slot writes checkpoint 1's file late, after 2 completed
    h.coordinator.finish()
    assert h.statuses() == {2: CheckpointStatus.COMPLETED}


def test_finish_survives_an_unreachable_storage(tmp_path):
    filesystem = FlakyLocalFileSystem()
    h = Harness(tmp_path, filesystem=filesystem)
    h.complete()
    filesystem.fail_listing = True
    h.coordinator.finish()
    filesystem.fail_listing = False
    assert h.statuses() == {1: CheckpointStatus.COMPLETED}


# =========================================================================================================
# PendingCheckpoint / CompletedCheckpoint
# =========================================================================================================


def test_a_discarded_pending_checkpoint_discards_every_ack():
    pending = PendingCheckpoint(3, 0.0, frozenset({SubtaskId(0, 0)}))
    pending.discard()
    assert pending.acknowledge(SubtaskAck(SubtaskId(0, 0))) is AckResult.DISCARDED
    assert pending.acknowledge(SubtaskAck(SubtaskId(9, 9))) is AckResult.DISCARDED
    assert not pending.is_complete and pending.acks == {}


def test_from_acks_groups_handles_by_operator_in_subtask_order():
    subtasks = frozenset(SubtaskId(c, s) for c in (0, 1) for s in (0, 1))
    pending = PendingCheckpoint(4, 0.0, subtasks)
    for chain, subtask in [(1, 1), (0, 1), (1, 0), (0, 0)]:
        uid = "src" if chain == 0 else "max"
        groups = (OPERATOR_STATE_GROUP,) if chain == 0 else (subtask * 64,)
        pending.acknowledge(SubtaskAck(SubtaskId(chain, subtask),
                                       (StateHandle(uid, subtask, f"{uid}/{subtask}.arrow", 10 + subtask, groups),),
                                       source_positions={"src": f"offset {subtask}"} if chain == 0 else {}))
    stats = pending.stats(50.0)
    checkpoint = CompletedCheckpoint.from_acks(pending, "job", [("src", "Source", 2), ("m", "Map", 2),
                                                                ("max", "Reduce", 1)], 128, 3, 1234, stats)
    assert [op.uid for op in checkpoint.operators] == ["src", "m", "max"]
    assert [h.subtask for h in checkpoint.operator("src").handles] == [0, 1]
    assert [h.subtask for h in checkpoint.operator("max").handles] == [0, 1]
    assert checkpoint.operator("m").handles == ()
    assert checkpoint.operator("src").source_positions == {0: "offset 0", 1: "offset 1"}
    assert (checkpoint.parallelism, checkpoint.attempt, checkpoint.timestamp_ms, checkpoint.bytes) == (2, 3, 1234, 42)


def rich_checkpoint():
    return CompletedCheckpoint(
        12, "orders per customer", 1700000000123, 2, 3, 256, (
            OperatorState("src", "File Source", 3, tuple(
                StateHandle("src", s, f"src/{s}.arrow", 40 + s, (OPERATOR_STATE_GROUP,), checksum=f"crc{s}")
                for s in range(3)), {0: "file a, line 4", 2: "file c, line 9"}),
            OperatorState("m", "Map", 3),
            OperatorState("sum", "Keyed Reduce", 2, (
                StateHandle("sum", 0, "sum/0.arrow", 100, (0, 5, 127, OPERATOR_STATE_GROUP)),
                StateHandle("sum", 1, "sum/1.arrow", 90, (128, 255))))),
        CheckpointStats(12, 812.5, 3.25, 120.0, 7.5, 273, 1700000000.5))


def test_completed_checkpoint_round_trips_through_json_metadata():
    checkpoint = rich_checkpoint()
    data = json.loads(json.dumps(checkpoint.to_metadata()))
    assert data["format"] == METADATA_FORMAT and data["parallelism"] == 3
    assert CompletedCheckpoint.from_metadata(data) == checkpoint
    bare = CompletedCheckpoint(1, "job", 0, 0, 1, 128, ())
    assert CompletedCheckpoint.from_metadata(json.loads(json.dumps(bare.to_metadata()))) == bare


def test_completed_checkpoint_round_trips_through_storage():
    storage = CheckpointStorage(f"memory://driver-decisions-{uuid.uuid4().hex}", "orders per customer")
    storage.write_metadata(rich_checkpoint())
    assert storage.read_checkpoint(12) == rich_checkpoint()  # operators in graph order, as written


# What the previous version wrote: format 1 without "parallelism" (and, older still, without stats, job name,
# attempt and source offsets).
FORMAT_1_METADATA = {
    "format": 1,
    "checkpoint_id": 12,
    "job_name": "orders per customer",
    "timestamp_ms": 1700000000123,
    "attempt": 2,
    "max_parallelism": 256,
    "operators": {
        "src": {"name": "File Source", "parallelism": 3, "files": [
            {"uid": "src", "subtask": 0, "path": "src/0.arrow", "size": 40, "key_groups": [-1]},
            {"uid": "src", "subtask": 2, "path": "src/2.arrow", "size": 42, "key_groups": [-1]}]},
        "m": {"name": "Map", "parallelism": 3, "files": []},
        "sum": {"name": "Keyed Reduce", "parallelism": 2, "files": [
            {"uid": "sum", "subtask": 0, "path": "sum/0.arrow", "size": 100, "key_groups": [0, 5, 127, -1]},
            {"uid": "sum", "subtask": 1, "path": "sum/1.arrow", "size": 90, "key_groups": [128, 255]}]},
    },
    "source_offsets": {"src": {"0": "file a, line 4", "2": "file c, line 9"}},
    "stats": {"checkpoint_id": 12, "duration_ms": 812.5, "sync_ms": 3.25, "async_ms": 120.0,
              "alignment_ms": 7.5, "bytes": 272},
}


def test_reads_format_1_metadata_of_the_previous_version():
    checkpoint = CompletedCheckpoint.from_metadata(json.loads(json.dumps(FORMAT_1_METADATA)))
    assert checkpoint.checkpoint_id == 12 and checkpoint.job_name == "orders per customer"
    assert (checkpoint.timestamp_ms, checkpoint.attempt, checkpoint.max_parallelism) == (1700000000123, 2, 256)
    assert checkpoint.parallelism == 3, "without 'parallelism', the highest operator parallelism"
    assert [op.uid for op in checkpoint.operators] == ["src", "m", "sum"]
    assert checkpoint.operator("src").source_positions == {0: "file a, line 4", 2: "file c, line 9"}
    assert checkpoint.operator("sum").handles[0] == StateHandle("sum", 0, "sum/0.arrow", 100,
                                                                (0, 5, 127, OPERATOR_STATE_GROUP))
    assert checkpoint.operator("m").handles == ()
    assert checkpoint.stats == CheckpointStats(12, 812.5, 3.25, 120.0, 7.5, 272, 0.0)
    assert checkpoint.bytes == 272
    again = CompletedCheckpoint.from_metadata(json.loads(json.dumps(checkpoint.to_metadata())))
    assert again == checkpoint


def test_reads_format_1_metadata_without_the_optional_keys():
    data = {k: v for k, v in FORMAT_1_METADATA.items()
            if k not in ("stats", "job_name", "attempt", "source_offsets")}
    checkpoint = CompletedCheckpoint.from_metadata(data)
    assert (checkpoint.job_name, checkpoint.attempt, checkpoint.stats) == ("", 0, None)
    assert checkpoint.operator("src").source_positions == {}
    assert checkpoint.parallelism == 3
    data["stats"], data["source_offsets"] = None, None  # written as null
    assert CompletedCheckpoint.from_metadata(data) == checkpoint
    no_format = {k: v for k, v in data.items() if k != "format"}
    assert CompletedCheckpoint.from_metadata(no_format) == checkpoint


def test_unknown_stats_keys_are_ignored():
    data = dict(FORMAT_1_METADATA, stats=dict(FORMAT_1_METADATA["stats"], state_rows=12345, completed_at=5.0))
    assert CompletedCheckpoint.from_metadata(data).stats == CheckpointStats(12, 812.5, 3.25, 120.0, 7.5, 272, 5.0)


def test_format_1_metadata_restores_into_a_job(tmp_path):
    data = dict(FORMAT_1_METADATA, max_parallelism=128, operators={
        "max": {"name": "Keyed Reduce", "parallelism": 2, "files": [
            {"uid": "max", "subtask": 0, "path": "max/0.arrow", "size": 1, "key_groups": list(range(64))},
            {"uid": "max", "subtask": 1, "path": "max/1.arrow", "size": 1, "key_groups": list(range(64, 128))}]}},
        source_offsets={}, stats=None)
    checkpoint = CompletedCheckpoint.from_metadata(data)
    plan = plan_restore(checkpoint, keyed_graph(3))
    assert_groups_land_once(checkpoint, plan, "max", 3)


def test_a_newer_metadata_format_is_refused():
    data = dict(FORMAT_1_METADATA, format=METADATA_FORMAT + 1)
    with pytest.raises(ValueError, match=f"metadata format {METADATA_FORMAT + 1} is newer .* newer Chandy"):
        CompletedCheckpoint.from_metadata(data)


# =========================================================================================================
# Review follow-ups
# =========================================================================================================


def test_a_non_retryable_runtime_report_outranks_a_silent_slot():
    """A module missing on one executor: its slot reports, Spark may kill the others without a word."""
    load = SlotFailed(0, 1, None, None, 1, "ModuleNotFoundError", "the job could not be loaded", "tb",
                      retryable=False, phase=FailurePhase.LOAD)
    diagnosis = diagnose("job", FailureEvidence(reports=[load], disconnected_slots=[0]))
    assert "could not be loaded" in str(diagnosis.error) and not diagnosis.error.retryable


class FailsOnce:
    """Pickles, except the first time (as a value changed by the subtask while it was being pickled)."""

    failed = False

    def __reduce__(self):
        if not FailsOnce.failed:
            FailsOnce.failed = True
            raise RuntimeError("dictionary changed size during iteration")
        return (FailsOnce, ())


def test_a_pickling_failure_that_no_value_explains_is_not_fatal():
    """A value changed while it was pickled fails this checkpoint only: later ones may well succeed."""
    from state_backends.pickling import pickle_state

    with pytest.raises(RuntimeError, match="changed size") as caught:
        pickle_state({"count": {1: FailsOnce()}}, "keyed state")
    assert not isinstance(caught.value, UnpicklableStateError)


def test_a_cancel_while_the_failure_is_diagnosed_is_not_lost():
    from runtime.checkpoint_config import RestartStrategies
    from runtime.driver.job import CancelRequested, JobMaster

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(0, 9).sink_to(DiscardingSink())
    master = JobMaster(env.get_job_graph("job"), None, {}, RestartStrategies.fixed_delay_restart(3, 0))
    master.events.put(CancelRequested())
    runtime_error = SlotFailed(0, 0, None, None, 0, "ConnectionError", "peer gone", "tb")
    evidence = master._gather_evidence(runtime_error)
    assert evidence.reports == [runtime_error]
    assert master._cancel_requested, "the restart loop sees it and cancels instead of restarting"


class _ControlOfAnAttempt:
    """The job master's view of a control server: the cancels it sent, the slots that reported finishing."""

    def __init__(self, finished=()):
        self.cancels = []
        self.finished = frozenset(finished)

    def cancel(self, message):
        self.cancels.append(message)

    def finished_slots(self):
        return self.finished


def _master_of(slots: int):
    from runtime.checkpoint_config import RestartStrategies
    from runtime.driver.job import JobMaster

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(slots)
    env.from_sequence(0, 9).sink_to(DiscardingSink())
    master = JobMaster(env.get_job_graph("job"), None, {}, RestartStrategies.fixed_delay_restart(3, 0))
    master.control = _ControlOfAnAttempt()
    return master


def test_a_silent_death_cancels_the_others_at_once_and_the_grace_ends_when_every_slot_is_gone():
    """SIGKILL: nothing the dead slot could say is on its way; once the others closed their connections, every
    report any slot sent is in the queue, so the restart need not wait out the grace."""
    from runtime.driver.control_server import SlotDisconnected

    master = _master_of(3)
    secondary = SlotFailed(0, 1, None, None, 1, "ConnectionError", "data connection from subtask 0 broke: EOF", "tb")
    for event in (secondary, SlotDisconnected(0, 1), SlotDisconnected(0, 2)):
        master.events.put(event)
    later = SlotFailed(0, 2, None, None, 2, "RuntimeError", "after the end", "tb")
    master.events.put(later)
    evidence = master._gather_evidence(SlotDisconnected(0, 0))
    assert [type(c).__name__ for c in master.control.cancels] == ["Cancel"]
    assert evidence.disconnected_slots == [0], "slots that closed as they were told are no evidence"
    assert evidence.reports == [secondary]
    assert master.events.get_nowait() is later, "the grace ended once every slot was gone"
    assert "slot 0 died without reporting" in str(diagnose("job", evidence).error)


def test_a_silent_death_still_waits_for_a_slot_that_holds_its_connection(monkeypatch):
    """A slot still connected (or one not registered) may yet report a cause that outranks a silent death."""
    from runtime.driver import job
    from runtime.driver.control_server import SlotDisconnected

    monkeypatch.setattr(job, "FAILURE_GRACE_S", 0.05)
    master = _master_of(2)
    evidence = master._gather_evidence(SlotDisconnected(0, 0))
    assert evidence.disconnected_slots == [0] and len(master.control.cancels) == 1

    master = _master_of(2)
    master.control.finished = frozenset({1})  # a slot that reported finishing closes without a disconnection
    master.events.put(later := SlotFailed(0, 1, None, None, 1, "RuntimeError", "after the end", "tb"))
    master._gather_evidence(SlotDisconnected(0, 0))
    assert master.events.get_nowait() is later


def test_an_operator_error_after_a_silent_death_outranks_it():
    from runtime.driver.control_server import SlotDisconnected

    master = _master_of(2)
    operator = SlotFailed(0, 1, "Map", "map-uid", 1, "ValueError", "bad", "tb")
    master.events.put(operator)
    evidence = master._gather_evidence(SlotDisconnected(0, 0))
    assert "operator 'Map'" in str(diagnose("job", evidence).error)


def test_the_same_record_failing_twice_stops_the_restarts_unless_the_user_chose_a_strategy():
    from runtime.driver.failure_diagnosis import Diagnosis, decide_restart
    from runtime.errors import JobFailedError
    from runtime.protocol.messages import FailurePhase

    def failure(record, message="bad record"):
        return Diagnosis(JobFailedError(message, operator_name="parse"), FailurePhase.RUN,
                         ("parse-uid", "ValueError", message), record)

    stop = decide_restart(failure("'x'"), failure("'x'"), None)
    assert not stop.restart and "operator 'parse' raised the same ValueError on the same record ('x')" in stop.reason
    assert decide_restart(failure("'x'"), failure("'y'"), None).restart
    assert decide_restart(failure("'x'"), failure("'x'", "other"), None).restart
    assert decide_restart(failure(None), failure(None), None).restart
    assert decide_restart(failure("'x'"), failure("'x'"), None, strategy_chosen=True).restart
