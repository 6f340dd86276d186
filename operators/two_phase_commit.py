"""Exactly-once sinks by two-phase commit, with Flink's contract (``TwoPhaseCommitSinkFunction``).

A subtask writes into an open transaction. At each checkpoint barrier it pre-commits the transaction
(flush, close: durable but invisible) and remembers it in its checkpointed state; a new one begins. When
checkpoint n completes, every pending transaction of checkpoints <= n is committed. On a restore, the
restored checkpoint's pending transactions are committed (they belong to a completed checkpoint; commit
must be idempotent, as it may have happened already) and everything the failed attempt left is aborted.
At the end of its input a subtask pre-commits its last transaction into its final state, then waits for a
checkpoint that includes that state to complete (Flink's checkpoints after tasks finish): any checkpoint after
the last one it took part in does, and when every subtask has finished the job's final checkpoint is one. So
the tail after the last periodic checkpoint is committed by the checkpoint protocol too. Only a job without
checkpointing has its last transactions committed by the driver, once every subtask has finished.

You implement :class:`TwoPhaseCommitSink`'s five methods; the runtime does the bookkeeping.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, replace
from typing import Any

from operators.sinks import Sink, SinkWriter
from runtime.errors import TransactionStateError

__all__ = ["TransactionStatus", "TransactionContext", "RecoveredState", "TransactionRecord", "TwoPhaseCommitSink",
           "IdempotentSink"]


class TransactionStatus(enum.Enum):
    """Where a transaction is: ``OPEN`` (being written) -> ``PRE_COMMITTED`` (durable, invisible) ->
    ``COMMITTED`` (visible), or ``ABORTED`` (discarded) from ``OPEN`` or ``PRE_COMMITTED``.

    Writing keeps a transaction open; commit and abort may repeat (they are idempotent). Any other move is
    a bug in the code driving the sink: :meth:`advance` raises :class:`~runtime.errors.TransactionStateError`.

    >>> TransactionStatus.OPEN.advance(TransactionStatus.PRE_COMMITTED)
    <TransactionStatus.PRE_COMMITTED: 'pre-committed'>
    >>> TransactionStatus.COMMITTED.can_become(TransactionStatus.COMMITTED)  # committing twice is harmless
    True
    >>> TransactionStatus.PRE_COMMITTED.can_become(TransactionStatus.OPEN)  # no writes after pre-commit
    False
    """

    OPEN = "open"
    PRE_COMMITTED = "pre-committed"
    COMMITTED = "committed"
    ABORTED = "aborted"

    def can_become(self, status: TransactionStatus) -> bool:
        return status in _NEXT_STATUSES[self]

    def advance(self, status: TransactionStatus, subject: str = "a transaction") -> TransactionStatus:
        """``status`` if a transaction in this status may move there; else a ``TransactionStateError`` naming
        ``subject``."""
        if not self.can_become(status):
            raise TransactionStateError(
                f"Cannot {_ACTIONS[status]} {subject}: it is {self.value}. A transaction is written while open, "
                "then pre-committed once, then committed (or aborted); commit and abort may repeat. This is a "
                "bug in the code that drives the sink.")
        return status


_NEXT_STATUSES = {
    TransactionStatus.OPEN: (TransactionStatus.OPEN, TransactionStatus.PRE_COMMITTED, TransactionStatus.ABORTED),
    TransactionStatus.PRE_COMMITTED: (TransactionStatus.COMMITTED, TransactionStatus.ABORTED),
    TransactionStatus.COMMITTED: (TransactionStatus.COMMITTED,),
    TransactionStatus.ABORTED: (TransactionStatus.ABORTED,),
}
_ACTIONS = {TransactionStatus.OPEN: "write to", TransactionStatus.PRE_COMMITTED: "pre-commit",
            TransactionStatus.COMMITTED: "commit", TransactionStatus.ABORTED: "abort"}


@dataclass(frozen=True)
class TransactionContext:
    """Who opens a transaction: ``run_id`` is fixed for a job and its restores; ``sequence`` counts this
    subtask's transactions, so ``(run_id, subtask, sequence)`` names a transaction uniquely.

    >>> context = TransactionContext("3f9a", subtask=1, parallelism=2, sequence=7)
    >>> f"{context.run_id}-{context.subtask}-{context.sequence}"
    '3f9a-1-7'
    """

    run_id: str
    subtask: int
    parallelism: int
    sequence: int


@dataclass(frozen=True)
class RecoveredState:
    """What a restore hands :meth:`TwoPhaseCommitSink.recover` (once, on subtask 0)."""

    run_id: str
    pending: tuple  # transactions pre-committed in the restored checkpoint
    next_sequence: dict  # old subtask -> first sequence number not in the checkpoint


@dataclass(frozen=True)
class TransactionRecord:
    """A sink's transaction as its writer tracks it (and checkpoints it, once pre-committed).

    ``checkpoint_id``: the checkpoint whose barrier pre-committed it, committed when that checkpoint (or a
    later one) completes. ``final``: pre-committed at the end of input, into the subtask's final state; its
    ``checkpoint_id`` is then the first checkpoint that can include that state. A final record without one
    (Chandy 0.1's, or a job without checkpoints) is committed by the driver or a restore.

    >>> record = TransactionRecord("t")
    >>> record.status
    <TransactionStatus.OPEN: 'open'>
    >>> record = record.pre_committed(checkpoint_id=3)
    >>> record.due(2), record.due(3)
    (False, True)
    >>> record.pre_committed(4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    runtime.errors.TransactionStateError: Cannot pre-commit transaction 't': it is pre-committed. ...
    >>> final = TransactionRecord("t").pre_committed(checkpoint_id=5, final=True)
    >>> final.final, final.due(4), final.due(7)
    (True, False, True)
    """

    transaction: Any
    status: TransactionStatus = TransactionStatus.OPEN
    checkpoint_id: int | None = None
    final: bool = False

    def _to(self, status: TransactionStatus, **changes) -> TransactionRecord:
        if not self.status.can_become(status):  # the transaction's repr only then: it may hold many records
            self.status.advance(status, f"transaction {self.transaction!r}")
        return replace(self, status=status, **changes)

    def pre_committed(self, checkpoint_id: int | None, final: bool = False) -> TransactionRecord:
        """This transaction pre-committed at checkpoint ``checkpoint_id``'s barrier, or (``final``) at the end
        of input, to be committed by checkpoint ``checkpoint_id`` or a later one."""
        return self._to(TransactionStatus.PRE_COMMITTED, checkpoint_id=checkpoint_id, final=final)

    def committed(self) -> TransactionRecord:
        return self._to(TransactionStatus.COMMITTED)

    def aborted(self) -> TransactionRecord:
        return self._to(TransactionStatus.ABORTED)

    def due(self, completed_checkpoint_id: int) -> bool:
        """Whether checkpoint ``completed_checkpoint_id`` completing commits this transaction."""
        return (self.status is TransactionStatus.PRE_COMMITTED and self.checkpoint_id is not None
                and self.checkpoint_id <= completed_checkpoint_id)


class TwoPhaseCommitSink(Sink):
    """Base class of transactional sinks. Transactions must be picklable (they are checkpointed).

    ``commit`` and ``abort`` must be idempotent; they also run on the driver (a restore commits what the
    checkpoint had pending; a bounded job without checkpointing commits its last transactions there).

    >>> class ListSink(TwoPhaseCommitSink):   # commits whole lists into a visible one
    ...     visible = []
    ...     def begin_transaction(self, context): return []
    ...     def write(self, transaction, records): transaction.extend(records)
    ...     def pre_commit(self, transaction): pass
    ...     def commit(self, transaction):
    ...         if transaction not in ListSink.visible: ListSink.visible.append(transaction)
    ...     def abort(self, transaction): transaction.clear()
    >>> writer = ListSink().create_writer(0, 1); writer.open(None); writer.write_batch([1, 2])
    >>> _ = writer.snapshot_state(checkpoint_id=4); ListSink.visible
    []
    >>> writer.notify_checkpoint_complete(4); ListSink.visible
    [[1, 2]]
    """

    def begin_transaction(self, context: TransactionContext) -> Any:
        raise NotImplementedError

    def write(self, transaction: Any, records: list) -> None:
        raise NotImplementedError

    def pre_commit(self, transaction: Any) -> None:
        """Make the transaction durable (flush, close): after this it must survive a crash."""
        raise NotImplementedError

    def commit(self, transaction: Any) -> None:
        """Make the transaction visible. Idempotent: committing twice is harmless."""
        raise NotImplementedError

    def abort(self, transaction: Any) -> None:
        """Discard the transaction. Idempotent."""
        raise NotImplementedError

    run_id: str | None = None

    @property
    def commits_on_checkpoints(self) -> bool:
        """Whether its output appears only when checkpoints complete (a sink that can also write without
        transactions, like Kafka's at least once, says False then)."""
        return True

    def validate(self) -> None:
        """Driver, before launch: one run id for the whole execution (restores keep the checkpoint's).

        Subclasses that override this must call ``super().validate()``."""
        self.run_id = uuid.uuid4().hex[:12]

    def recover(self, state: RecoveredState) -> None:
        """On restore (once, before any subtask writes): commit what the checkpoint had pending.

        Sinks that can also retract output committed after the checkpoint (the file sink can) override
        this, so that restoring an older checkpoint stays exactly-once.
        """
        for transaction in state.pending:
            self.commit(transaction)

    def release(self, subtask: int) -> None:
        """Executor, when subtask ``subtask``'s writer closes (after aborting its open transaction): close the
        connections this process opened for that subtask. A later commit (a restore, the driver) opens its own."""

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _TransactionalWriter(self, subtask_index, parallelism)

    def merge_results(self, results: list) -> int:
        """Driver, end of a bounded job: the sink's result is the number of transactions
        :meth:`commit_remaining` committed."""
        return self.commit_remaining(results)

    def commit_remaining(self, results: list) -> int:
        """Driver, end of a bounded job: commit the transactions no checkpoint committed (a job without
        checkpointing pre-commits its last ones at the end of input; ``results`` holds each writer's). Returns how
        many."""
        committed = 0
        for transactions in results:
            for transaction in transactions:
                self.commit(transaction)
                committed += 1
        return committed


_PENDING = "union:pending"
_SEQUENCE = "union:sequence"
_RUN = "union:run"


class _TransactionalWriter(SinkWriter):
    """Drives one subtask's transactions. Its checkpointed state (union lists, every subtask gets them whole):
    ``union:pending``, the :class:`TransactionRecord` s pre-committed and not yet committed; ``union:sequence``,
    ``(subtask, next sequence)`` pairs; ``union:run``, ``[run_id]``."""

    def __init__(self, sink: TwoPhaseCommitSink, subtask: int, parallelism: int):
        self.sink = sink
        self.subtask = subtask
        self.parallelism = parallelism
        self.run_id = sink.run_id or uuid.uuid4().hex[:12]
        self.next_sequence = 0
        self.carried_sequences: dict[int, int] = {}  # of old subtasks this job no longer has (subtask 0 keeps them)
        self.pending: list[TransactionRecord] = []  # pre-committed, oldest first
        self.current: TransactionRecord | None = None  # the open transaction
        self.finished = False
        self.last_checkpoint_id = 0  # the newest checkpoint whose barrier pre-committed a transaction here

    def restore_state(self, state) -> None:
        runs = state.get(_RUN, [])
        if runs:
            self.run_id = runs[0]
        sequences = dict(state.get(_SEQUENCE, []))
        self.next_sequence = sequences.get(self.subtask, 0)
        if self.subtask == 0:
            self.carried_sequences = {s: n for s, n in sequences.items() if s >= self.parallelism}
            pending = tuple(self._restored(item).transaction for item in state.get(_PENDING, []))
            self.sink.recover(RecoveredState(self.run_id, pending, sequences))

    def continue_after(self, restored_checkpoint_id: int) -> None:
        """This run restored checkpoint ``restored_checkpoint_id``: its checkpoints come after it, and so does the one
        that commits a transaction pre-committed at the end of input before any barrier of this run."""
        self.last_checkpoint_id = max(self.last_checkpoint_id, restored_checkpoint_id)

    @staticmethod
    def _restored(item) -> TransactionRecord:
        if isinstance(item, TransactionRecord):
            return item
        checkpoint_id, transaction = item  # checkpoints of Chandy 0.1 kept (checkpoint id or None, transaction)
        return TransactionRecord(transaction, TransactionStatus.PRE_COMMITTED, checkpoint_id, checkpoint_id is None)

    def _sink_name(self) -> str:
        return getattr(self.sink, "name", type(self.sink).__name__)

    def _begin(self) -> TransactionRecord:
        context = TransactionContext(self.run_id, self.subtask, self.parallelism, self.next_sequence)
        self.next_sequence += 1
        return TransactionRecord(self.sink.begin_transaction(context))

    def _open_transaction(self, action: str) -> TransactionRecord:
        if self.current is None:
            why = "after finish()" if self.finished else "before open() or after close()"
            raise TransactionStateError(f"Subtask {self.subtask} of sink {self._sink_name()} cannot {action} {why}: "
                                "it has no open transaction. This is a bug in the code that drives the writer.")
        return self.current

    def _pre_commit(self, checkpoint_id: int | None, action: str, final: bool = False) -> None:
        record = self._open_transaction(action)
        pre_committed = record.pre_committed(checkpoint_id, final)
        self.sink.pre_commit(record.transaction)
        self.pending.append(pre_committed)
        self.current = None

    def open(self, runtime_context) -> None:
        self.current = self._begin()

    def write_batch(self, records: list) -> None:
        self.sink.write(self._open_transaction("write").transaction, records)

    def snapshot_state(self, checkpoint_id: int):
        if self.finished:  # the final state of a finished subtask: its last transaction was pre-committed then
            sequences = [(self.subtask, self.next_sequence), *self.carried_sequences.items()]
            return {_PENDING: list(self.pending), _SEQUENCE: sequences, _RUN: [self.run_id]}
        self._pre_commit(checkpoint_id, f"snapshot checkpoint {checkpoint_id}")
        self.last_checkpoint_id = checkpoint_id
        self.current = self._begin()
        sequences = [(self.subtask, self.next_sequence - 1)]  # the fresh transaction is not in the checkpoint
        sequences += list(self.carried_sequences.items())
        return {_PENDING: list(self.pending), _SEQUENCE: sequences, _RUN: [self.run_id]}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        while self.pending and self.pending[0].due(checkpoint_id):
            committed = self.pending[0].committed()
            self.sink.commit(committed.transaction)
            self.pending.pop(0)  # only once committed: a failed commit leaves it for the restore to commit

    def finish(self) -> None:
        # Into the final state: any checkpoint after the last one this subtask took part in includes it.
        self._pre_commit(self.last_checkpoint_id + 1, "finish", final=True)
        self.finished = True

    def result(self) -> list:
        return [record.transaction for record in self.pending]

    def metrics(self) -> dict | None:
        """The sink's own counts (transactions committed and aborted ...), if it keeps any."""
        counts = getattr(self.sink, "metrics", None)
        return counts() if callable(counts) else None

    def close(self) -> None:
        if self.current is not None:  # cancelled or failed: this transaction will never be committed
            aborted, self.current = self.current.aborted(), None
            try:
                self.sink.abort(aborted.transaction)
            except Exception:  # the next restore cleans up what abort could not
                pass
        self.sink.release(self.subtask)


class IdempotentSink(Sink):
    """A sink whose writes are idempotent (upserts by a key): at-least-once delivery is then exactly-once
    in effect. Implement ``upsert(records)``; replays after a restore rewrite the same keys.

    >>> class Table(IdempotentSink):
    ...     rows = {}
    ...     def upsert(self, records):
    ...         self.rows.update(records)
    >>> writer = Table().create_writer(0, 1)
    >>> writer.write_batch([("a", 1), ("b", 2)]); writer.write_batch([("a", 1)])  # a replay changes nothing
    >>> Table.rows
    {'a': 1, 'b': 2}
    """

    def upsert(self, records: list) -> None:
        raise NotImplementedError

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _IdempotentWriter(self)


class _IdempotentWriter(SinkWriter):
    def __init__(self, sink: IdempotentSink):
        self.sink = sink

    def write_batch(self, records: list) -> None:
        self.sink.upsert(records)
