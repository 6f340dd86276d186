from operators import FileSink
from operators.two_phase_commit import RecoveredState, TransactionContext


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
