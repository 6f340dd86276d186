import pickle

import pytest

from operators import FileSink, TransactionStatus
from operators.two_phase_commit import RecoveredState, TransactionContext
from runtime.errors import TransactionStateError


def make_sink(url):
    sink = FileSink(url, format="jsonl", max_part_bytes=10)
    sink.validate()
    return sink


def test_object_store_commit_is_write_then_marker():
    sink = make_sink("memory://chandy-test-out")
    txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(txn, [{"a": 1}, {"a": 2}])
    sink.write(txn, [{"a": 3}])  # the first part reached 10 bytes: a second part
    sink.pre_commit(txn)
    assert len(txn.parts) == 2 and sink.committed_files() == []
    sink.commit(txn)
    sink.commit(txn)  # idempotent
    assert sink.read_committed() == [{"a": 1}, {"a": 2}, {"a": 3}]
    aborted = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 1))
    sink.write(aborted, ["x"])
    sink.abort(aborted)
    assert sink.read_committed() == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert sink.fs.ls(sink._path("_inprogress"), detail=False) == []


def test_recover_commits_pending_and_rolls_back_what_came_after_the_checkpoint(tmp_path):
    sink = make_sink(str(tmp_path / "out"))
    txns = []
    for sequence in range(4):
        txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, sequence))
        sink.write(txn, [sequence])
        sink.pre_commit(txn)
        txns.append(txn)
    sink.commit(txns[0])
    sink.commit(txns[2])  # committed after the checkpoint we restore below
    leftover = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 4))
    sink.write(leftover, ["in progress"])
    # the checkpoint: sequences 0 and 1 in it, 1 pending; everything from 2 on came later
    sink.recover(RecoveredState(sink.run_id, (txns[1],), {0: 2}))
    assert sorted(sink.read_committed()) == [0, 1]
    assert list((tmp_path / "out" / "_inprogress").iterdir()) == []


def test_parquet_parts_roll_and_commit(tmp_path):
    sink = FileSink(str(tmp_path / "out"), format="parquet", max_part_bytes=200)
    sink.validate()
    txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    for start in range(0, 100, 10):
        sink.write(txn, [{"i": i, "name": f"n{i}"} for i in range(start, start + 10)])
    sink.pre_commit(txn)
    sink.commit(txn)
    assert len(txn.parts) > 1
    assert sorted(r["i"] for r in sink.read_committed()) == list(range(100))


def test_a_transaction_records_its_status(tmp_path):
    sink = make_sink(str(tmp_path / "out"))
    txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    assert txn.status is TransactionStatus.OPEN
    sink.write(txn, [{"a": 1}])
    assert txn.status is TransactionStatus.OPEN
    sink.pre_commit(txn)
    assert txn.status is TransactionStatus.PRE_COMMITTED
    stored = pickle.loads(pickle.dumps(txn))
    sink.commit(txn)
    assert txn.status is TransactionStatus.COMMITTED
    # a copy from a checkpoint still says pre-committed: committing it again is decided by the files
    assert stored.status is TransactionStatus.PRE_COMMITTED
    sink.commit(stored)
    assert stored.status is TransactionStatus.COMMITTED and sink.read_committed() == [{"a": 1}]
    aborted = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 1))
    sink.abort(aborted)
    assert aborted.status is TransactionStatus.ABORTED


def test_illegal_transitions_are_refused_and_change_nothing(tmp_path):
    sink = make_sink(str(tmp_path / "out"))
    open_txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(open_txn, [{"a": 1}])
    with pytest.raises(TransactionStateError, match="Cannot commit FileSink transaction .*-0-0: it is open"):
        sink.commit(open_txn)  # its part is still being written
    sink.pre_commit(open_txn)
    with pytest.raises(TransactionStateError, match="Cannot write to .*: it is pre-committed"):
        sink.write(open_txn, [{"a": 2}])
    with pytest.raises(TransactionStateError, match="Cannot pre-commit .*: it is pre-committed"):
        sink.pre_commit(open_txn)
    sink.commit(open_txn)
    with pytest.raises(TransactionStateError, match="Cannot abort .*: it is committed"):
        sink.abort(open_txn)
    assert sink.read_committed() == [{"a": 1}]
    discarded = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 1))
    sink.write(discarded, [{"a": 3}])
    sink.abort(discarded)
    with pytest.raises(TransactionStateError, match="Cannot commit .*: it is aborted"):
        sink.commit(discarded)
    assert sink.read_committed() == [{"a": 1}]


def test_read_committed_keeps_the_order_of_ten_parts_and_more(tmp_path):
    sink = FileSink(str(tmp_path / "out"), format="text", max_part_bytes=1)
    sink.validate()
    txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    for i in range(12):
        sink.write(txn, [str(i)])
    sink.pre_commit(txn)
    sink.commit(txn)
    assert len(txn.parts) == 12
    assert sink.read_committed() == [str(i) for i in range(12)]


def test_transactions_checkpointed_by_chandy_0_1_still_restore(tmp_path):
    """Chandy 0.1 checkpointed ``(checkpoint id, transaction)`` tuples and FileTransactions without a status."""
    sink = make_sink(str(tmp_path / "out"))
    txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 0))
    sink.write(txn, [{"a": 1}])
    sink.pre_commit(txn)
    del txn.__dict__["status"]  # as pickled by 0.1
    legacy = pickle.loads(pickle.dumps(txn))
    assert legacy.status is TransactionStatus.PRE_COMMITTED
    writer = sink.create_writer(0, 1)
    writer.restore_state({"union:pending": [(3, legacy)], "union:sequence": [(0, 1)], "union:run": [sink.run_id]})
    assert sink.read_committed() == [{"a": 1}]
