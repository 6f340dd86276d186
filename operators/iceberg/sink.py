"""The Iceberg sink: subtasks write Parquet files, one committer adds them to the table, one snapshot per checkpoint.

Exactly once as Flink's Iceberg sink does it (``flink.max-committed-checkpoint-id``): each snapshot's summary
records the sink's app id (job name and committer uid) and the checkpoint id, and the committer reads the newest
one of this sink from the table's snapshots before committing, so a commit repeated after a restore is skipped.
Files are added with pyiceberg's ``add_files`` (no rewrite: the files the writers wrote are the table's). Tables
are found through a pyiceberg catalog: its SQL catalog on SQLite for local use and tests, a REST catalog (or any
other pyiceberg knows) where one runs. Writers and committer: see :mod:`operators.committing`.

>>> import pyarrow as pa, tempfile
>>> warehouse = tempfile.mkdtemp()
>>> catalog = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": f"file://{warehouse}"}
>>> sink = IcebergSink(catalog, "shop.orders", schema=pa.schema([("id", pa.int64()), ("item", pa.string())]))
>>> sink.validate()   # creates the namespace and the table: no snapshot yet
>>> sink.bind("doc job", "orders-committer"); sink.committed_checkpoint() is None
True
>>> writer = sink.create_file_writer(subtask=0, parallelism=1)
>>> writer.write([pa.record_batch({"id": [1, 2], "item": ["tea", "jam"]})])
>>> sink.commit(writer.prepare_commit(), checkpoint_id=4), sink.commit((), checkpoint_id=4)  # again: skipped
(True, False)
>>> sink.committed_checkpoint(), len(sink.table().scan().to_arrow())
(4, 2)
"""

from __future__ import annotations

import logging
import os
import posixpath

import pyarrow as pa

from operators.committing.parquet_files import ParquetFileWriter, small_files_note
from operators.committing.sink import FileWriter, GlobalCommitSink
from runtime.errors import ConfigurationError, OutputUnreachableError

__all__ = ["IcebergSink"]

log = logging.getLogger(__name__)

APP_ID = "chandy.app-id"
CHECKPOINT_ID = "chandy.checkpoint-id"
COMMIT_ATTEMPTS = 5


def _catalog_module():
    try:
        import pyiceberg.catalog
    except ImportError as exc:
        raise ConfigurationError(
            f"The Iceberg connector needs the pyiceberg package ({exc}). Fix: pip install 'chandy[iceberg]', on the "
            "driver and on every executor.") from exc
    return pyiceberg.catalog


class IcebergSink(GlobalCommitSink):
    """Append a stream to the Iceberg table ``identifier`` (``"namespace.table"``) of the pyiceberg catalog described
    by ``catalog`` (its properties, as ``pyiceberg.catalog.load_catalog`` takes them; ``catalog_name``: its name there,
    which a SQL catalog stores with each table), exactly once, one snapshot per
    checkpoint. A table that does not exist is created unpartitioned from the stream's columns (``schema`` for a
    stream of records without a declared row type); an existing one must have the stream's columns with the same
    types. Partitioned tables are not written yet: the sink refuses them before the job starts."""

    accepts_batches = True

    def __init__(self, catalog: dict, identifier: str, schema: pa.Schema | None = None,
                 target_file_size: int = 128 << 20, name: str | None = None, catalog_name: str = "default"):
        self.catalog_properties = _absolute_local_paths(dict(catalog))
        self.catalog_name = catalog_name  # a SQL catalog keeps the tables of each catalog name apart
        self.identifier = identifier
        self.schema = schema
        self.target_file_size = target_file_size
        self.name = name or f"Iceberg table {identifier}"
        self.description = f"Iceberg table {identifier}"
        self.table_schema: pa.Schema | None = None
        self.data_location: str | None = None

    def table(self):
        catalog_module = _catalog_module()
        from pyiceberg.exceptions import NoSuchTableError

        try:
            catalog = catalog_module.load_catalog(self.catalog_name, **self.catalog_properties)
            return catalog.load_table(self.identifier)
        except NoSuchTableError:
            raise
        except Exception as exc:  # an unreachable catalog or warehouse
            raise OutputUnreachableError(f"{self.description} (catalog {self.catalog_properties.get('uri')})",
                                         exc) from exc

    def validate(self) -> None:
        """Driver, before launch: open or create the table and check that the stream's columns fit it."""
        catalog_module = _catalog_module()
        from pyiceberg.exceptions import NoSuchTableError

        schema = self.stream_schema if self.stream_schema is not None else self.schema
        if schema is None:
            raise ConfigurationError(f"{self.description}: the sink has no schema. Write a columnar stream to it, "
                                     "declare the records' row type, or give IcebergSink(schema=...).")
        try:
            table = self.table()
        except NoSuchTableError:
            catalog = catalog_module.load_catalog(self.catalog_name, **self.catalog_properties)
            namespace = self.identifier.rsplit(".", 1)[0] if "." in self.identifier else None
            if namespace:
                catalog.create_namespace_if_not_exists(namespace)
            catalog.create_table_if_not_exists(self.identifier, schema=schema)
            table = self.table()
        if not table.spec().is_unpartitioned():
            fields = ", ".join(f"{f.name}: {f.transform}" for f in table.spec().fields)
            raise ConfigurationError(f"{self.description} is partitioned ({fields}): this sink writes "
                                     "unpartitioned Iceberg tables only. Write to an unpartitioned table.")
        table_schema = table.schema().as_arrow()
        for field in table_schema:
            if field.name not in schema.names and not field.nullable:
                raise ConfigurationError(
                    f"{self.description}: the stream has no column '{field.name}', which the table requires. Add it "
                    "to the stream before the sink.")
        for field in schema:
            if field.name not in table_schema.names:
                raise ConfigurationError(
                    f"{self.description} has no column '{field.name}' (stream type {field.type}); its columns are "
                    f"{table_schema.names}. Select the table's columns before the sink, or add the column to the "
                    "table (table.update_schema()).")
            expected = table_schema.field(field.name).type
            if not _same(field.type, expected):
                raise ConfigurationError(
                    f"{self.description}: column '{field.name}' is {expected} in the table and {field.type} in the "
                    "stream. Cast it before the sink (map_batches), or write to another table.")
        self.table_schema = pa.schema([table_schema.field(f.name) for f in schema])
        self.data_location = posixpath.join(table.location(), "data")

    def create_file_writer(self, subtask: int, parallelism: int) -> FileWriter:
        if self.data_location is None:
            self.validate()
        return ParquetFileWriter(self.data_location, self.table_schema, (), target_file_size=self.target_file_size,
                                 subtask=subtask, storage_options=_fsspec_options(self.catalog_properties))

    def committed_checkpoint(self) -> int | None:
        """The newest checkpoint of this sink in the table's current history (Flink's max committed checkpoint id):
        the current snapshot and its ancestors, so that a snapshot rolled back is not taken for committed."""
        return self._committed_in(self.table())

    def _committed_in(self, table) -> int | None:
        snapshot = table.current_snapshot()
        while snapshot is not None:
            summary = snapshot.summary
            if summary is not None and summary.get(APP_ID) == self.app_id and summary.get(CHECKPOINT_ID):
                return int(summary.get(CHECKPOINT_ID))  # commits are in checkpoint order: the newest is the highest
            parent = snapshot.parent_snapshot_id
            snapshot = table.snapshot_by_id(parent) if parent is not None else None
        return None

    def commit(self, files: tuple, checkpoint_id: int | None) -> bool:
        from pyiceberg.exceptions import CommitFailedException

        paths = [posixpath.join(self.data_location, f.path) for f in files]
        properties = {APP_ID: self.app_id or "", CHECKPOINT_ID: "" if checkpoint_id is None else str(checkpoint_id)}
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self.table()  # fresh metadata: another writer may have committed since
            held = self._committed_in(table) if checkpoint_id is not None else None
            if held is not None and held >= checkpoint_id:  # a committer of a failed attempt got there first
                log.info("%s holds checkpoint %s of this sink already: not committed again", self.description, held)
                return False
            try:
                # Duplicates are ruled out by the checkpoint ids; checking for them would read every manifest.
                table.add_files(paths, snapshot_properties=properties, check_duplicate_files=False)
                break
            except CommitFailedException as exc:
                if attempt == COMMIT_ATTEMPTS:
                    raise OutputUnreachableError(self.description, RuntimeError(
                        f"the commit of checkpoint {checkpoint_id} conflicted with other writers' commits "
                        f"{COMMIT_ATTEMPTS} times in a row ({exc}). The job restarts and commits again.")) from exc
                log.info("%s: commit of checkpoint %s conflicted (%s), retrying", self.description, checkpoint_id, exc)
        log.info("%s: committed %d files (%d rows) of checkpoint %s%s", self.description, len(files),
                 sum(f.num_records for f in files), checkpoint_id,
                 small_files_note(files, "Spark's rewrite_data_files procedure"))
        return True


_S3FS_NAMES = {"s3.endpoint": "endpoint_url", "s3.access-key-id": "key", "s3.secret-access-key": "secret",
               "s3.session-token": "token"}


def _fsspec_options(properties: dict) -> dict:
    """The catalog's object-store properties under s3fs's names, for the writers' files (pyiceberg reads the same
    properties for its own).

    >>> _fsspec_options({"uri": "sqlite:///c.db", "s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1"})
    {'endpoint_url': 'http://127.0.0.1:9000', 'client_kwargs': {'region_name': 'eu-west-1'}}
    """
    options: dict = {}
    for name, value in properties.items():
        if name in _S3FS_NAMES:
            options[_S3FS_NAMES[name]] = value
        elif name == "s3.region":
            options.setdefault("client_kwargs", {})["region_name"] = value
    return options


def _absolute_local_paths(properties: dict) -> dict:
    """A SQLite catalog or a warehouse named by a relative path, made absolute where the job is declared: the
    executors run in other working directories.

    >>> import os
    >>> props = _absolute_local_paths({"uri": "sqlite:///tables/c.db", "warehouse": "file://tables/w"})
    >>> props["uri"] == "sqlite:///" + os.path.abspath("tables/c.db"), props["warehouse"].startswith("file:///")
    (True, True)
    """
    uri = properties.get("uri")
    if isinstance(uri, str) and uri.startswith("sqlite:///") and not uri[len("sqlite:///"):].startswith(("/", ":")):
        properties["uri"] = "sqlite:///" + os.path.abspath(uri[len("sqlite:///"):])
    warehouse = properties.get("warehouse")
    if isinstance(warehouse, str) and warehouse.startswith("file://") and not warehouse[7:].startswith("/"):
        properties["warehouse"] = "file://" + os.path.abspath(warehouse[7:])
    elif isinstance(warehouse, str) and "://" not in warehouse:
        properties["warehouse"] = "file://" + os.path.abspath(warehouse)
    return properties


def _same(stream_type: pa.DataType, table_type: pa.DataType) -> bool:
    def normal(data_type):
        if pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
            return pa.string()
        if pa.types.is_large_binary(data_type):
            return pa.binary()
        return data_type
    return normal(stream_type).equals(normal(table_type))
