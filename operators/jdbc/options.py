"""How a JDBC sink writes (batches and retries) and, exactly once, how it commits: each setting checked once, here.

The defaults are Flink's: batches of 5,000 rows, no time-based flush, 3 retries; 3 commit attempts.

>>> BatchSettings(batch_size=500, batch_interval_ms=200)
BatchSettings(batch_size=500, batch_interval_ms=200, max_retries=3)
>>> BatchSettings(batch_size=0)
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: JdbcSink: with_batch_size(0): a batch holds at least 1 row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.errors import ConfigurationError

__all__ = ["BatchSettings", "ExactlyOnceSettings", "DEFAULT_COMMIT_TABLE", "RETRY_BACKOFF_S"]

DEFAULT_COMMIT_TABLE = "chandy_jdbc_commits"
RETRY_BACKOFF_S = 0.5  # the wait before retry n (of a batch, of a commit) is n times this (Flink waits n seconds)
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,40}")


@dataclass(frozen=True)
class BatchSettings:
    """``batch_size`` rows make a batch, written in one transaction; a non-empty batch is also written
    ``batch_interval_ms`` after the last write (0: only when full), at every checkpoint barrier and at the end of
    the input. A batch that fails for a reason that may pass (the connection was lost, a serialization failure or a
    deadlock) is tried again up to ``max_retries`` times, on a new connection when the old one broke."""

    batch_size: int = 5000
    batch_interval_ms: int = 0
    max_retries: int = 3

    def __post_init__(self):
        _at_least(self.batch_size, 1, "with_batch_size", "a batch holds at least 1 row")
        _at_least(self.batch_interval_ms, 0, "with_batch_interval_ms", "0 means no time-based flush")
        _at_least(self.max_retries, 0, "with_max_retries", "0 means no retry")


@dataclass(frozen=True)
class ExactlyOnceSettings:
    """How the exactly-once sink names and commits its PostgreSQL transactions.

    ``transaction_id_prefix``: the first part of every transaction id (``chandy:<prefix>:<run>:...``), the sink's
    name on the server; None derives one from the database and the statement. ``max_commit_attempts``: how often
    ``COMMIT PREPARED`` is tried when the connection fails. ``recovered_and_rollback``: whether starting (or
    restoring) the job also rolls back the prepared transactions that other runs of this sink left (Flink's
    option, off by default there too: a savepoint of such a run could no longer commit them). ``commit_table``:
    where each committed transaction leaves its id, so that committing again knows it committed.

    >>> ExactlyOnceSettings(transaction_id_prefix="orders:eu")
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: JdbcSink: with_transaction_id_prefix('orders:eu'): use 1 to 40 letters,
    digits, '_', '.' or '-'.
    """

    max_commit_attempts: int = 3
    recovered_and_rollback: bool = False
    transaction_id_prefix: str | None = None
    commit_table: str = DEFAULT_COMMIT_TABLE

    def __post_init__(self):
        _at_least(self.max_commit_attempts, 1, "with_max_commit_attempts", "a commit is attempted at least once")
        prefix = self.transaction_id_prefix
        if prefix is not None and not (isinstance(prefix, str) and _PREFIX.fullmatch(prefix)):
            raise ConfigurationError(f"JdbcSink: with_transaction_id_prefix({prefix!r}): use 1 to 40 letters, "
                                     "digits, '_', '.' or '-'.")
        if not isinstance(self.commit_table, str) or not self.commit_table.strip():
            raise ConfigurationError("JdbcSink: with_commit_table(...) needs a table name, such as "
                                     f"'{DEFAULT_COMMIT_TABLE}' or 'chandy.commits'.")


def _at_least(value, minimum: int, setter: str, meaning: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"JdbcSink: {setter}({value!r}): {meaning}.")
