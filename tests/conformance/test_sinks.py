"""The two-phase-commit contract, run against every transactional sink (as fsspec's abstract test suites).

Implementations: ``FileSink`` in each format (the named ones, and PyFlink's bulk writers: Parquet and ORC of a row
type, Avro data files, Avro records in Parquet, CSV with a schema) on a local directory and on fsspec's
``memory://``, the exactly-once JDBC sink on the session's PostgreSQL server (``JdbcSink.exactly_once_sink``), and
``MemoryTransactionalSink`` below, a minimal sink that shares nothing with ``FileSink``: the tests are about the
contract (``TwoPhaseCommitSink`` and the writer that drives it), not about files.

Sinks whose writes are upserts by key (at-least-once delivery, exact output) have a suite of their own at the end:
``JdbcSink.upsert_sink`` on PostgreSQL, and a minimal in-memory ``IdempotentSink``.

Each implementation has a harness: ``sink()`` makes a validated sink at the test's location, ``restarted(sink)``
the same sink as another process has it after a crash (pickled: open files and buffers do not travel),
``visible()`` what a reader sees, in the sink's order, ``leftovers(sink)`` what the sink still holds of
uncommitted transactions. Records are chosen per format to read back equal (csv rows are lists of strings,
parquet and jsonl rows dicts, text lines strings, bulk formats' Rows or dicts as an independent reader gives them
back), so the tests compare them as written.
"""

from __future__ import annotations

import csv
import io
import pickle
import posixpath
import uuid

import fastavro
import fsspec
import pyarrow.orc
import pyarrow.parquet as pq
import pytest
from psycopg import sql

from operators import FileSink, TransactionStatus
from operators.two_phase_commit import IdempotentSink, RecoveredState, TransactionContext, TwoPhaseCommitSink
from runtime.common import Types
from runtime.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExactlyOnceOptions, JdbcSink
from runtime.datastream.formats.avro import AvroBulkWriters, AvroSchema
from runtime.datastream.formats.csv import CsvBulkWriters, CsvSchema
from runtime.datastream.formats.orc import OrcBulkWriters
from runtime.datastream.formats.parquet import AvroParquetWriters, ParquetBulkWriters
from runtime.errors import OutputCommitError, TransactionStateError
from runtime.table import DataTypes
from runtime.types import Row, RowKind

FORMATS = ("jsonl", "csv", "text", "parquet")
STORAGES = ("local", "memory")


class MemoryTransactionalSink(TwoPhaseCommitSink):
    """The smallest honest transactional sink. Transactions are dicts; ``STORE`` (class-level, one entry per
    namespace) stands for durable storage: pre-committed records are staged there, committed ones appended.
    Records written but not pre-committed stay in the instance's buffers, lost if its process dies."""

    STORE: dict = {}  # namespace -> {"staged": {transaction id: records}, "committed": [(transaction id, records)]}

    def __init__(self, namespace: str):
        self.namespace = namespace
        self.name = f"MemoryTransactionalSink({namespace})"
        self._buffers: dict[str, list] = {}

    def __getstate__(self):
        return {**self.__dict__, "_buffers": {}}

    @property
    def storage(self) -> dict:
        return self.STORE.setdefault(self.namespace, {"staged": {}, "committed": []})

    def begin_transaction(self, context: TransactionContext) -> dict:
        return {"id": f"{context.run_id}-{context.subtask}-{context.sequence}"}

    def write(self, transaction: dict, records: list) -> None:
        self._buffers.setdefault(transaction["id"], []).extend(records)

    def pre_commit(self, transaction: dict) -> None:
        self.storage["staged"][transaction["id"]] = self._buffers.pop(transaction["id"], [])

    def commit(self, transaction: dict) -> None:
        storage = self.storage
        if transaction["id"] in storage["staged"]:
            storage["committed"].append((transaction["id"], storage["staged"].pop(transaction["id"])))
        elif all(done != transaction["id"] for done, _ in storage["committed"]):
            raise OutputCommitError(f"transaction {transaction['id']} was never pre-committed")

    def abort(self, transaction: dict) -> None:
        self._buffers.pop(transaction["id"], None)
        self.storage["staged"].pop(transaction["id"], None)

    def visible(self) -> list:
        return [record for _, records in self.storage["committed"] for record in records]


# -- harnesses -------------------------------------------------------------------------------------------


class FileSinkHarness:
    can_retract = True  # recover() removes this run's output written after the checkpoint
    rolls_parts = True

    def __init__(self, format: str, url: str):
        self.format, self.url = format, url

    def sink(self, max_part_bytes: int = 128 << 20) -> FileSink:
        sink = FileSink(self.url, format=self.format, max_part_bytes=max_part_bytes)
        sink.validate()
        return sink

    def records(self, start: int, count: int) -> list:
        numbers = range(start, start + count)
        if self.format == "csv":
            return [[str(i), f"r{i}"] for i in numbers]
        if self.format == "text":
            return [f"line {i}" for i in numbers]
        return [{"i": i, "name": f"r{i}"} for i in numbers]

    def visible(self) -> list:
        rows = FileSink(self.url, format=self.format).read_committed()  # a reader with nothing in common
        if self.format == "csv":
            return [list(row) for row in rows]
        if self.format == "parquet":
            return [dict(row) for row in rows]
        return rows

    def leftovers(self, sink: FileSink) -> list:
        inprogress = posixpath.join(sink.root, "_inprogress")
        files = sorted(sink.fs.find(inprogress)) if sink.fs.exists(inprogress) else []
        return files + [f"open part of {key}" for key in sink._open]

    def cleanup(self) -> None:
        if self.url.startswith("memory://"):
            fs, root = fsspec.core.url_to_fs(self.url)
            if fs.exists(root):
                fs.rm(root, recursive=True)


_ROW_TYPE = DataTypes.ROW([DataTypes.FIELD("i", DataTypes.BIGINT()), DataTypes.FIELD("name", DataTypes.STRING())])
_AVRO = AvroSchema.parse_string('{"type": "record", "name": "R", "fields": [{"name": "i", "type": "long"}, '
                                '{"name": "name", "type": "string"}]}')


def _parquet_rows(file) -> list:
    return [Row(**row) for row in pq.read_table(file).to_pylist()]


def _orc_rows(file) -> list:
    return [Row(**row) for row in pyarrow.orc.read_table(file).to_pylist()]


def _csv_rows(file) -> list:
    return [Row(i=int(i), name=name) for i, name in csv.reader(io.StringIO(file.read().decode()))]


# name -> (the writer factory, whether records are dicts (else Rows), an independent reader of one file)
BULK_FORMATS = {
    "parquet_rows": (lambda: ParquetBulkWriters.for_row_type(_ROW_TYPE), False, _parquet_rows),
    "orc": (lambda: OrcBulkWriters.for_row_type(_ROW_TYPE), False, _orc_rows),
    "csv_schema": (lambda: CsvBulkWriters.for_schema(CsvSchema.builder().add_number_column("i")
                                                     .add_string_column("name").build()), False, _csv_rows),
    "avro": (lambda: AvroBulkWriters.for_generic_record(_AVRO), True, lambda file: list(fastavro.reader(file))),
    "avro_parquet": (lambda: AvroParquetWriters.for_generic_record(_AVRO), True,
                     lambda file: pq.read_table(file).to_pylist()),
}


class BulkFileSinkHarness(FileSinkHarness):
    """A ``FileSink`` writing with one of PyFlink's bulk writer factories; what is visible is read from its committed
    files by pyarrow, fastavro or the csv module."""

    def sink(self, max_part_bytes: int = 128 << 20) -> FileSink:
        factory, _, _ = BULK_FORMATS[self.format]
        sink = FileSink(self.url, format=factory(), max_part_bytes=max_part_bytes)
        sink.validate()
        return sink

    def records(self, start: int, count: int) -> list:
        _, dicts, _ = BULK_FORMATS[self.format]
        return [{"i": i, "name": f"r{i}"} if dicts else Row(i=i, name=f"r{i}") for i in range(start, start + count)]

    def visible(self) -> list:
        _, _, read = BULK_FORMATS[self.format]
        sink = self.sink()
        records = []
        for path in sink.committed_files():
            with sink.fs.open(path, "rb") as file:
                records.extend(read(file))
        return records


class MemorySinkHarness:
    can_retract = False  # the base class's recover() only commits what the checkpoint had pending
    rolls_parts = False

    def __init__(self):
        self.namespace = uuid.uuid4().hex

    def sink(self, max_part_bytes: int | None = None) -> MemoryTransactionalSink:
        sink = MemoryTransactionalSink(self.namespace)
        sink.validate()
        return sink

    def records(self, start: int, count: int) -> list:
        return [{"i": i, "name": f"r{i}"} for i in range(start, start + count)]

    def visible(self) -> list:
        return MemoryTransactionalSink(self.namespace).visible()

    def leftovers(self, sink: MemoryTransactionalSink) -> list:
        return sorted(sink.storage["staged"]) + [f"buffer of {key}" for key in sink._buffers]

    def cleanup(self) -> None:
        MemoryTransactionalSink.STORE.pop(self.namespace, None)


def jdbc_options(server) -> JdbcConnectionOptions:
    return (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(server.jdbc_url)
            .with_driver_name("org.postgresql.Driver").with_user_name(server.user).with_password(server.password)
            .build())


_JDBC_ROW = Types.ROW_NAMED(["i", "name"], [Types.LONG(), Types.STRING()])


class PostgresSinkHarness:
    """``JdbcSink.exactly_once_sink`` into a table of its own; ``position`` keeps the order rows were written in, and
    what the sink holds is its transactions still prepared on the server or open in this process."""

    can_retract = False  # a restore commits the checkpoint's transactions; committed rows stay committed
    rolls_parts = False

    def __init__(self, server):
        self.server = server
        self.table = server.table("conformance", "position bigserial, i bigint, name text")
        self.prefix = f"conformance-{uuid.uuid4().hex[:8]}"

    def sink(self, max_part_bytes: int | None = None):
        sink = JdbcSink.exactly_once_sink(
            f"insert into {self.table} (i, name) values (?, ?)", _JDBC_ROW, jdbc_options(self.server),
            exactly_once_options=JdbcExactlyOnceOptions.builder().with_transaction_id_prefix(self.prefix).build())
        sink.validate()
        return sink

    def records(self, start: int, count: int) -> list:
        return [(i, f"r{i}") for i in range(start, start + count)]

    def visible(self) -> list:
        return self.server.query(f"SELECT i, name FROM {self.table} ORDER BY position")

    def leftovers(self, sink) -> list:
        held = sink._connections.open if sink._connections is not None else {}
        return self.server.prepared_transactions(f"chandy:{self.prefix}:") + [f"open {gid}" for gid in held]

    def cleanup(self) -> None:
        for gid in self.server.prepared_transactions(f"chandy:{self.prefix}:"):  # the server has few of them
            self.server.query(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
        self.server.query(f"DROP TABLE {self.table}")


IMPLEMENTATIONS = [f"file-{format}-{storage}" for format in FORMATS for storage in STORAGES] + \
    [f"bulk-{format}-{storage}" for format in BULK_FORMATS for storage in STORAGES] + ["memory-sink"] + \
    [pytest.param("jdbc-postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request, tmp_path):
    if request.param == "memory-sink":
        harness = MemorySinkHarness()
    elif request.param == "jdbc-postgres":
        harness = PostgresSinkHarness(request.getfixturevalue("postgres"))
    else:
        kind, format, storage = request.param.split("-")
        url = str(tmp_path / "out") if storage == "local" else f"memory://chandy-conformance-{uuid.uuid4().hex}"
        harness = (FileSinkHarness if kind == "file" else BulkFileSinkHarness)(format, url)
    yield harness
    harness.cleanup()


def restarted(sink):
    """``sink`` as another process has it: what travels pickled, nothing the crashed process held."""
    return pickle.loads(pickle.dumps(sink))


def checkpointed(value):
    """``value`` as a checkpoint stores it and a restore reads it back."""
    return pickle.loads(pickle.dumps(value))


def begin(sink, sequence: int, subtask: int = 0, parallelism: int = 1):
    return sink.begin_transaction(TransactionContext(sink.run_id, subtask, parallelism, sequence))


def bag(records: list) -> list:
    """``records`` in an order of their own, for outputs whose order across transactions is the sink's."""
    return sorted(records, key=repr)


# -- transactions ----------------------------------------------------------------------------------------


def test_written_data_is_invisible_until_commit(impl):
    sink = impl.sink()
    records = impl.records(0, 3)
    transaction = begin(sink, 0)
    sink.write(transaction, records)
    assert impl.visible() == []
    sink.pre_commit(transaction)
    assert impl.visible() == []
    sink.commit(transaction)
    assert impl.visible() == records


def test_pre_commit_makes_the_data_durable_but_still_invisible(impl):
    sink = impl.sink()
    records = impl.records(0, 3)
    transaction = begin(sink, 0)
    sink.write(transaction, records)
    sink.pre_commit(transaction)
    stored = checkpointed(transaction)
    assert impl.visible() == []
    # the process that wrote it dies; the one restoring the checkpoint commits it from storage alone
    restarted(sink).commit(stored)
    assert impl.visible() == records


def test_commit_makes_exactly_that_transaction_visible(impl):
    sink = impl.sink()
    first, second, unfinished = begin(sink, 0), begin(sink, 1), begin(sink, 2)
    sink.write(first, impl.records(0, 2))
    sink.write(second, impl.records(10, 2))
    sink.write(unfinished, impl.records(20, 2))
    sink.pre_commit(first)
    sink.pre_commit(second)
    sink.commit(second)
    assert impl.visible() == impl.records(10, 2)
    sink.commit(first)
    assert bag(impl.visible()) == bag(impl.records(0, 2) + impl.records(10, 2))
    sink.abort(unfinished)


def test_commit_twice_is_harmless(impl):
    sink = impl.sink()
    records = impl.records(0, 3)
    transaction = begin(sink, 0)
    sink.write(transaction, records)
    sink.pre_commit(transaction)
    stored = checkpointed(transaction)  # says pre-committed, forever
    sink.commit(transaction)
    sink.commit(transaction)
    restarted(sink).commit(stored)  # a restore commits the checkpoint's copy once more
    assert impl.visible() == records
    assert impl.leftovers(sink) == []


def test_abort_discards_and_is_idempotent(impl):
    sink = impl.sink()
    transaction = begin(sink, 0)
    sink.write(transaction, impl.records(0, 3))
    sink.abort(transaction)
    sink.abort(transaction)
    restarted(sink).abort(checkpointed(transaction))
    assert impl.visible() == []
    assert impl.leftovers(sink) == []
    later = begin(sink, 1)  # aborting one transaction does not harm the next
    sink.write(later, impl.records(10, 2))
    sink.pre_commit(later)
    sink.commit(later)
    assert impl.visible() == impl.records(10, 2)


def test_abort_after_pre_commit_discards(impl):
    sink = impl.sink()
    transaction = begin(sink, 0)
    sink.write(transaction, impl.records(0, 3))
    sink.pre_commit(transaction)
    stored = checkpointed(transaction)
    sink.abort(transaction)
    assert impl.visible() == []
    assert impl.leftovers(sink) == []
    restarted(sink).abort(stored)
    assert impl.visible() == [] and impl.leftovers(sink) == []


def test_a_transaction_of_many_writes_and_parts_commits_them_all_in_order(impl):
    sink = impl.sink(max_part_bytes=1)  # FileSink: every write after the first starts a new part
    batches = [impl.records(10 * n, 3) for n in range(6)]  # fewer than 10 parts: see test_file_sink
    transaction = begin(sink, 0)
    for batch in batches:
        sink.write(transaction, batch)
    sink.pre_commit(transaction)
    if impl.rolls_parts:
        assert len(transaction.parts) == len(batches)
    assert impl.visible() == []
    sink.commit(transaction)
    assert impl.visible() == [record for batch in batches for record in batch]


def test_recover_commits_what_was_pending_and_rolls_back_what_came_after(impl):
    sink = impl.sink()
    batches = [impl.records(10 * n, 2) for n in range(5)]
    transactions = []
    for sequence in range(4):
        transaction = begin(sink, sequence)
        sink.write(transaction, batches[sequence])
        sink.pre_commit(transaction)
        transactions.append(transaction)
    pending = checkpointed(transactions[1])  # the checkpoint: sequences 0 and 1 in it, 1 still pending
    sink.commit(transactions[0])
    sink.commit(transactions[2])  # a later checkpoint completed before the failure
    unfinished = begin(sink, 4)  # open when the process died
    sink.write(unfinished, batches[4])
    other = impl.sink()  # another run writing to the same place
    assert other.run_id != sink.run_id
    theirs, theirs_pending = begin(other, 0), begin(other, 1)
    their_records = impl.records(100, 2), impl.records(110, 2)
    for transaction, records in zip((theirs, theirs_pending), their_records):
        other.write(transaction, records)
        other.pre_commit(transaction)
    other.commit(theirs)

    state = RecoveredState(sink.run_id, (pending,), {0: 2})
    restored = restarted(sink)
    restored.recover(state)
    later = [] if impl.can_retract else batches[2]  # committed after the checkpoint: only some sinks retract
    expected = batches[0] + batches[1] + later + their_records[0]
    assert bag(impl.visible()) == bag(expected)
    restarted(sink).recover(checkpointed(state))  # a restore that failed half-way runs again
    assert bag(impl.visible()) == bag(expected)
    other.commit(theirs_pending)  # the other run's files were left alone
    assert bag(impl.visible()) == bag(expected + their_records[1])
    if impl.can_retract:
        assert impl.leftovers(restored) == []  # this run's uncommitted output is gone


# -- the writer the runtime drives -----------------------------------------------------------------------


def test_a_checkpoint_becomes_visible_exactly_once_when_it_completes(impl):
    sink = impl.sink()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    a, b, c, d = impl.records(0, 2), impl.records(10, 2), impl.records(20, 2), impl.records(30, 2)
    writer.write_batch(a)
    writer.snapshot_state(1)
    writer.write_batch(b)
    assert impl.visible() == []  # checkpoint 1 has not completed
    writer.notify_checkpoint_complete(1)
    assert impl.visible() == a
    writer.notify_checkpoint_complete(1)
    assert impl.visible() == a  # b came after the last snapshot
    writer.snapshot_state(2)
    writer.write_batch(c)
    writer.snapshot_state(3)
    writer.write_batch(d)
    writer.snapshot_state(4)
    writer.notify_checkpoint_complete(3)  # 2's notification was lost: 3 commits everything up to it
    assert impl.visible() == a + b + c  # and nothing of checkpoint 4
    writer.notify_checkpoint_complete(4)
    assert impl.visible() == a + b + c + d
    writer.close()
    assert impl.visible() == a + b + c + d


def test_the_writer_checkpoints_named_union_lists(impl):
    sink = impl.sink()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch(impl.records(0, 2))
    state = writer.snapshot_state(7)
    assert sorted(state) == ["union:pending", "union:run", "union:sequence"]
    assert all(type(items) is list for items in state.values())
    [record] = checkpointed(state)["union:pending"]
    assert (record.status, record.checkpoint_id, record.final) == (TransactionStatus.PRE_COMMITTED, 7, False)
    assert state["union:sequence"] == [(0, 1)] and state["union:run"] == [sink.run_id]
    writer.close()


def test_finish_then_the_driver_commits_the_rest(impl):
    sink = impl.sink()
    writers = [sink.create_writer(subtask, 2) for subtask in range(2)]
    a = [impl.records(0, 2), impl.records(10, 2)]
    b = [impl.records(20, 2), impl.records(30, 2)]
    c = impl.records(40, 2)
    for writer in writers:
        writer.open(None)
    for writer, records in zip(writers, a):
        writer.write_batch(records)
        writer.snapshot_state(1)
        writer.notify_checkpoint_complete(1)
    for writer, records in zip(writers, b):
        writer.write_batch(records)
        writer.snapshot_state(2)  # never completes: checkpoints stop when a task finishes
    writers[0].write_batch(c)
    for writer in writers:
        writer.finish()
    assert bag(impl.visible()) == bag(a[0] + a[1])
    results = [checkpointed(writer.result()) for writer in writers]  # they travel to the driver
    for writer in writers:
        writer.close()  # after finish there is nothing open to abort
    assert bag(impl.visible()) == bag(a[0] + a[1])
    assert restarted(sink).merge_results(results) == 4  # each subtask: checkpoint 2's and the final one
    assert bag(impl.visible()) == bag(a[0] + a[1] + b[0] + b[1] + c)
    assert impl.leftovers(sink) == []


def test_close_without_finish_aborts_the_open_transaction(impl):
    sink = impl.sink()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch(impl.records(0, 3))
    writer.close()  # cancelled
    assert impl.visible() == []
    assert impl.leftovers(sink) == []


def test_the_writer_refuses_calls_out_of_order(impl):
    sink = impl.sink()
    records = impl.records(0, 2)
    writer = sink.create_writer(0, 1)
    with pytest.raises(TransactionStateError, match="before open"):
        writer.write_batch(records)
    writer.open(None)
    writer.write_batch(records)
    writer.finish()
    for call in (lambda: writer.write_batch(records), writer.finish):
        with pytest.raises(TransactionStateError, match="after finish"):
            call()
    final = writer.snapshot_state(1)  # the final state of a finished subtask: what finish() pre-committed
    assert len(final["union:pending"]) == 1 and final["union:pending"][0].status is TransactionStatus.PRE_COMMITTED
    writer.close()
    assert restarted(sink).merge_results([writer.result()]) == 1
    assert impl.visible() == records  # the refused calls changed nothing


@pytest.mark.parametrize("notified", [False, True], ids=["unnotified", "notified"])
def test_a_restored_writer_continues_exactly_once(impl, notified):
    sink = impl.sink()
    a, b, c = impl.records(0, 2), impl.records(10, 2), impl.records(20, 2)
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch(a)
    state = checkpointed(writer.snapshot_state(1))
    if notified:
        writer.notify_checkpoint_complete(1)
    writer.write_batch(b)  # after the checkpoint: the replay writes it again
    # the process dies (no close); checkpoint 1 completed, whether or not the writer heard of it
    restored_sink = restarted(sink)
    restored = restored_sink.create_writer(0, 1)
    restored.restore_state(state)
    restored.open(None)
    assert impl.visible() == a  # the restore committed what checkpoint 1 had pending, once
    restored.write_batch(b)
    restored.write_batch(c)
    restored.snapshot_state(2)
    assert impl.visible() == a
    restored.notify_checkpoint_complete(2)
    assert impl.visible() == a + b + c
    restored.close()
    if impl.can_retract:
        assert impl.leftovers(restored_sink) == []


def test_restoring_an_older_checkpoint_retracts_what_came_after_it(impl):
    if not impl.can_retract:
        pytest.skip("this sink cannot retract committed output: restoring an older checkpoint repeats it")
    sink = impl.sink()
    a, b, c = impl.records(0, 2), impl.records(10, 2), impl.records(20, 2)
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch(a)
    older = checkpointed(writer.snapshot_state(1))
    writer.notify_checkpoint_complete(1)
    writer.write_batch(b)
    writer.snapshot_state(2)
    writer.notify_checkpoint_complete(2)
    writer.write_batch(c)
    assert impl.visible() == a + b
    for attempt in range(2):  # the first attempt from the older checkpoint commits output, then fails too
        restored_sink = restarted(sink)
        restored_sink.validate()  # a new execution: a new run id, but the writer keeps the checkpoint's
        restored = restored_sink.create_writer(0, 1)
        restored.restore_state(checkpointed(older))
        restored.open(None)
        assert impl.visible() == a
        restored.write_batch(b + c)  # the replay
        restored.snapshot_state(2)
        restored.notify_checkpoint_complete(2)
        assert impl.visible() == a + b + c
    restored.close()
    assert impl.leftovers(restored_sink) == []


def test_a_rescaled_restore_commits_every_old_subtasks_pending_once(impl):
    sink = impl.sink()
    before = [impl.records(0, 2), impl.records(10, 2)]
    after = [impl.records(20, 2), impl.records(30, 2)]
    writers = [sink.create_writer(subtask, 2) for subtask in range(2)]
    states = []
    for writer, records, more in zip(writers, before, after):
        writer.open(None)
        writer.write_batch(records)
        states.append(checkpointed(writer.snapshot_state(1)))
        writer.write_batch(more)
    # union lists: every new subtask receives all of them, concatenated in old subtask order
    union = {name: states[0][name] + states[1][name] for name in states[0]}
    restored_sink = restarted(sink)
    restored = [restored_sink.create_writer(subtask, 3) for subtask in range(3)]
    for writer in restored:
        writer.restore_state(checkpointed(union))
    for writer in restored:
        writer.open(None)
    assert bag(impl.visible()) == bag(before[0] + before[1])
    restored[0].write_batch(after[0])  # the replay, spread over the new subtasks
    restored[2].write_batch(after[1])
    for writer in restored:
        writer.snapshot_state(2)
    for writer in restored:
        writer.notify_checkpoint_complete(2)
    assert bag(impl.visible()) == bag(before[0] + before[1] + after[0] + after[1])
    for writer in restored:
        writer.close()
    if impl.can_retract:
        assert impl.leftovers(restored_sink) == []


# -- sinks whose writes are upserts by key ---------------------------------------------------------------
# At-least-once delivery: after a restore the records since the checkpoint come again, and the output must not
# change. Records are (key, value) pairs, or Rows with a row kind where the sink reads a changelog.


class MemoryUpsertSink(IdempotentSink):
    """The smallest upsert sink: a dict per namespace stands for the table."""

    TABLES: dict = {}

    def __init__(self, namespace: str):
        self.namespace = namespace

    def upsert(self, records: list) -> None:
        table = self.TABLES.setdefault(self.namespace, {})
        for record in records:
            kind = record.get_row_kind() if isinstance(record, Row) else RowKind.INSERT
            if kind is RowKind.DELETE:
                table.pop(record[0], None)
            elif kind is not RowKind.UPDATE_BEFORE:
                table[record[0]] = record[1]


class MemoryUpsertHarness:
    def __init__(self):
        self.namespace = uuid.uuid4().hex

    def sink(self):
        return MemoryUpsertSink(self.namespace)

    def visible(self) -> dict:
        return dict(MemoryUpsertSink.TABLES.get(self.namespace, {}))

    def cleanup(self) -> None:
        MemoryUpsertSink.TABLES.pop(self.namespace, None)


class PostgresUpsertHarness:
    def __init__(self, server):
        self.server = server
        self.table = server.table("upserts", "k text PRIMARY KEY, v bigint")

    def sink(self):
        sink = JdbcSink.upsert_sink(self.table, Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()]), ["k"],
                                    jdbc_options(self.server))
        sink.validate()
        return sink

    def visible(self) -> dict:
        return dict(self.server.query(f"SELECT k, v FROM {self.table}"))

    def cleanup(self) -> None:
        self.server.query(f"DROP TABLE {self.table}")


@pytest.fixture(params=["memory-upsert", pytest.param("jdbc-postgres-upsert", marks=pytest.mark.postgres)])
def upserting(request):
    harness = MemoryUpsertHarness() if request.param == "memory-upsert" else \
        PostgresUpsertHarness(request.getfixturevalue("postgres"))
    yield harness
    harness.cleanup()


def _row(key: str, value: int, kind: RowKind = RowKind.INSERT) -> Row:
    row = Row(k=key, v=value)
    row.set_row_kind(kind)
    return row


def test_a_replay_after_a_restore_leaves_the_output_as_it_was(upserting):
    sink = upserting.sink()
    writer = sink.create_writer(0, 1)
    writer.open(None)
    writer.write_batch([_row("a", 1), _row("b", 1)])
    writer.snapshot_state(1)  # what came before the barrier is in the table now
    assert upserting.visible() == {"a": 1, "b": 1}
    writer.write_batch([_row("a", 2), _row("c", 1)])
    # the process dies; the restore replays what came after checkpoint 1, and the job goes on
    replay = restarted(sink).create_writer(0, 1)
    replay.open(None)
    replay.write_batch([_row("a", 2), _row("c", 1)])
    replay.write_batch([_row("b", 2)])
    replay.finish()
    replay.close()
    writer.close()
    assert upserting.visible() == {"a": 2, "b": 2, "c": 1}


def test_a_changelog_updates_and_deletes_by_key(upserting):
    writer = upserting.sink().create_writer(0, 1)
    writer.open(None)
    writer.write_batch([_row("a", 1), _row("b", 1), _row("a", 1, RowKind.UPDATE_BEFORE),
                        _row("a", 2, RowKind.UPDATE_AFTER), _row("b", 1, RowKind.DELETE), _row("b", 3)])
    writer.write_batch([_row("c", 1), _row("c", 1, RowKind.DELETE)])
    writer.finish()
    writer.close()
    assert upserting.visible() == {"a": 2, "b": 3}
