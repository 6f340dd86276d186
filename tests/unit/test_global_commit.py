"""Sinks with one committer (operators.committing): which checkpoints are ready to commit, in which order, and what
a restored committer commits, skips or refuses. The table here is a list of commits; the Delta and Iceberg sinks
run the same committer against real tables in their own tests."""

import pytest

from operators.committing import Committable, CommittableCollector, FileWriter, GlobalCommitSink
from runtime.errors import ApiUsageError, CheckpointError


def test_a_checkpoint_waits_for_every_writer_and_later_ones_wait_for_it():
    collector = CommittableCollector()
    collector.add(Committable(1, 0, 2, ("a1",)))
    collector.add(Committable(2, 0, 2, ("a2",)))
    assert collector.take_ready(2) == (None, ()), "subtask 1 has passed neither: nothing, not even checkpoint 2"
    collector.add(Committable(1, 1, 2, ("b1",)))  # in flight when its checkpoint completed (unaligned)
    assert collector.take_ready(2) == (1, ("a1", "b1")), "checkpoint 2 still waits for subtask 1"
    collector.add(Committable(2, 1, 2, ("b2",)))
    assert collector.take_ready(2) == (2, ("a2", "b2"))
    assert collector.take_ready(2) == (None, ())


def test_only_completed_checkpoints_are_taken():
    collector = CommittableCollector()
    for checkpoint in (1, 2):
        collector.add(Committable(checkpoint, 0, 1, (f"f{checkpoint}",)))
    assert collector.take_ready(1) == (1, ("f1",))
    assert collector.newest() == 2


def test_a_writer_that_never_saw_a_barrier_is_past_it_once_it_sends_a_later_one():
    """An aborted checkpoint, or a barrier overtaken by a newer one: the writer's files ride in its next
    committable, and the checkpoint it skipped must not wait for it."""
    collector = CommittableCollector()
    collector.add(Committable(4, 0, 2, ("a4",)))
    collector.add(Committable(5, 1, 2, ("b4-and-b5",)))  # subtask 1 skipped barrier 4
    assert collector.take_ready(4) == (4, ("a4",))
    collector.add(Committable(5, 0, 2, ("a5",)))
    assert collector.take_ready(5) == (5, ("a5", "b4-and-b5"))


def test_a_finished_writer_is_not_waited_for_after_its_final_committable():
    collector = CommittableCollector()
    collector.add(Committable(3, 1, 2, ("last",), final=True))
    collector.add(Committable(3, 0, 2, ("x",)))
    collector.add(Committable(4, 0, 2, ("y",)))
    assert collector.take_ready(4) == (4, ("x", "last", "y"))


def test_writers_are_counted_per_epoch_so_a_rescaled_run_is_not_mistaken_for_an_old_one():
    collector = CommittableCollector()
    collector.add(Committable(2, 2, 3, ("old-final",), final=True, epoch=0))  # subtask 2 of 3 ended early
    collector.add(Committable(2, 0, 3, ("a",), epoch=0))
    collector.add(Committable(2, 1, 3, ("b",), epoch=0))
    assert collector.take_ready(2) == (2, ("a", "b", "old-final"))
    restored = CommittableCollector.from_state(collector.to_state())
    restored.add(Committable(9, 0, 3, ("n0",), epoch=8))  # restored from checkpoint 8, at parallelism 3 again
    restored.add(Committable(9, 1, 3, ("n1",), epoch=8))
    assert restored.take_ready(9) == (None, ()), "subtask 2 of this run is alive: its committable is awaited"
    restored.add(Committable(9, 2, 3, ("n2",), epoch=8))
    assert restored.take_ready(9) == (9, ("n0", "n1", "n2"))
    assert {writer[0] for writer in restored.passed} == {8}, "the old run's writers are forgotten once drained"


def test_committables_of_an_old_epoch_wait_for_their_own_writers():
    collector = CommittableCollector.from_state([Committable(5, 0, 2, ("old-a",), epoch=0),
                                                 ("passed", (0, 2, 1), 4, False)])
    collector.add(Committable(6, 0, 1, ("new",), epoch=5))
    assert collector.take_ready(6) == (None, ()), "checkpoint 5 waits for old subtask 1 (replayed channel state)"
    collector.add(Committable(5, 1, 2, ("old-b",), epoch=0))
    assert collector.take_ready(6) == (6, ("old-a", "old-b", "new"))


class ListTable(GlobalCommitSink):
    """A table that is a list of (app id, checkpoint id, files) commits, shared by every copy of the sink."""

    def __init__(self, commits: list):
        self.commits = commits

    def create_file_writer(self, subtask, parallelism):
        return _ListWriter()

    def committed_checkpoint(self):
        return max((c for app, c, _ in self.commits if app == self.app_id and c is not None), default=None)

    def commit(self, files, checkpoint_id):
        held = self.committed_checkpoint()
        if checkpoint_id is not None and held is not None and held >= checkpoint_id:
            return False
        self.commits.append((self.app_id, checkpoint_id, files))
        return True


class _ListWriter(FileWriter):
    def __init__(self):
        self.rows = []

    def write(self, records):
        self.rows.extend(records)

    def prepare_commit(self):
        rows, self.rows = tuple(self.rows), []
        return rows


def _committer(commits: list, state=None):
    sink = ListTable(commits)
    sink.bind("job", "sink-committer")
    committer = sink.create_writer(0, 1)
    if state is not None:
        committer.restore_state(state)
    committer.open(None)
    return committer


def _files(commits):
    return [(checkpoint, files) for _, checkpoint, files in commits]


def test_a_commit_repeated_after_a_restore_is_skipped_and_the_rest_is_committed():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 1, ("a",))])
    state = committer.snapshot_state(1)
    committer.notify_checkpoint_complete(1)  # committed; then the worker dies before the next checkpoint
    assert _files(commits) == [(1, ("a",))]
    restored = _committer(commits, state)  # checkpoint 1 still holds "a"
    assert _files(commits) == [(1, ("a",))], "the table holds checkpoint 1 already: not committed again"
    restored.write_batch([Committable(2, 0, 1, ("b",), epoch=1)])
    restored.notify_checkpoint_complete(2)
    assert _files(commits) == [(1, ("a",)), (2, ("b",))]


def test_a_restore_commits_what_its_checkpoint_held_and_the_table_did_not():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 1, ("a",))])
    state = committer.snapshot_state(1)  # the worker dies before checkpoint 1's notification
    _committer(commits, state)
    assert _files(commits) == [(1, ("a",))]


def test_a_job_started_afresh_does_not_take_an_earlier_runs_commits_for_its_own():
    commits = []
    earlier = _committer(commits)
    earlier.write_batch([Committable(57, 0, 1, ("old",))])
    earlier.notify_checkpoint_complete(57)
    fresh = _committer(commits)  # same job and uid, its checkpoint directory gone: ids start at 1 again
    fresh.write_batch([Committable(1, 0, 1, ("new",))])
    fresh.notify_checkpoint_complete(1)
    assert _files(commits) == [(57, ("old",)), (1, ("new",))]
    assert commits[0][0] != commits[1][0], "each execution records its own app id"


def test_restoring_a_checkpoint_older_than_the_tables_newest_commit_is_refused():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(7, 0, 1, ("x",))])
    committer.notify_checkpoint_complete(7)
    app = committer.sink.app_id
    with pytest.raises(CheckpointError, match=r"checkpoint 7 of this sink.*newer than checkpoint 3.*Restore "
                                              r"checkpoint 7.*stop the job with a savepoint"):
        _committer(commits, {"committables": [], "app": [app], "snapshot": [3]})


def test_the_app_id_of_a_restored_committer_is_the_checkpoints():
    committer = _committer([], {"committables": [], "app": ["chandy:old name:sink-committer:1a2b"], "snapshot": [4]})
    assert committer.sink.app_id == "chandy:old name:sink-committer:1a2b"


def test_a_job_without_checkpoints_leaves_its_files_to_the_driver():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 2, ("a",), final=True), Committable(1, 1, 2, ("b",), final=True)])
    sink = ListTable(commits)
    assert sink.merge_results([committer.result()]) == 2
    assert _files(commits) == [(None, ("a", "b"))]


def test_one_sink_object_serves_one_sink_to():
    from runtime import StreamExecutionEnvironment
    from runtime.common import Types

    env = StreamExecutionEnvironment.get_execution_environment()
    rows = env.from_collection([1]).map(lambda n: (n,), output_type=Types.ROW_NAMED(["n"], [Types.LONG()]))
    sink = ListTable([])
    rows.sink_to(sink)
    with pytest.raises(ApiUsageError, match="written to by another sink_to"):
        rows.sink_to(sink)


def test_a_restored_writer_names_checkpoints_after_the_restored_one():
    from operators.committing import CommittableWriterOperator
    from operators.context import SubtaskInfo

    writer = CommittableWriterOperator("writer", ListTable([]))
    writer.setup(SubtaskInfo("writer", 1, 2, 128, 0, restored_checkpoint_id=8))
    writer.open()
    writer.process_batch(["row"])
    assert writer.finish() == [Committable(9, 1, 2, ("row",), final=True, epoch=8)]


def test_a_restored_two_phase_commit_sink_pre_commits_its_end_for_a_checkpoint_after_the_restored_one():
    from operators.context import SubtaskInfo
    from operators.sinks import SinkWriterOperator
    from operators.two_phase_commit import TwoPhaseCommitSink

    class Lists(TwoPhaseCommitSink):
        def begin_transaction(self, context): return []
        def write(self, transaction, records): transaction.extend(records)
        def pre_commit(self, transaction): pass
        def commit(self, transaction): pass
        def abort(self, transaction): pass

    operator = SinkWriterOperator("lists", Lists())
    operator.setup(SubtaskInfo("lists", 0, 1, 128, 0, restored_checkpoint_id=8))
    operator.open()
    operator.process_batch(["row"])
    operator.finish()
    (record,) = operator.writer.pending
    assert record.final and record.checkpoint_id == 9 and not record.due(8) and record.due(9)


def test_writers_stopped_between_different_barriers_commit_everything_and_the_savepoint_restores_rescaled():
    """stop_with_savepoint reaches the writers between different barriers: writer 0 took checkpoint 3, writer 1
    stopped before it. Each hands over its last files for its own next checkpoint (4 and 3), and both are final:
    the final checkpoint commits them all, and the committer's final state (the savepoint's) holds back nothing
    from the job restored from it at parallelism 3."""
    from operators.committing import CommittableWriterOperator
    from operators.context import SubtaskInfo

    commits = []
    table = ListTable(commits)
    table.bind("job", "sink-committer")
    writers = []
    for subtask in range(2):
        writer = CommittableWriterOperator("writer", table)
        writer.setup(SubtaskInfo("writer", subtask, 2, 128, 0))
        writer.open()
        writers.append(writer)
    committer = table.create_writer(0, 1)
    committer.open(None)
    writers[0].process_batch(["a3"])
    writers[1].process_batch(["b3"])
    committer.write_batch(writers[0].prepare_snapshot_pre_barrier(3))  # writer 1 never sees barrier 3
    writers[0].process_batch(["a-stop"])
    writers[1].process_batch(["b-stop"])
    committer.write_batch(writers[0].prepare_stop(4) + writers[1].prepare_stop(3))
    savepoint = committer.snapshot_state(4)  # the committer's final state: the stop's savepoint (checkpoint 5)
    committer.notify_checkpoint_complete(5)
    assert _files(commits) == [(4, ("a3", "b3", "b-stop", "a-stop"))], "the final checkpoint commits every file"

    restored = _committer(commits, savepoint)
    new = []
    for subtask in range(3):
        writer = CommittableWriterOperator("writer", restored.sink)
        writer.setup(SubtaskInfo("writer", subtask, 3, 128, 0, restored_checkpoint_id=5))
        writer.open()
        writer.process_batch([f"n{subtask}"])
        new += writer.prepare_snapshot_pre_barrier(6)
    restored.write_batch(new)
    restored.notify_checkpoint_complete(6)
    assert _files(commits)[1:] == [(6, ("n0", "n1", "n2"))], "the restored job commits what it writes"
