"""Delta Lake tables in and out, exactly once, on ``deltalake`` (delta-rs: no JVM; Spark reads the tables).

The source (``DeltaSource.for_bounded(path)`` / ``for_continuous(path)``, see :mod:`operators.delta.source`) reads a
table's snapshot, then each version as it is committed, its position (version, file, row) checkpointed. The sink
appends a stream to a table with one Delta commit per checkpoint, made idempotent by Delta's application
transactions (see :mod:`operators.delta.sink`). Names follow Flink's Delta connector (``DeltaSink.forRowData(path,
conf, rowType).withPartitionColumns(...).withMergeSchema(...)``) in Python's words:

>>> import tempfile
>>> from runtime.common import Types
>>> row = Types.ROW_NAMED(["day", "user", "clicks"], [Types.STRING(), Types.STRING(), Types.LONG()])
>>> sink = (DeltaSink.for_row_data(tempfile.mkdtemp() + "/clicks", row)
...         .with_partition_columns("day").with_merge_schema(False).build())
>>> sink.partition_by, sink.schema.names
(('day',), ['day', 'user', 'clicks'])

A columnar stream (Arrow batches) needs no row type: ``stream.sink_to(DeltaSink(path))``.
"""

from __future__ import annotations

from operators.committing.sink import GlobalCommitSink
from operators.delta.sink import DeltaSink as _DeltaSink
from operators.delta.source import DeltaSource, DeltaSourceBuilder
from runtime.types import TypeInformation

__all__ = ["DeltaSink", "DeltaSinkBuilder", "DeltaSource", "DeltaSourceBuilder"]


class DeltaSink(_DeltaSink):
    __doc__ = _DeltaSink.__doc__

    @staticmethod
    def for_row_data(path: str, row_type: TypeInformation | None = None,
                     storage_options: dict | None = None) -> "DeltaSinkBuilder":
        """A builder of a sink appending to the table at ``path``; ``row_type``: the records' row type (a columnar
        stream, or one whose operator declared ``output_type``, needs none)."""
        return DeltaSinkBuilder(path, row_type, storage_options)

    forRowData = for_row_data


class DeltaSinkBuilder:
    def __init__(self, path: str, row_type: TypeInformation | None, storage_options: dict | None):
        self._path = path
        self._schema = GlobalCommitSink().record_schema(row_type) if row_type is not None else None
        self._options = dict(storage_options or {})
        self._partition_by: tuple[str, ...] = ()
        self._merge_schema = False
        self._target_file_size = 128 << 20

    def with_partition_columns(self, *columns: str) -> "DeltaSinkBuilder":
        self._partition_by = tuple(c for group in columns for c in ((group,) if isinstance(group, str) else group))
        return self

    def with_merge_schema(self, merge_schema: bool) -> "DeltaSinkBuilder":
        """Let the sink add the stream's columns that the table lacks (refused otherwise)."""
        self._merge_schema = bool(merge_schema)
        return self

    def with_storage_options(self, options: dict) -> "DeltaSinkBuilder":
        self._options.update(options)
        return self

    def with_target_file_size(self, size_bytes: int) -> "DeltaSinkBuilder":
        self._target_file_size = int(size_bytes)
        return self

    withPartitionColumns = with_partition_columns
    withMergeSchema = with_merge_schema

    def build(self) -> DeltaSink:
        return DeltaSink(self._path, schema=self._schema, partition_by=self._partition_by,
                         merge_schema=self._merge_schema, storage_options=self._options,
                         target_file_size=self._target_file_size)
