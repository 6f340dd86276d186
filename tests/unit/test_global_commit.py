"""Sinks with one committer (operators.committing): which checkpoints are ready to commit, in which order, and what
a restored committer commits, skips or refuses. The table here is a list of commits; the Delta and Iceberg sinks
run the same committer against real tables in their own tests."""

import pytest

from operators.committing import Committable, CommittableCollector, FileWriter, GlobalCommitSink
from runtime.errors import CheckpointError


def test_a_checkpoint_waits_for_every_writer_and_later_ones_wait_for_it():
    collector = CommittableCollector()
    collector.add(Committable(1, 0, 2, ("a1",)))
    collector.add(Committable(2, 0, 2, ("a2",)))
    collector.add(Committable(2, 1, 2, ("b2",)))
    assert collector.take_ready(2) == (None, ()), "checkpoint 1 misses subtask 1: nothing, not even checkpoint 2"
    collector.add(Committable(1, 1, 2, ("b1",)))  # in flight when its checkpoint completed (unaligned)
    assert collector.take_ready(2) == (2, ("a1", "b1", "a2", "b2"))
    assert collector.take_ready(2) == (None, ())


def test_only_completed_checkpoints_are_taken():
    collector = CommittableCollector()
    for checkpoint in (1, 2):
        collector.add(Committable(checkpoint, 0, 1, (f"f{checkpoint}",)))
    assert collector.take_ready(1) == (1, ("f1",))
    assert collector.newest() == 2


def test_a_finished_writer_is_not_waited_for_after_its_final_committable():
    collector = CommittableCollector()
    collector.add(Committable(3, 1, 2, ("last",), final=True))
    collector.add(Committable(3, 0, 2, ("x",)))
    collector.add(Committable(4, 0, 2, ("y",)))
    assert collector.take_ready(4) == (4, ("x", "last", "y"))


def test_rescaled_writers_are_counted_by_their_own_parallelism():
    collector = CommittableCollector.from_state([Committable(5, 0, 1, ("old",))])
    collector.add(Committable(6, 0, 3, ("n0",)))
    collector.add(Committable(6, 2, 3, ("n2",)))
    assert collector.take_ready(6) == (5, ("old",))
    collector.add(Committable(6, 1, 3, ("n1",)))
    assert collector.take_ready(6) == (6, ("n0", "n1", "n2"))


class ListTable(GlobalCommitSink):
    """A table that is a list of (checkpoint id, files) commits, shared by every copy of the sink."""

    def __init__(self, commits: list):
        self.commits = commits

    def create_file_writer(self, subtask, parallelism):
        return _ListWriter()

    def committed_checkpoint(self):
        return max((c for c, _ in self.commits if c is not None), default=None)

    def commit(self, files, checkpoint_id):
        self.commits.append((checkpoint_id, files))


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


def test_a_commit_repeated_after_a_restore_is_skipped_and_the_rest_is_committed():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 1, ("a",))])
    state = committer.snapshot_state(1)
    committer.notify_checkpoint_complete(1)  # committed; then the worker dies before the next checkpoint
    assert commits == [(1, ("a",))]
    restored = _committer(commits, state)  # checkpoint 1 still holds "a"
    assert commits == [(1, ("a",))], "the table holds checkpoint 1 already: not committed again"
    restored.write_batch([Committable(2, 0, 1, ("b",))])
    restored.notify_checkpoint_complete(2)
    assert commits == [(1, ("a",)), (2, ("b",))]


def test_a_restore_commits_what_its_checkpoint_held_and_the_table_did_not():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 1, ("a",))])
    state = committer.snapshot_state(1)  # the worker dies before checkpoint 1's notification
    _committer(commits, state)
    assert commits == [(1, ("a",))]


def test_restoring_a_checkpoint_older_than_the_tables_newest_commit_is_refused():
    commits = [(7, ("x",))]
    committer = _committer(commits)
    committer.write_batch([Committable(8, 0, 1, ("y",))])
    with pytest.raises(CheckpointError, match=r"checkpoint 7 of this sink.*newer than checkpoint 3.*Restore "
                                              r"checkpoint 7"):
        _committer(commits, {"committables": [], "app": ["chandy:job:sink-committer"], "snapshot": [3]})


def test_the_app_id_of_a_restored_committer_is_the_checkpoints():
    commits = []
    committer = _committer(commits, {"committables": [], "app": ["chandy:old name:sink-committer"], "snapshot": [4]})
    assert committer.sink.app_id == "chandy:old name:sink-committer"


def test_a_job_without_checkpoints_leaves_its_files_to_the_driver():
    commits = []
    committer = _committer(commits)
    committer.write_batch([Committable(1, 0, 2, ("a",), final=True), Committable(1, 1, 2, ("b",), final=True)])
    sink = ListTable(commits)
    assert sink.merge_results([committer.result()]) == 2
    assert commits == [(None, ("a", "b"))]
