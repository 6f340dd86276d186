"""The names of the exactly-once sink's PostgreSQL transactions, and which of them a restore rolls back: pure, no I/O.

A prepared transaction's id (its ``gid``) is ``chandy:<prefix>:<run>:<subtask>:<sequence>:<token>``. The prefix is
the sink's (its own setting, else derived from the database and the statement, so a resubmitted job has the same);
the run is the job's execution, kept across its restores; subtask and sequence say which of the subtask's
transactions it is; the token is new for every transaction, so that no two attempts ever prepare the same id (a
stray process of a failed attempt cannot collide with the attempt that replaced it).

>>> tid = TransactionId("orders", "3f9a0c1d2e4b", subtask=1, sequence=7, token="c0ffee00")
>>> tid.gid
'chandy:orders:3f9a0c1d2e4b:1:7:c0ffee00'
>>> TransactionId.parse(tid.gid) == tid, TransactionId.parse("some-other-tool-42")
(True, None)
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Iterable

__all__ = ["TransactionId", "GID_PREFIX", "derived_prefix", "transactions_to_roll_back"]

GID_PREFIX = "chandy"


@dataclass(frozen=True, order=True)
class TransactionId:
    """Which sink, run, subtask and sequence a prepared transaction belongs to."""

    prefix: str
    run_id: str
    subtask: int
    sequence: int
    token: str

    @classmethod
    def new(cls, prefix: str, run_id: str, subtask: int, sequence: int) -> TransactionId:
        return cls(prefix, run_id, subtask, sequence, uuid.uuid4().hex[:8])

    @property
    def gid(self) -> str:
        return f"{GID_PREFIX}:{self.prefix}:{self.run_id}:{self.subtask}:{self.sequence}:{self.token}"

    @classmethod
    def parse(cls, gid: str) -> TransactionId | None:
        """The id that ``gid`` spells, or None for a transaction Chandy did not name."""
        parts = gid.split(":")
        if len(parts) != 6 or parts[0] != GID_PREFIX or not (parts[3].isdigit() and parts[4].isdigit()):
            return None
        return cls(parts[1], parts[2], int(parts[3]), int(parts[4]), parts[5])


def derived_prefix(database: str, statement: str) -> str:
    """A sink's prefix when none is set: the same for the same database and statement, in every process and run.

    >>> derived_prefix("postgresql://db:5432/shop", "insert into books values (?)")
    'jdbc-0617aab5f5'
    """
    digest = hashlib.sha256(f"{database}\n{statement}".encode()).hexdigest()
    return f"jdbc-{digest[:10]}"


def transactions_to_roll_back(prepared: Iterable[str], prefix: str, run_id: str, keep: Iterable[str] = (),
                              own_run: bool = True, other_runs: bool = False) -> list[TransactionId]:
    """Of the prepared transactions ``prepared`` (gids), those of this sink (``prefix``) that are to be rolled back:
    with ``own_run``, those of run ``run_id`` not in ``keep`` (a restore: what the failed attempt prepared after the
    restored checkpoint, or left behind); with ``other_runs``, those of every other run (Flink's
    ``recoveredAndRollback``). Another sink's, and anything Chandy did not name, are never touched.

    >>> prepared = ["chandy:s:run1:0:4:aa", "chandy:s:run1:0:5:bb", "chandy:s:run0:1:9:cc", "chandy:t:run1:0:5:dd",
    ...             "a-users-own-transaction"]
    >>> [t.gid for t in transactions_to_roll_back(prepared, "s", "run1", keep=["chandy:s:run1:0:4:aa"])]
    ['chandy:s:run1:0:5:bb']
    >>> [t.gid for t in transactions_to_roll_back(prepared, "s", "run1", own_run=False, other_runs=True)]
    ['chandy:s:run0:1:9:cc']
    """
    kept = set(keep)
    chosen = []
    for gid in prepared:
        tid = TransactionId.parse(gid)
        if tid is None or tid.prefix != prefix or gid in kept:
            continue
        if (own_run and tid.run_id == run_id) or (other_runs and tid.run_id != run_id):
            chosen.append(tid)
    return sorted(chosen)
