"""Exactly-once sinks by two-phase commit, with Flink's contract (``TwoPhaseCommitSinkFunction``).

A subtask writes into an open transaction. At each checkpoint barrier it pre-commits the transaction
(flush, close: durable but invisible) and remembers it in its checkpointed state; a new one begins. When
checkpoint n completes, every pending transaction of checkpoints <= n is committed. On a restore, the
restored checkpoint's pending transactions are committed (they belong to a completed checkpoint; commit
must be idempotent, as it may have happened already) and everything the failed attempt left is aborted.
At the end of a bounded job the last transactions are committed by the driver, after every task has
finished: no restart can follow, so they can never be replayed.

You implement :class:`TwoPhaseCommitSink`'s five methods; the runtime does the bookkeeping.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from operators.sinks import Sink, SinkWriter

__all__ = ["TransactionContext", "RecoveredState", "TwoPhaseCommitSink", "IdempotentSink"]


@dataclass(frozen=True)
class TransactionContext:
    """Who opens a transaction: ``run_id`` is fixed for a job and its restores; ``sequence`` counts this
    subtask's transactions, so ``(run_id, subtask, sequence)`` names a transaction uniquely."""

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


class TwoPhaseCommitSink(Sink):
    """Base class of transactional sinks. Transactions must be picklable (they are checkpointed).

    ``commit`` and ``abort`` also run on the driver (final commit of a bounded job) and must be idempotent.
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

    def validate(self) -> None:
        """Driver, before launch: one run id for the whole execution (restores keep the checkpoint's).

        Subclasses that override this must call ``super().validate()``."""
        self.run_id = uuid.uuid4().hex[:12]

    def recover(self, state: RecoveredState) -> None:
        """On restore (once, before any task writes): commit what the checkpoint had pending.

        Sinks that can also retract output committed after the checkpoint (the file sink can) override
        this, so that restoring an older checkpoint stays exactly-once.
        """
        for transaction in state.pending:
            self.commit(transaction)

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _TransactionalWriter(self, subtask_index, parallelism)

    def merge_results(self, results: list) -> int:
        """Driver, end of a bounded job: commit every subtask's last transactions. Returns how many."""
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
    def __init__(self, sink: TwoPhaseCommitSink, subtask: int, parallelism: int):
        self.sink = sink
        self.subtask = subtask
        self.parallelism = parallelism
        self.run_id = sink.run_id or uuid.uuid4().hex[:12]
        self.next_sequence = 0
        self.carried_sequences: dict[int, int] = {}  # of old subtasks this job no longer has (subtask 0 keeps them)
        self.pending: list[tuple[int | None, Any]] = []
        self.current = None

    def restore_state(self, state) -> None:
        runs = state.get(_RUN, [])
        if runs:
            self.run_id = runs[0]
        sequences = dict(state.get(_SEQUENCE, []))
        self.next_sequence = sequences.get(self.subtask, 0)
        if self.subtask == 0:
            self.carried_sequences = {s: n for s, n in sequences.items() if s >= self.parallelism}
            pending = tuple(transaction for _, transaction in state.get(_PENDING, []))
            self.sink.recover(RecoveredState(self.run_id, pending, sequences))

    def _begin(self):
        context = TransactionContext(self.run_id, self.subtask, self.parallelism, self.next_sequence)
        self.next_sequence += 1
        return self.sink.begin_transaction(context)

    def open(self, runtime_context) -> None:
        self.current = self._begin()

    def write_batch(self, records: list) -> None:
        self.sink.write(self.current, records)

    def snapshot_state(self, checkpoint_id: int):
        self.sink.pre_commit(self.current)
        self.pending.append((checkpoint_id, self.current))
        self.current = self._begin()
        sequences = [(self.subtask, self.next_sequence - 1)]  # the fresh transaction is not in the checkpoint
        sequences += list(self.carried_sequences.items())
        return {_PENDING: list(self.pending), _SEQUENCE: sequences, _RUN: [self.run_id]}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        while self.pending and self.pending[0][0] is not None and self.pending[0][0] <= checkpoint_id:
            _, transaction = self.pending.pop(0)
            self.sink.commit(transaction)

    def finish(self) -> None:
        self.sink.pre_commit(self.current)
        self.pending.append((None, self.current))
        self.current = None

    def result(self) -> list:
        return [transaction for _, transaction in self.pending]

    def close(self) -> None:
        if self.current is not None:  # cancelled or failed: this transaction will never be committed
            try:
                self.sink.abort(self.current)
            except Exception:  # the next restore cleans up what abort could not
                pass
            self.current = None


class IdempotentSink(Sink):
    """A sink whose writes are idempotent (upserts by a key): at-least-once delivery is then exactly-once
    in effect. Implement ``upsert(records)``; replays after a restore rewrite the same keys.

    >>> class Table(IdempotentSink):
    ...     rows = {}
    ...     def upsert(self, records):
    ...         self.rows.update(records)
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
