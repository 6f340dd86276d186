"""The Delta Lake sink: subtasks write Parquet files, one committer commits them, one Delta commit per checkpoint.

Exactly once with Delta's application transactions: each commit carries a ``txn`` action whose app id names the
job and the sink and whose version is the checkpoint id, so the committer asks the table
(``DeltaTable.transaction_version``) which checkpoint it holds last and skips a commit repeated after a restore.
Flink's Delta connector commits the same way (its global committer). Writers and committer: see
:mod:`operators.committing`.

>>> import pyarrow as pa, tempfile
>>> sink = DeltaSink(tempfile.mkdtemp() + "/events", schema=pa.schema([("user", pa.string()), ("n", pa.int64())]))
>>> sink.validate()   # creates the table (no table there yet): version 0, no rows
>>> sink.bind("doc job", "events-sink"); sink.committed_checkpoint() is None
True
>>> writer = sink.create_file_writer(subtask=0, parallelism=1)
>>> writer.write([pa.record_batch({"user": ["ada", "bob"], "n": [1, 2]})])
>>> sink.commit(writer.prepare_commit(), checkpoint_id=7), sink.commit((), checkpoint_id=7)  # again: skipped
(True, False)
>>> sink.committed_checkpoint(), sink.table().to_pyarrow_table().num_rows
(7, 2)
"""

from __future__ import annotations

import logging
import os
import re

import pyarrow as pa

from operators.committing.sink import FileWriter, GlobalCommitSink
from operators.committing.parquet_files import ParquetFileWriter, small_files_note
from operators.delta.storage import delta_storage_options, fsspec_storage_options
from runtime.errors import ConfigurationError, OutputConflictError, OutputUnreachableError

__all__ = ["DeltaSink"]

log = logging.getLogger(__name__)

COMMIT_RETRIES = 10  # delta-rs retries a commit that lost a race to appends by others this often


def _deltalake():
    try:
        import deltalake
    except ImportError as exc:
        raise ConfigurationError(
            f"The Delta Lake connector needs the deltalake package ({exc}). Fix: pip install 'chandy[delta]', on "
            "the driver and on every executor.") from exc
    return deltalake


def _without_colours(exc: Exception) -> Exception:
    """delta-rs colours its error chains for a terminal; in a log or a traceback the escape codes are noise."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    try:
        return type(exc)(text)
    except Exception:  # an exception type that takes other arguments
        return RuntimeError(f"{type(exc).__name__}: {text}")


def _normal(data_type: pa.DataType) -> pa.DataType:
    """Types that hold the same values in a Parquet file and a Delta column: compared as equal."""
    if pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type) or pa.types.is_binary_view(data_type):
        return pa.binary()
    if pa.types.is_timestamp(data_type):
        return pa.timestamp("us", data_type.tz and "UTC")
    return data_type


_WIDENING = {pa.int8(): (pa.int16(), pa.int32(), pa.int64()), pa.int16(): (pa.int32(), pa.int64()),
             pa.int32(): (pa.int64(),), pa.float32(): (pa.float64(),)}


def _fits(stream_type: pa.DataType, table_type: pa.DataType) -> bool:
    stream_type, table_type = _normal(stream_type), _normal(table_type)
    return stream_type.equals(table_type) or table_type in _WIDENING.get(stream_type, ())


class DeltaSink(GlobalCommitSink):
    """Append a stream to the Delta table at ``path``, exactly once, one Delta commit per checkpoint.

    ``schema``: the columns, for a stream of records without a declared row type (a columnar stream has its
    own). ``partition_by``: partition columns (a new table is created with them; an existing one must have them).
    ``merge_schema``: let columns the table lacks be added to it (otherwise a stream with other columns than the
    table is refused before the job starts). ``storage_options``: passed to deltalake (object store endpoints and
    credentials; the usual ``AWS_*`` environment variables work too). ``target_file_size``: a file is rolled at
    about this many bytes of Arrow data; a checkpoint closes every open file, so each checkpoint interval writes at
    least one file per subtask and partition: compact the table now and then (``DeltaTable(path).optimize.compact()``).
    """

    accepts_batches = True

    def __init__(self, path: str, schema: pa.Schema | None = None, partition_by=(), merge_schema: bool = False,
                 storage_options: dict | None = None, target_file_size: int = 128 << 20,
                 configuration: dict | None = None, name: str | None = None):
        self.path = path if "://" in path else os.path.abspath(path)
        self.schema = schema
        self.partition_by = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
        self.merge_schema = merge_schema
        self.storage_options = dict(storage_options or {})
        self.target_file_size = target_file_size
        self.configuration = configuration
        self.name = name or f"Delta Lake table {self.path}"
        self.description = f"Delta Lake table {self.path}"
        self.table_schema: pa.Schema | None = None  # the table's columns, as the writers write them

    # -- the table ---------------------------------------------------------------------------------------

    def table(self):
        deltalake = _deltalake()
        try:
            return deltalake.DeltaTable(self.path, storage_options=delta_storage_options(self.storage_options))
        except deltalake.exceptions.TableNotFoundError:
            raise
        except Exception as exc:  # network, credentials, a bucket that does not exist
            raise OutputUnreachableError(self.path, _without_colours(exc)) from exc

    def validate(self) -> None:
        """Driver, before launch: open or create the table and check that the stream's columns fit it."""
        deltalake = _deltalake()
        schema = self.stream_schema if self.stream_schema is not None else self.schema
        if schema is None:
            raise ConfigurationError(f"{self.description}: the sink has no schema. Write a columnar stream to it, "
                                     "declare the records' row type, or give DeltaSink(schema=...).")
        try:
            table = self.table()
        except deltalake.exceptions.TableNotFoundError:
            missing = [c for c in self.partition_by if c not in schema.names]
            if missing:
                raise ConfigurationError(f"{self.description}: partition columns {missing} are not columns of the "
                                         f"stream ({schema.names}).") from None
            try:
                deltalake.DeltaTable.create(self.path, schema, partition_by=list(self.partition_by) or None,
                                            storage_options=delta_storage_options(self.storage_options),
                                            configuration=self.configuration)
            except Exception as exc:
                raise OutputUnreachableError(self.path, _without_colours(exc)) from exc
            table = self.table()
        self.table_schema = self._fit(table, schema)

    def _fit(self, table, schema: pa.Schema) -> pa.Schema:
        """The schema the writers write: the stream's columns with the table's types; refuses what does not fit."""
        table_schema = pa.schema(table.schema().to_arrow())
        partitions = tuple(table.metadata().partition_columns)
        if partitions != self.partition_by:
            raise ConfigurationError(
                f"{self.description} is partitioned by {list(partitions)}, the sink by {list(self.partition_by)}. "
                f"Give the sink partition_by={list(partitions)}, or write to another table.")
        extra = [f for f in schema if f.name not in table_schema.names]
        if extra and not self.merge_schema:
            raise ConfigurationError(
                f"{self.description} has no column {', '.join(repr(f.name) for f in extra)} (stream type "
                f"{', '.join(str(f.type) for f in extra)}); its columns are {table_schema.names}. Select the "
                "table's columns before the sink, or let the sink add columns: DeltaSink(..., merge_schema=True).")
        for field in schema:
            if field.name in table_schema.names and not _fits(field.type, table_schema.field(field.name).type):
                raise ConfigurationError(
                    f"{self.description}: column '{field.name}' is {table_schema.field(field.name).type} in the table "
                    f"and {field.type} in the stream. Cast it before the sink (map_batches), or write to another "
                    "table.")
        for field in table_schema:
            if field.name not in schema.names and not field.nullable:
                raise ConfigurationError(
                    f"{self.description}: the stream has no column '{field.name}', which the table requires (NOT "
                    "NULL). Add it to the stream before the sink.")
        if extra:
            deltalake = _deltalake()
            table.alter.add_columns([deltalake.Field.from_arrow(pa.field(f.name, f.type, nullable=True))
                                     for f in extra])
            log.info("%s: added columns %s (merge_schema=True)", self.description, [f.name for f in extra])
            table_schema = pa.schema(table.schema().to_arrow())
        return pa.schema([pa.field(f.name, table_schema.field(f.name).type) for f in schema])

    # -- writers and committer ---------------------------------------------------------------------------

    def create_file_writer(self, subtask: int, parallelism: int) -> FileWriter:
        if self.table_schema is None:  # a sink used without validate (tests): the stream's schema as it is
            self.table_schema = self.stream_schema if self.stream_schema is not None else self.schema
        return ParquetFileWriter(self.path, self.table_schema, self.partition_by, target_file_size=self.target_file_size,
                                 subtask=subtask, storage_options=fsspec_storage_options(self.path, self.storage_options))

    def committed_checkpoint(self) -> int | None:
        version = self.table().transaction_version(self.app_id)
        return None if version is None or version < 0 else int(version)

    def commit(self, files: tuple, checkpoint_id: int | None) -> bool:
        deltalake = _deltalake()
        from deltalake.transaction import AddAction, CommitProperties, Transaction

        actions = [AddAction(f.path, f.size, dict(f.partition_values), f.modification_time, True, f.stats)
                   for f in files]
        transactions = [Transaction(self.app_id, checkpoint_id)] if checkpoint_id is not None else None
        metadata = {"chandy.app-id": self.app_id or "", "chandy.checkpoint-id": str(checkpoint_id)}
        properties = CommitProperties(custom_metadata=metadata, max_commit_retries=COMMIT_RETRIES,
                                      app_transactions=transactions)
        table = self.table()
        held = table.transaction_version(self.app_id) if checkpoint_id is not None else None
        if held is not None and held >= checkpoint_id:  # a committer of a failed attempt got there first
            log.info("%s holds checkpoint %s of this sink already: not committed again", self.description, held)
            return False
        try:
            table.create_write_transaction(actions, "append", pa.schema(table.schema().to_arrow()),
                                           list(self.partition_by) or None, commit_properties=properties)
        except deltalake.exceptions.CommitFailedError as exc:
            raise OutputConflictError(
                f"{self.description}: the commit of checkpoint {checkpoint_id} conflicts with another writer's commit "
                f"({exc}). Appends by others are reconciled (retried up to {COMMIT_RETRIES} times); this change was "
                "not: another job or tool changed the table's schema or overwrote it. The job restarts and commits "
                "again on the table as it is then.") from exc
        log.info("%s: committed %d files (%d rows) of checkpoint %s as version %d%s", self.description, len(files),
                 sum(f.num_records for f in files), checkpoint_id, table.version(),
                 small_files_note(files, "DeltaTable(path).optimize.compact()"))
        return True
