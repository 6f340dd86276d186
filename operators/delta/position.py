"""Where a :class:`~operators.delta.source.DeltaSource` is: a table version, the part of it being read, the next row.

A position is immutable; reading moves it with :meth:`DeltaPosition.advanced`, :meth:`DeltaPosition.next_part`
and :meth:`DeltaPosition.next_version`. It names the next row to emit: row ``row`` of part ``part`` of what the
source reads at ``version`` (the table's files at that version when ``snapshot`` is true, else the changes that
version committed). A version's parts are its files in path order, or its change data feed as one part, so the
same position names the same row on every read of the table.

>>> start = DeltaPosition.snapshot_of(4)
>>> start
DeltaPosition(version=4, snapshot=True, part=0, row=0)
>>> start.advanced(100).next_part().advanced(7)
DeltaPosition(version=4, snapshot=True, part=1, row=7)
>>> start.next_version(), DeltaPosition.changes_of(5).next_version().describe()
(DeltaPosition(version=5, snapshot=False, part=0, row=0), 'the changes of version 6, part 0, row 0')
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DeltaPosition"]


@dataclass(frozen=True)
class DeltaPosition:
    """The next row to read: row ``row`` of part ``part`` of version ``version``'s snapshot or changes."""

    version: int
    snapshot: bool
    part: int = 0
    row: int = 0

    @classmethod
    def snapshot_of(cls, version: int) -> "DeltaPosition":
        """The first row of the table's contents at ``version``."""
        return cls(version, True)

    @classmethod
    def changes_of(cls, version: int) -> "DeltaPosition":
        """The first row of what ``version`` committed."""
        return cls(version, False)

    def advanced(self, rows: int) -> "DeltaPosition":
        """``rows`` rows further in the same part."""
        return replace(self, row=self.row + rows)

    def next_part(self) -> "DeltaPosition":
        return replace(self, part=self.part + 1, row=0)

    def next_version(self) -> "DeltaPosition":
        """The changes of the version after this one (after a snapshot at ``v``, the changes of ``v + 1``)."""
        return DeltaPosition.changes_of(self.version + 1)

    def is_past(self, end_version: int | None) -> bool:
        """Whether everything up to and including ``end_version`` is read (never, when it is None).

        >>> DeltaPosition.changes_of(3).is_past(2), DeltaPosition.snapshot_of(2).is_past(2)
        (True, False)
        """
        return end_version is not None and self.version > end_version

    def describe(self) -> str:
        what = "the snapshot at" if self.snapshot else "the changes of"
        return f"{what} version {self.version}, part {self.part}, row {self.row}"
