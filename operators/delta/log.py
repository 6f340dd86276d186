"""What one Delta table version committed, and how a :class:`~operators.delta.source.DeltaSource` reads it.

A version's commit is ``_delta_log/<version, 20 digits>.json``: one action per line. :func:`parse_commit` keeps what
the source needs (the data files added and removed with ``dataChange``, and whether change data files were
written); :func:`plan_version` decides, without I/O, how that version is read: not at all (nothing in it changed
the data: a compaction, a schema or property change), from its added files (an append), from the change data
feed, or not at all because it removed data that only the change data feed could say (an error naming the fix).

>>> commit = '{"commitInfo": {"operation": "WRITE"}}\\n{"add": {"path": "p%3D1/a.parquet", "dataChange": true}}'
>>> actions = parse_commit(commit)
>>> actions.added
('p=1/a.parquet',)
>>> plan_version(7, actions, change_data_feed=False)
<ReadPlan.ADDED_FILES: 'added files'>
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from urllib.parse import unquote

from runtime.errors import ConfigurationError

__all__ = ["VersionActions", "ReadPlan", "parse_commit", "plan_version", "commit_path", "ChangesNotReadableError"]


def commit_path(version: int) -> str:
    """The commit file of ``version``, relative to the table's root.

    >>> commit_path(12)
    '_delta_log/00000000000000000012.json'
    """
    return f"_delta_log/{version:020d}.json"


@dataclass(frozen=True)
class VersionActions:
    """The data-changing actions of one commit: paths (decoded, relative to the table root) of the files it added
    and removed with ``dataChange``, whether it wrote change data (``cdc``) files, and its operation's name;
    ``partition_values``: each added file's partition values as the log writes them (strings, or None)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    has_change_data: bool = False
    operation: str | None = None
    partition_values: dict = field(default_factory=dict, compare=False)

    @property
    def changes_data(self) -> bool:
        return bool(self.added or self.removed or self.has_change_data)


def parse_commit(text: str) -> VersionActions:
    """The :class:`VersionActions` of a commit file's text (JSON lines). Paths in the log are URL-encoded.

    >>> parse_commit('{"remove": {"path": "a.parquet", "dataChange": true}}\\n'
    ...              '{"add": {"path": "b.parquet", "dataChange": false}}').removed
    ('a.parquet',)
    """
    added, removed, has_cdc, operation, partition_values = [], [], False, None, {}
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "add" in action and action["add"].get("dataChange", True):
            added.append(unquote(action["add"]["path"]))
            partition_values[added[-1]] = dict(action["add"].get("partitionValues") or {})
        elif "remove" in action and action["remove"].get("dataChange", True):
            removed.append(unquote(action["remove"]["path"]))
        elif "cdc" in action:
            has_cdc = True
        elif "commitInfo" in action:
            operation = action["commitInfo"].get("operation")
    return VersionActions(tuple(sorted(added)), tuple(sorted(removed)), has_cdc, operation, partition_values)


class ReadPlan(enum.Enum):
    """How one version is read."""

    NOTHING = "nothing"  # no data change (OPTIMIZE, a property or schema change), or removals the user ignores
    ADDED_FILES = "added files"  # the rows of the files it added
    CHANGE_DATA_FEED = "change data feed"  # its change data feed: inserts, deletes, update pre- and post-images


class ChangesNotReadableError(ConfigurationError):
    """A version removed or rewrote data, and the table keeps no change data feed to say what changed."""


def plan_version(version: int, actions: VersionActions, change_data_feed: bool, ignore_deletes: bool = False,
                 ignore_changes: bool = False, table: str = "the table") -> ReadPlan:
    """How to read ``version``; ``change_data_feed``: whether the table has ``delta.enableChangeDataFeed`` then.

    Without the change data feed, a version that removes data cannot be read as rows: ``ignore_deletes`` skips a
    version that only removes files (a DELETE of whole files or partitions), ``ignore_changes`` reads the files a
    version added and ignores what it removed (an UPDATE or MERGE then repeats the rows it copied, as Flink's
    Delta source does with ``ignoreChanges``).

    >>> plan_version(3, VersionActions(removed=("a.parquet",), operation="DELETE"), change_data_feed=False)
    Traceback (most recent call last):
    ...
    operators.delta.log.ChangesNotReadableError: DeltaSource: version 3 of the table (DELETE) removed data ...
    >>> plan_version(3, VersionActions(removed=("a.parquet",)), change_data_feed=False, ignore_deletes=True)
    <ReadPlan.NOTHING: 'nothing'>
    >>> plan_version(3, VersionActions(removed=("a.parquet",)), change_data_feed=True)
    <ReadPlan.CHANGE_DATA_FEED: 'change data feed'>
    """
    if not actions.changes_data:
        return ReadPlan.NOTHING
    if change_data_feed:
        return ReadPlan.CHANGE_DATA_FEED
    if not actions.removed:
        return ReadPlan.ADDED_FILES
    if ignore_changes:
        return ReadPlan.ADDED_FILES if actions.added else ReadPlan.NOTHING
    if ignore_deletes and not actions.added:
        return ReadPlan.NOTHING
    operation = f" ({actions.operation})" if actions.operation else ""
    raise ChangesNotReadableError(
        f"DeltaSource: version {version} of {table}{operation} removed data ({len(actions.removed)} file(s)), and "
        "the table has no change data feed to say which rows changed. Fix: enable it on the table "
        "(ALTER TABLE ... SET TBLPROPERTIES (delta.enableChangeDataFeed = true), or "
        "DeltaTable(path).alter.set_table_properties({'delta.enableChangeDataFeed': 'true'})) before such writes; or "
        "build the source with .ignore_deletes(True) to skip versions that only remove files, or "
        ".ignore_changes(True) to read only what rewrites add (their copied rows then arrive again).")
