"""Reading a Delta Lake table as a stream, exactly once: its snapshot, then every version as it is committed.

The source reads the table's contents at one version (its files in path order), then, unbounded, each later
version as its commit appears in ``_delta_log/``: from the change data feed when the table has
``delta.enableChangeDataFeed = true`` (rows with ``_change_type``: ``insert``, ``delete``, ``update_preimage``,
``update_postimage``, and ``_commit_version``, ``_commit_timestamp``), else the rows of the files the version added
(an append-only table; a version that removes data then fails the job with the fix, unless
``ignore_deletes`` / ``ignore_changes`` say what to do, as in Flink's Delta source). Versions that change no data
(a compaction, a property or schema change) give nothing. Bounded, it ends at one version: ``version_as_of``, or
the latest version when the job is launched; it reads the snapshot at that version, or with ``starting_version``
the changes of each version from that one up to it.

Exactly once: the checkpointed state is a :class:`~operators.delta.position.DeltaPosition`, the next row to emit:
the version, the part of that version being read (a file, in path order; or the version's change data feed, read
whole and put in a stable order, since the feed's row order is not fixed) and the row in that part. A restore
reads that part again and skips the rows before the position, so each row arrives once across failures.

Parallelism: the source is one subtask (``parallel = False``), as the PostgreSQL CDC source; what follows it runs at
the job's parallelism. Versions are a total order, and a change data feed only means something in it: a row's
update must come after its insert, a delete after both. Readers that each took a share of the files (by a stable
hash of their paths) would be exact too, but would emit one version's rows while another reader still emits an
earlier version's, and a restore at another parallelism would have to re-deal positions within versions; one
reader keeps the commit order and keeps its state one position. The files are read with Arrow (one file, or one
version's change data, in memory at a time), so one subtask reads far faster than most jobs process rows.

Records are dicts of column to value, as the file source's Parquet records.

>>> import pyarrow as pa, tempfile
>>> from deltalake import write_deltalake
>>> path = tempfile.mkdtemp() + "/orders"
>>> write_deltalake(path, pa.table({"id": [1, 2], "item": ["tea", "jam"]}))
>>> write_deltalake(path, pa.table({"id": [3], "item": ["oat"]}), mode="append")
>>> source = DeltaSource.for_bounded(path).version_as_of(0).build()
>>> reader = source.create_reader(0, 1); reader.open(None)
>>> reader.poll(10), reader.poll(10)
([{'id': 1, 'item': 'tea'}, {'id': 2, 'item': 'jam'}], [])
>>> reader.poll(10) is None, reader.snapshot_state()
(True, [DeltaPosition(version=1, snapshot=False, part=0, row=0)])
"""

from __future__ import annotations

import os
import time
from typing import Callable

from operators.delta.log import ReadPlan, VersionActions, commit_path, parse_commit, plan_version
from operators.delta.position import DeltaPosition
from operators.delta.storage import delta_storage_options
from operators.sources import Source, SourceReader
from runtime.errors import ConfigurationError, InputUnreachableError

__all__ = ["DeltaSource", "DeltaSourceBuilder", "CHANGE_DATA_COLUMNS", "UPDATE_CHECK_INTERVAL_MS"]

UPDATE_CHECK_INTERVAL_MS = 1000  # how often an unbounded source looks for the next version (Flink's default)
POLL_WAIT_S = 0.02  # a poll with nothing to read waits this long: short, since a checkpoint waits for the poll
CHANGE_DATA_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
# The order of one version's change data: retractions before what replaces them (any fixed order would be exact).
_CHANGE_ORDER = {"update_preimage": 0, "delete": 1, "update_postimage": 2, "insert": 3}


def _deltalake():
    try:
        import deltalake
    except ImportError as exc:
        raise ConfigurationError("DeltaSource needs the deltalake package (delta-rs): pip install 'chandy[delta]', "
                                 "on the driver and on every executor.") from exc
    return deltalake


def _is_true(value) -> bool:
    return str(value).strip().lower() == "true"


class DeltaSource(Source):
    """Reads the Delta table at ``path`` (a local path or a URI delta-rs knows: ``s3://``, ``gs://``, ``az://`` ...,
    with ``storage_options`` for delta-rs's object store). Build it with :meth:`for_bounded` or
    :meth:`for_continuous`; the module's docstring says what is read and how it stays exactly once.

    >>> source = DeltaSource.for_continuous("/data/orders").columns(["id", "item"]).build()
    >>> source.bounded, source.parallel, source.columns
    (False, False, ['id', 'item'])
    """

    parallel = False  # one reader keeps the commit order (see the module's docstring)

    def __init__(self, path: str, bounded: bool = True, version_as_of: int | None = None,
                 starting_version: int | None = None, columns: list[str] | None = None,
                 update_check_interval_ms: float = UPDATE_CHECK_INTERVAL_MS, storage_options: dict | None = None,
                 ignore_deletes: bool = False, ignore_changes: bool = False):
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ConfigurationError(f"DeltaSource: the table path must be a non-empty string, got {path!r}.")
        path = os.fspath(path)
        self.path = path if "://" in path else os.path.abspath(path)
        self.bounded = bool(bounded)
        for name, value in (("version_as_of", version_as_of), ("starting_version", starting_version)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigurationError(f"DeltaSource {name} must be a table version (an int >= 0), got {value!r}.")
        if version_as_of is not None and not self.bounded:
            raise ConfigurationError("DeltaSource: version_as_of(...) is where a bounded source ends; a continuous "
                                     "source reads every version. Use for_bounded(path).version_as_of(v), or "
                                     "for_continuous(path).starting_version(v) to begin at a version.")
        if starting_version is not None and version_as_of is not None and starting_version > version_as_of:
            raise ConfigurationError(f"DeltaSource: starting_version({starting_version}) is after "
                                     f"version_as_of({version_as_of}): nothing would be read.")
        if update_check_interval_ms is None or update_check_interval_ms <= 0:
            raise ConfigurationError(f"DeltaSource update_check_interval must be > 0 ms, got "
                                     f"{update_check_interval_ms!r}.")
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise ConfigurationError(f"DeltaSource columns must be a list of column names, got {columns!r}.")
        self.version_as_of = version_as_of
        self.starting_version = starting_version
        self.columns = list(columns) if columns is not None else None
        self.update_check_interval_ms = update_check_interval_ms
        self.storage_options = {str(k): str(v) for k, v in (storage_options or {}).items()}
        self.ignore_deletes = bool(ignore_deletes)
        self.ignore_changes = bool(ignore_changes)
        self.end_version = version_as_of  # bounded: resolved to the latest version by validate() when not given
        # The version whose snapshot is read first (no starting_version): resolved by validate() on the driver, so
        # that every attempt of the job (one restarted before its first checkpoint too) reads the same snapshot.
        self.snapshot_version = version_as_of

    @staticmethod
    def for_bounded(path: str) -> "DeltaSourceBuilder":
        """A source that reads the table at one version and ends (Flink's ``DeltaSource.forBoundedRowData``).

        >>> DeltaSource.for_bounded("/data/orders").version_as_of(3).build().end_version
        3
        """
        return DeltaSourceBuilder(path, bounded=True)

    @staticmethod
    def for_continuous(path: str) -> "DeltaSourceBuilder":
        """A source that reads the table, then every version committed after (``forContinuousRowData``).

        >>> DeltaSource.for_continuous("/data/orders").starting_version(5).build().starting_version
        5
        """
        return DeltaSourceBuilder(path, bounded=False)

    # -- the table ---------------------------------------------------------------------------------------

    def open_table(self, version: int | None = None):
        """delta-rs's ``DeltaTable`` at ``version`` (the latest when None), or an error naming the path and fix."""
        deltalake = _deltalake()
        try:
            is_table = deltalake.DeltaTable.is_deltatable(self.path, delta_storage_options(self.storage_options))
        except Exception as exc:  # the store refused: credentials, endpoint
            raise InputUnreachableError(f"DeltaSource cannot read {self.path}: {type(exc).__name__}: {exc}. Check "
                                        "the path and storage_options(...).") from exc
        if not is_table:
            raise InputUnreachableError(
                f"DeltaSource: {self.path} is not a Delta table (no readable _delta_log/ there). Check the path "
                "(the table's root directory), and storage_options(...) for an object store.")
        try:
            return deltalake.DeltaTable(self.path, version=version, storage_options=delta_storage_options(self.storage_options))
        except Exception as exc:
            if version is None:
                raise InputUnreachableError(f"DeltaSource cannot load {self.path}: {type(exc).__name__}: "
                                            f"{exc}") from exc
            raise InputUnreachableError(
                f"DeltaSource cannot load version {version} of {self.path} ({type(exc).__name__}: {exc}): it does "
                "not exist yet, or log retention removed it. Pick a version the table's history() lists.") from exc

    def validate(self) -> None:
        """Driver, before launch: the path is a Delta table, the versions exist, the columns are the table's.

        A bounded source without ``version_as_of`` ends at the version that is the latest now.
        """
        table = self.open_table()
        latest = table.version()
        if self.version_as_of is not None and self.version_as_of > latest:
            raise ConfigurationError(f"DeltaSource: version_as_of({self.version_as_of}) is after the latest version "
                                     f"of {self.path}, {latest}.")
        if self.bounded and self.end_version is None:
            self.end_version = latest
        if self.starting_version is None and self.snapshot_version is None:
            self.snapshot_version = latest
        if self.bounded and self.starting_version is not None and self.starting_version > self.end_version:
            raise ConfigurationError(f"DeltaSource: starting_version({self.starting_version}) is after the version "
                                     f"the bounded source ends at, {self.end_version}: nothing would be read.")
        if self.columns is not None:
            names = [field.name for field in table.schema().fields]
            unknown = [c for c in self.columns if c not in names and c not in CHANGE_DATA_COLUMNS]
            if unknown:
                raise ConfigurationError(f"DeltaSource columns({self.columns}): {unknown} are not columns of "
                                         f"{self.path}, which has {names}.")
        if self.starting_version is None and self.version_as_of is not None:
            self.open_table(self.version_as_of)  # still loadable (log retention)

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _DeltaReader(self)

    def __repr__(self) -> str:
        return f"DeltaSource({self.path!r}, bounded={self.bounded})"


class DeltaSourceBuilder:
    """The options of a :class:`DeltaSource`, in Flink's Delta connector's manner; :meth:`build` makes it.

    >>> builder = DeltaSource.for_continuous("/data/orders").update_check_interval(200)
    >>> builder.storage_options({"AWS_REGION": "eu-west-1"}).ignore_deletes(True).build().ignore_deletes
    True
    """

    def __init__(self, path: str, bounded: bool):
        self._path = path
        self._bounded = bounded
        self._options: dict = {}

    def version_as_of(self, version: int) -> "DeltaSourceBuilder":
        """Bounded: read the table as of ``version`` (with :meth:`starting_version`: the changes up to it)."""
        self._options["version_as_of"] = version
        return self

    def starting_version(self, version: int) -> "DeltaSourceBuilder":
        """Read no snapshot: begin with the changes that ``version`` committed, then every later version."""
        self._options["starting_version"] = version
        return self

    def columns(self, columns: list[str]) -> "DeltaSourceBuilder":
        """Read only these columns (in the change data feed, the ``_change_type`` ... columns come too)."""
        self._options["columns"] = columns
        return self

    def update_check_interval(self, interval_ms: float) -> "DeltaSourceBuilder":
        """Continuous: how often to look for a new version (milliseconds; 1000 by default)."""
        self._options["update_check_interval_ms"] = interval_ms
        return self

    def storage_options(self, options: dict) -> "DeltaSourceBuilder":
        """delta-rs's object store options (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` ...)."""
        self._options["storage_options"] = dict(options)
        return self

    def ignore_deletes(self, ignore: bool = True) -> "DeltaSourceBuilder":
        """Without a change data feed, skip versions that only remove files (Flink's ``ignoreDeletes``)."""
        self._options["ignore_deletes"] = ignore
        return self

    def ignore_changes(self, ignore: bool = True) -> "DeltaSourceBuilder":
        """Without a change data feed, read the files that rewrites (UPDATE, MERGE) add, ignoring what they remove:
        rows they copied arrive again (Flink's ``ignoreChanges``)."""
        self._options["ignore_changes"] = ignore
        return self

    def build(self) -> DeltaSource:
        return DeltaSource(self._path, bounded=self._bounded, **self._options)


class UnreadableTableError(InputUnreachableError):
    """The table needs a reader feature this source lacks (deletion vectors, column mapping): a restart would not
    help."""

    retryable = False


def _partition_expression(schema, values: dict, path: str):
    """The filter that says which partition a file is in, from its add action's ``partitionValues`` (strings): a
    fragment fills its partition columns from it.

    >>> import pyarrow as pa
    >>> schema = pa.schema([("day", pa.date32()), ("shard", pa.int32()), ("n", pa.int64())])
    >>> _partition_expression(schema, {"day": "2026-11-27", "shard": None}, "f.parquet")
    <pyarrow.compute.Expression ((day == 2026-11-27) and is_null(shard, {nan_is_null=false}))>
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    expression = None
    for name, value in sorted(values.items()):
        column = pc.field(name)
        if value is None:
            term = column.is_null()
        else:
            try:
                term = column == pa.scalar(value).cast(schema.field(name).type)
            except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise UnreadableTableError(f"DeltaSource: the partition value {name}={value!r} of {path} does not "
                                           f"read as the column's type: {exc}") from exc
        expression = term if expression is None else expression & term
    return expression


def _plain_types(table):
    """``table`` with string and binary views (which the feed returns, and ``take`` cannot order) cast to the
    plain types."""
    import pyarrow as pa

    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(field.type in views for field in table.schema):
        return table
    return table.cast(pa.schema([field.with_type(views.get(field.type, field.type)) for field in table.schema]))


def _stable_order(table):
    """One version's change data in an order that depends only on its rows: the feed's own order varies."""
    table = _plain_types(table)
    rows = table.to_pylist()
    names = sorted(table.column_names)
    keys = [(_CHANGE_ORDER.get(row.get("_change_type"), 9), tuple(repr(row[name]) for name in names)) for row in rows]
    order = sorted(range(len(rows)), key=keys.__getitem__)
    return table.take(order)


class _DeltaReader(SourceReader):
    """Reads from :attr:`position` on: loads the parts of the position's version, emits rows, moves on."""

    def __init__(self, source: DeltaSource, clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], None] = time.sleep):
        self.source = source
        self.clock, self.wait = clock, wait  # monotonic seconds, and how to pause a poll that found nothing
        self.position: DeltaPosition | None = None
        self.end_version = source.end_version
        self.table = None  # delta-rs's DeltaTable, loaded at the version being read
        self.filesystem = None  # a pyarrow filesystem at the table's root, for the commit files
        self.parts: list[Callable] | None = None  # the position's version's parts, each reading a pyarrow Table
        self.rows = None  # the current part's rows (all of them: the position's row indexes it)
        self.next_check = 0.0  # when to ask the store again for a version it said was not committed

    def restore_state(self, splits: list) -> None:
        if len(splits) > 1:
            raise InputUnreachableError(f"DeltaSource {self.source.path}: a checkpoint holds {len(splits)} "
                                        "positions, where the source keeps one.")
        self.position = splits[0] if splits else None

    def snapshot_state(self) -> list:
        return [self.position] if self.position is not None else []

    def open(self, runtime_context) -> None:
        from deltalake.fs import DeltaStorageHandler
        from pyarrow.fs import PyFileSystem

        source = self.source
        self.table = source.open_table()
        self.filesystem = PyFileSystem(DeltaStorageHandler(source.path, delta_storage_options(source.storage_options)))
        latest = self.table.version()
        if source.bounded and self.end_version is None:  # validate() did not run: the latest version now
            self.end_version = latest
        if self.position is None:
            if source.starting_version is not None:
                self.position = DeltaPosition.changes_of(source.starting_version)
            else:
                snapshot = source.snapshot_version
                self.position = DeltaPosition.snapshot_of(latest if snapshot is None else snapshot)
        elif (not self.position.snapshot and self.position.version <= latest
              and not self._committed(self.position.version)):
            raise InputUnreachableError(
                f"DeltaSource {source.path}: the checkpoint's position is {self.position.describe()}, but that "
                f"version's commit is gone from _delta_log/ (log retention; the table is at version {latest}). "
                "Start the job without restoring, or keep the log longer (delta.logRetentionDuration).")

    def _committed(self, version: int) -> bool:
        from pyarrow.fs import FileType

        return self.filesystem.get_file_info(commit_path(version)).type != FileType.NotFound

    def _version_committed(self, version: int) -> bool:
        """Whether ``version`` is committed, asking the store at most once per update check interval while it is
        not (and at once for the next, while versions are there to read)."""
        now = self.clock()
        if now < self.next_check:
            return False
        if self._committed(version):
            return True
        self.next_check = now + self.source.update_check_interval_ms / 1000.0
        return False

    def poll(self, max_records: int) -> list | None:
        position = self.position
        if position.is_past(self.end_version):
            return None
        if self.parts is None:
            if not position.snapshot and not self._version_committed(position.version):
                self.wait(POLL_WAIT_S)
                return []
            self.parts = self._parts(position)
        while position.part < len(self.parts):
            if self.rows is None:
                self.rows = self.parts[position.part]()
            if position.row < self.rows.num_rows:
                batch = self.rows.slice(position.row, max_records)
                self.position = position.advanced(batch.num_rows)
                return batch.to_pylist()
            self.rows = None
            position = self.position = position.next_part()
        self.parts = None
        self.position = position.next_version()
        return []

    # -- a version's parts ---------------------------------------------------------------------------------

    def _parts(self, position: DeltaPosition) -> list[Callable]:
        source = self.source
        try:
            self.table.load_as_version(position.version)
        except Exception as exc:  # the store did not answer (a restart may help), or the version is gone
            raise InputUnreachableError(
                f"DeltaSource cannot load version {position.version} of {source.path} to read "
                f"{position.describe()} ({type(exc).__name__}: {exc}). Either the store did not answer, or log "
                "retention removed that version: then start the job without restoring, or keep the log longer "
                "(delta.logRetentionDuration).") from exc
        if position.snapshot:
            return self._snapshot_parts()
        with self.filesystem.open_input_stream(commit_path(position.version)) as stream:
            actions = parse_commit(stream.read().decode("utf-8"))
        change_data_feed = _is_true(self.table.metadata().configuration.get("delta.enableChangeDataFeed"))
        plan = plan_version(position.version, actions, change_data_feed, source.ignore_deletes,
                            source.ignore_changes, table=source.path)
        if plan is ReadPlan.ADDED_FILES:
            return self._added_parts(actions)
        if plan is ReadPlan.CHANGE_DATA_FEED:
            return [lambda: self._change_data(position.version)]
        return []

    def _columns(self) -> list[str] | None:
        columns = self.source.columns
        return None if columns is None else [c for c in columns if c not in CHANGE_DATA_COLUMNS]

    def _snapshot_parts(self) -> list[Callable]:
        """The table's files at the loaded version, in path order, each a part."""
        try:
            dataset = self.table.to_pyarrow_dataset()
        except Exception as exc:  # a reader feature pyarrow datasets lack (deletion vectors, column mapping)
            raise UnreadableTableError(f"DeltaSource cannot read {self.source.path} at version "
                                       f"{self.table.version()}: {type(exc).__name__}: {exc}") from exc
        fragments = {fragment.path: fragment for fragment in dataset.get_fragments()}
        columns, schema = self._columns(), dataset.schema
        return [lambda fragment=fragments[path]: fragment.to_table(schema=schema, columns=columns)
                for path in sorted(fragments)]

    def _added_parts(self, actions: VersionActions) -> list[Callable]:
        """The files a version added, in path order, each a part. Read one by one, with the partition values its
        add action gives (a dataset of the whole table would cost a moment per file the table has, every version)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        schema = pa.schema(self.table.schema().to_arrow())
        file_format = ds.ParquetFileFormat()
        columns = self._columns()

        def read(path: str):
            expression = _partition_expression(schema, actions.partition_values.get(path) or {}, path)
            fragment = file_format.make_fragment(path, filesystem=self.filesystem, partition_expression=expression)
            return fragment.to_table(schema=schema, columns=columns)

        return [lambda path=path: read(path) for path in actions.added]

    def _change_data(self, version: int):
        import pyarrow as pa

        columns = self.source.columns
        if columns is not None:
            columns = columns + [c for c in CHANGE_DATA_COLUMNS if c not in columns]
        try:
            reader = self.table.load_cdf(starting_version=version, ending_version=version, columns=columns)
            return _stable_order(pa.table(reader))
        except Exception as exc:
            raise InputUnreachableError(f"DeltaSource cannot read the change data feed of version {version} of "
                                        f"{self.source.path}: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self.parts = self.rows = None
        self.table = self.filesystem = None
