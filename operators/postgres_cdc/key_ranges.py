"""Which snapshot holds which rows, so that the stream adds only the changes no snapshot has seen.

A fresh start reads every table from one snapshot, taken at the slot's consistent point: the stream then starts
right after it, and every change is new. A job restored in the middle of its snapshot cannot reopen that snapshot
(it lived in the failed connection): it reads the rest of the tables from a new one, taken later. The rows read so
far came from the old snapshot and the rest from the new, so each range of keys remembers the position of the
snapshot it came from, and a change committed before that position is already in what was read.

>>> ranges = KeyRanges()
>>> ranges.close("t", (10,), 100)   # keys up to 10 read from the snapshot at position 100
>>> ranges.close("t", None, 250)    # the rest from a later one, at 250
>>> ranges.position("t", (7,)), ranges.position("t", (11,)), ranges.position("other", (1,))
(100, 250, 0)
>>> ranges.seen("t", (11,), commit_lsn=200), ranges.seen("t", (7,), commit_lsn=200)
(True, False)
"""

from __future__ import annotations

__all__ = ["KeyRanges"]


class KeyRanges:
    def __init__(self, ranges: dict | None = None):
        # table -> [(highest key of the range, inclusive, or None for no bound; the snapshot's position)], in order
        self.ranges: dict[str, list[tuple[tuple | None, int]]] = {t: list(r) for t, r in (ranges or {}).items()}
        self.newest = max((lsn for r in self.ranges.values() for _, lsn in r), default=0)

    def close(self, table: str, upper: tuple | None, lsn: int) -> None:
        """The keys of ``table`` after the last range, up to ``upper`` (all of them: None), were read from the
        snapshot at ``lsn``."""
        self.ranges.setdefault(table, []).append((upper, lsn))
        self.newest = max(self.newest, lsn)

    def position(self, table: str, key: tuple) -> int:
        """The position of the snapshot the row with ``key`` was read from (0: none)."""
        for upper, lsn in self.ranges.get(table, ()):
            if upper is None or key <= upper:
                return lsn
        return 0

    def seen(self, table: str, key: tuple, commit_lsn: int) -> bool:
        """Whether a change to the row with ``key``, committed at ``commit_lsn``, is in what the snapshot read."""
        return commit_lsn < self.newest and commit_lsn < self.position(table, key)

    def as_state(self) -> dict:
        return {t: list(r) for t, r in self.ranges.items()}
