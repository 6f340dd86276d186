"""Change data capture from PostgreSQL, exactly once: a consistent snapshot of the captured tables, then every
insert, update and delete committed after it, from a logical replication slot (``pgoutput``).

The snapshot and the stream meet without a gap or an overlap: the slot is created with an exported snapshot, which
sees exactly the transactions that committed before the slot's first streamed change. The position is checkpointed
source state: during the snapshot, the table and the last key read; during the stream, the end of the last whole
transaction emitted (and how many changes of the next were). The slot's confirmed position moves only when a
checkpoint completes, so after a failure the slot still holds everything after the checkpoint, and the changes the
checkpoint already covers are skipped: none is lost or repeated. A restore in the middle of the snapshot reads the
rest from a new snapshot and lets :class:`~operators.postgres_cdc.key_ranges.KeyRanges` say which changes each part
already holds.

The source is one subtask (the slot streams in commit order through one connection); what follows it runs at the
job's parallelism. Records carry the commit time as their event time (snapshot rows carry none).

>>> source = PostgresCdcSource(PostgresConnectionSettings("db", "5432", "shop", "cdc"), ["public.orders"], [],
...                            "orders_slot")
>>> source.bounded, source.parallel, source.publication
(False, False, 'orders_slot_publication')
"""

from __future__ import annotations

import enum
import logging
import time
import uuid

from operators.jdbc.connection import PostgresConnectionSettings, connect
from operators.jdbc.errors import connection_error
from operators.postgres_cdc import catalog, pgoutput
from operators.postgres_cdc.changes import Change, ChangeDeserializer, RowDeserializer
from operators.postgres_cdc.decoder import ChangeDecoder
from operators.postgres_cdc.key_ranges import KeyRanges
from operators.postgres_cdc.replication import ReplicationConnection, _ServerError, format_lsn, parse_lsn
from operators.postgres_cdc.snapshot import SnapshotReader
from operators.sources import Source, SourceReader
from runtime.errors import ConfigurationError, ServerUnreachableError

__all__ = ["PostgresCdcSource", "Startup", "SUBJECT"]

log = logging.getLogger(__name__)

SUBJECT = "PostgresSource"
POLL_WAIT_S = 0.02  # a poll with nothing to read waits this long: short, since a checkpoint waits for the poll
SLOT_RELEASE_WAIT_S = 30.0  # a restarted job waits this long for the failed attempt's connection to let go
SNAPSHOT_PAGE_ROWS = 4096
RECONNECT_S = 30.0  # a reader waits this long for a server that launching found (a restart of the server)


class Startup(enum.Enum):
    """Flink CDC's startup modes: ``INITIAL`` the snapshot, then the stream; ``LATEST`` the stream of changes from
    now; ``SNAPSHOT`` the snapshot alone (the source is bounded)."""

    INITIAL = "initial"
    LATEST = "latest-offset"
    SNAPSHOT = "snapshot"


class Phase(enum.Enum):
    SNAPSHOT = "snapshot"
    STREAM = "stream"
    FINISHED = "finished"


class PostgresCdcSource(Source):
    """Captures the tables that ``table_list`` (regular expressions over ``schema.table``) and ``schema_list``
    select, through the replication slot ``slot_name`` and the publication ``publication`` (made, or extended to the
    tables, when it does not cover them). ``deserializer`` turns each :class:`~operators.postgres_cdc.changes.Change`
    into records (Rows with row kinds by default). Built by ``PostgresSource.builder()``
    (:mod:`runtime.datastream.connectors.postgres`)."""

    parallel = False

    def __init__(self, settings: PostgresConnectionSettings, table_list: list[str], schema_list: list[str],
                 slot_name: str, publication: str | None = None, deserializer: ChangeDeserializer | None = None,
                 startup: Startup = Startup.INITIAL, snapshot_page_rows: int = SNAPSHOT_PAGE_ROWS):
        self.settings = settings
        self.table_list = list(table_list)
        self.schema_list = list(schema_list)
        self.slot_name = slot_name
        self.publication = publication or f"{slot_name}_publication"
        self.deserializer = deserializer or RowDeserializer()
        self.startup = startup
        self.snapshot_page_rows = snapshot_page_rows
        self.bounded = startup is Startup.SNAPSHOT

    def connect(self):
        return connect(self.settings, SUBJECT, autocommit=True)

    def replication_connection(self) -> ReplicationConnection:
        try:
            return ReplicationConnection(self.settings.connect_arguments(), self.settings.describe())
        except _ServerError as exc:
            raise connection_error(self.settings, exc, SUBJECT) from None

    def tables(self, connection) -> list[catalog.Table]:
        return catalog.find_tables(connection, self.schema_list, self.table_list, SUBJECT)

    def validate(self) -> None:
        """Driver, before launch: the server decodes logically, the tables are there with primary keys, the
        publication covers them, and no running job holds the slot."""
        if not self.slot_name or not self.slot_name.replace("_", "a").isalnum() or self.slot_name != \
                self.slot_name.lower() or len(self.slot_name) > 50:
            raise ConfigurationError(f"{SUBJECT}: slot_name({self.slot_name!r}): a replication slot's name is lower "
                                     "case letters, digits and underscores, at most 50 characters here.")
        with self.connect() as connection:
            catalog.check_server(connection, SUBJECT, self.settings.describe())
            tables = self.tables(connection)
            if not self.bounded:
                catalog.ensure_publication(connection, self.publication, tables, SUBJECT)
            status = catalog.slot_status(connection, self.slot_name)
            if status is not None and status.plugin != "pgoutput":
                raise ConfigurationError(f"{SUBJECT}: the replication slot {self.slot_name!r} exists with the plugin "
                                         f"{status.plugin!r}; this source decodes with pgoutput. Choose another "
                                         "slot_name(...), or drop that slot.")

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _CdcReader(self)


class _CdcReader(SourceReader):
    def __init__(self, source: PostgresCdcSource):
        self.source = source
        self.deserialize = source.deserializer.deserialize
        self.phase = Phase.SNAPSHOT
        self.restored: dict | None = None
        self.catalog = None  # an ordinary connection: catalog questions, and the types of the values
        self.loaders = None
        self.tables: list[catalog.Table] = []
        self.by_name: dict[str, catalog.Table] = {}
        self.ranges = KeyRanges()
        # snapshot position
        self.table_index = 0
        self.after_key: tuple | None = None
        self.snapshot: SnapshotReader | None = None
        self.snapshot_lsn = 0
        # stream position: changes of transactions that commit before ``lsn`` are emitted; of the transaction
        # that commits at ``partial_commit``, the first ``partial_count`` changes are
        self.start_lsn = 0
        self.lsn = 0
        self.partial_commit: int | None = None
        self.partial_count = 0
        self.stream: ReplicationConnection | None = None
        self.decoder: ChangeDecoder | None = None  # while streaming: the stream's position is the decoder's
        self.pending_confirms: list[tuple[int, int]] = []  # (checkpoint id, stream position) not yet confirmed

    # -- state --------------------------------------------------------------------------------------------

    def snapshot_state(self) -> list:
        if self.decoder is not None:
            self.lsn, self.partial_commit, self.partial_count = self.decoder.position()
        ranges = self.ranges.as_state()
        if self.phase is Phase.SNAPSHOT and self.after_key is not None:
            table = str(self.tables[self.table_index].name)
            ranges.setdefault(table, []).append((self.after_key, self.snapshot_lsn))
        return [{"slot": self.source.slot_name, "phase": self.phase.value, "table_index": self.table_index,
                 "after_key": self.after_key, "ranges": ranges, "start_lsn": self.start_lsn, "lsn": self.lsn,
                 "partial_commit": self.partial_commit, "partial_count": self.partial_count}]

    def restore_state(self, splits: list) -> None:
        if splits:
            (self.restored,) = splits

    def snapshot_taken(self, checkpoint_id: int, splits: list) -> None:
        if self.phase is Phase.STREAM:
            self.pending_confirms.append((checkpoint_id, splits[0]["lsn"]))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        due = [lsn for cid, lsn in self.pending_confirms if cid <= checkpoint_id]
        self.pending_confirms = [(cid, lsn) for cid, lsn in self.pending_confirms if cid > checkpoint_id]
        if due and self.stream is not None:
            self.stream.confirm(max(due))

    # -- opening ------------------------------------------------------------------------------------------

    def open(self, runtime_context) -> None:
        from psycopg.adapt import Transformer

        source = self.source
        self.catalog = self._reconnect()
        self.loaders = Transformer(self.catalog)
        self.tables = source.tables(self.catalog)
        self.by_name = {str(t.name): t for t in self.tables}
        if self.restored is None:
            self._start_fresh()
        else:
            self._resume(self.restored)

    def _reconnect(self):
        """A catalog connection. The job's launch reached the server, so one that does not answer now is likely
        restarting: try again for a while before failing the attempt."""
        deadline = time.monotonic() + RECONNECT_S
        while True:
            try:
                return self.source.connect()
            except ServerUnreachableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _start_fresh(self) -> None:
        source = self.source
        if source.startup is not Startup.SNAPSHOT:
            catalog.ensure_publication(self.catalog, source.publication, self.tables, SUBJECT)
        if source.startup is Startup.SNAPSHOT:
            self._open_snapshot(temporary=True)
            self.phase = Phase.SNAPSHOT
            return
        status = self._wait_until_free()
        if status is not None:
            # launching checked that no job held it: it is a slot of an earlier attempt of this job that never
            # completed a checkpoint, or of a job started afresh; neither has anything this start could use
            log.warning("%s: dropping the replication slot %s left by an earlier start (confirmed up to %s), to take "
                        "a new snapshot", SUBJECT, source.slot_name, status.confirmed_lsn)
            self.catalog.execute("SELECT pg_drop_replication_slot(%s)", (source.slot_name,))
        if source.startup is Startup.LATEST:
            connection = source.replication_connection()
            created = self._create_slot(connection, source.slot_name, temporary=False)
            connection.close()
            self.start_lsn = self.lsn = created.consistent_lsn
            self._open_stream()
            return
        self._open_snapshot(temporary=False)

    def _resume(self, state: dict) -> None:
        source = self.source
        if state["slot"] != source.slot_name:
            raise ConfigurationError(f"{SUBJECT}: the checkpoint read from the replication slot {state['slot']!r}, "
                                     f"and the source now names {source.slot_name!r}: restore with the slot it read "
                                     "from, or start the job afresh (a new snapshot).")
        self.ranges = KeyRanges(state["ranges"])
        self.start_lsn, self.lsn = state["start_lsn"], state["lsn"]
        self.partial_commit, self.partial_count = state["partial_commit"], state["partial_count"]
        self.table_index, self.after_key = state["table_index"], state["after_key"]
        phase = Phase(state["phase"])
        if phase is Phase.FINISHED:
            self.phase = phase
            return
        if source.startup is not Startup.SNAPSHOT:
            status = self._wait_until_free()
            if status is None:
                raise ConfigurationError(
                    f"{SUBJECT}: the replication slot {source.slot_name!r} that the checkpoint reads from is gone "
                    f"from {source.settings.describe()} (dropped?): the changes after the checkpoint are lost to "
                    "this job. Start it afresh (a new snapshot) without restoring.")
            confirmed = _lsn(status.confirmed_lsn)
            if phase is Phase.STREAM and confirmed > self.lsn:
                raise ConfigurationError(
                    f"{SUBJECT}: the replication slot {source.slot_name!r} has moved to {format_lsn(confirmed)}, past "
                    f"the checkpoint's position {format_lsn(self.lsn)} (a later checkpoint of this job completed): "
                    "the changes in between are gone from the slot. Restore from the job's latest checkpoint, or "
                    "start afresh.")
        if phase is Phase.SNAPSHOT:
            # the old snapshot died with the failed connection: the rest comes from a new one (see KeyRanges)
            self._open_snapshot(temporary=True)
        else:
            self._open_stream()

    def _wait_until_free(self) -> catalog.SlotStatus | None:
        deadline = time.monotonic() + SLOT_RELEASE_WAIT_S
        while True:
            status = catalog.slot_status(self.catalog, self.source.slot_name)
            if status is None or status.active_pid is None:
                return status
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"{SUBJECT}: the replication slot {self.source.slot_name!r} is in use by another connection "
                    f"(server process {status.active_pid}), for {SLOT_RELEASE_WAIT_S:.0f} s: another job reads it. "
                    "Give this job a slot_name(...) of its own.")
            time.sleep(0.2)

    def _create_slot(self, connection: ReplicationConnection, name: str, temporary: bool):
        try:
            return connection.create_slot(name, temporary=temporary)
        except _ServerError as exc:
            if exc.sqlstate == "53400":
                raise ConfigurationError(
                    f"{SUBJECT}: PostgreSQL at {self.source.settings.describe()} has no free replication slot "
                    f"({exc}): raise max_replication_slots (and restart the server), or drop unused slots "
                    "(SELECT pg_drop_replication_slot(name) FROM pg_replication_slots WHERE NOT active).") from None
            raise ServerUnreachableError(f"{SUBJECT}: creating the replication slot {name!r} failed: {exc}") from None

    def _open_snapshot(self, temporary: bool) -> None:
        """A slot with an exported snapshot, and a transaction on that snapshot. The permanent slot of a fresh start
        is the one the stream reads later; a restored snapshot is exported by a temporary slot that goes with its
        connection (the stream goes on from the permanent slot)."""
        source = self.source
        connection = source.replication_connection()
        try:
            name = f"{source.slot_name}_{uuid.uuid4().hex[:8]}" if temporary else source.slot_name
            created = self._create_slot(connection, name, temporary=temporary)
            self.snapshot = SnapshotReader(source.connect, created.snapshot)
        finally:
            connection.close()  # the importing transaction keeps the snapshot
        self.snapshot_lsn = created.consistent_lsn
        if not temporary:
            self.start_lsn = self.lsn = created.consistent_lsn
        self.phase = Phase.SNAPSHOT
        log.info("%s: snapshot of %s at %s%s", SUBJECT, ", ".join(map(str, (t.name for t in self.tables))),
                 format_lsn(created.consistent_lsn),
                 "" if self.after_key is None and self.table_index == 0 else
                 f", from table {self.tables[self.table_index].name} after key {self.after_key}")

    def _open_stream(self) -> None:
        source = self.source
        self.stream = source.replication_connection()
        try:
            self.stream.start(source.slot_name, self.lsn, source.publication)
        except _ServerError as exc:
            raise ServerUnreachableError(f"{SUBJECT}: streaming from the replication slot {source.slot_name!r} "
                                         f"failed: {exc}") from None
        self.decoder = ChangeDecoder(self.by_name, self.loaders, self.ranges, self.lsn, self.deserialize,
                                     self.partial_commit, self.partial_count)
        self.phase = Phase.STREAM
        log.info("%s: streaming changes from slot %s at %s", SUBJECT, source.slot_name, format_lsn(self.lsn))

    # -- reading ------------------------------------------------------------------------------------------

    def poll(self, max_records: int) -> list | None:
        if self.phase is Phase.SNAPSHOT:
            return self._poll_snapshot(max_records)
        if self.phase is Phase.STREAM:
            return self._poll_stream(max_records)
        if self.source.bounded:
            return None
        time.sleep(POLL_WAIT_S)
        return []

    def _poll_snapshot(self, max_records: int) -> list:
        from runtime.protocol.records import TimestampedBatch

        table = self.tables[self.table_index]
        limit = max(1, min(max_records, self.source.snapshot_page_rows))
        rows = self.snapshot.page(table, self.after_key, limit)
        records = []
        deserialize = self.source.deserializer.deserialize
        key_positions = [table.columns.index(k.name) for k in table.key]
        for row in rows:
            records.extend(deserialize(Change("r", table.name.schema, table.name.table, None,
                                              dict(zip(table.columns, row)))))
        if rows:
            self.after_key = tuple(rows[-1][i] for i in key_positions)
        if len(rows) < limit:
            self.ranges.close(str(table.name), None, self.snapshot_lsn)
            self.table_index += 1
            self.after_key = None
            if self.table_index == len(self.tables):
                self._snapshot_done()
        return TimestampedBatch.of(records, [None] * len(records)) if records else records

    def _snapshot_done(self) -> None:
        self.snapshot.close()
        self.snapshot = None
        if self.source.startup is Startup.SNAPSHOT:
            self.phase = Phase.FINISHED
            return
        log.info("%s: snapshot read; streaming from %s", SUBJECT, format_lsn(self.lsn))
        self._open_stream()

    def _poll_stream(self, max_records: int) -> list:
        from runtime.protocol.records import TimestampedBatch

        records: list = []
        timestamps: list = []
        decoder = self.decoder
        for start, payload in self.stream.read(max_records, POLL_WAIT_S):
            if payload is None:  # a keepalive
                decoder.on_keepalive(start)
            else:
                decoder.on_message(pgoutput.decode(payload), records, timestamps)
        return TimestampedBatch.of(records, timestamps) if records else records

    def close(self) -> None:
        for part in (self.snapshot, self.stream, self.catalog):
            if part is not None:
                try:
                    part.close()
                except Exception:  # the server is gone: nothing to release
                    log.debug("closing a PostgreSQL connection failed", exc_info=True)
        self.snapshot = self.stream = self.catalog = None

    def metrics(self) -> dict:
        lag = (self.stream.received - self.decoder.lsn) if self.stream is not None else 0
        return {"wal-bytes-behind": max(0, lag)}


def _lsn(text: str | None) -> int:
    return parse_lsn(text) if text else 0

