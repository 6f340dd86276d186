"""Change data capture from PostgreSQL with Flink CDC's builder: ``PostgresSource.builder()``, used with
``env.from_source(source, watermark_strategy, name)``.

Flink CDC is Java; these are its ``PostgresSourceBuilder``'s names in Python's words (``schemaList`` is
``schema_list``, ...), on psycopg and PostgreSQL's own ``pgoutput`` plugin (nothing to install on the server). The
job reads a consistent snapshot of the captured tables, then every insert, update and delete committed after it,
exactly once through failures (see :mod:`operators.postgres_cdc.source`). The server needs ``wal_level = logical``;
the user needs the REPLICATION attribute and SELECT on the tables; each table needs a primary key.

Records are PyFlink ``Row`` s of the table's columns with their row kind (``+I``, ``-U``, ``+U``, ``-D``), or, with
``.deserializer(JsonDebeziumDeserializationSchema())``, Debezium's JSON change events (which name the table). An
update carries its old row (``-U``) when the table's replica identity is FULL (``ALTER TABLE t REPLICA IDENTITY
FULL``); by default it is a lone ``+U``, an upsert by primary key.

>>> source = (PostgresSource.builder().hostname("localhost").port(5432).database("shop")
...           .schema_list("public").table_list("public.orders", "public.refunds")
...           .username("cdc").password("secret").slot_name("shop_orders")
...           .decoding_plugin_name("pgoutput").startup_options(StartupOptions.initial()).build())
>>> source.slot_name, source.publication, source.bounded
('shop_orders', 'shop_orders_publication', False)
>>> PostgresSource.builder().hostname("localhost").database("shop").build()
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: PostgresSource: slot_name(...) is missing: name the replication slot this job \
reads (lower case letters, digits and underscores), one per job.
"""

from __future__ import annotations

from operators.jdbc.connection import DEFAULT_PORT, PostgresConnectionSettings
from operators.postgres_cdc.changes import ChangeDeserializer, JsonDebeziumDeserializationSchema, RowDeserializer
from operators.postgres_cdc.source import PostgresCdcSource, Startup
from runtime.errors import ConfigurationError

__all__ = ["PostgresSource", "StartupOptions", "JsonDebeziumDeserializationSchema", "RowDeserializer"]

_SUBJECT = "PostgresSource"


class StartupOptions:
    """Where the source starts: Flink CDC's ``StartupOptions``.

    >>> StartupOptions.initial(), StartupOptions.latest(), StartupOptions.snapshot()
    (<Startup.INITIAL: 'initial'>, <Startup.LATEST: 'latest-offset'>, <Startup.SNAPSHOT: 'snapshot'>)
    """

    @staticmethod
    def initial() -> Startup:
        """The tables' snapshot, then their changes (the default)."""
        return Startup.INITIAL

    @staticmethod
    def latest() -> Startup:
        """The changes committed from the job's start on, without a snapshot."""
        return Startup.LATEST

    @staticmethod
    def snapshot() -> Startup:
        """The snapshot alone: the source ends when it is read (a bounded job)."""
        return Startup.SNAPSHOT


class PostgresSource(PostgresCdcSource):
    """:class:`~operators.postgres_cdc.source.PostgresCdcSource` with Flink CDC's ``builder()``."""

    @staticmethod
    def builder() -> PostgresSource.Builder:
        return PostgresSource.Builder()

    class Builder:
        """Flink CDC's ``PostgresSourceBuilder`` in Python's words; every setter returns the builder."""

        def __init__(self):
            self._hostname = "localhost"
            self._port = DEFAULT_PORT
            self._database = None
            self._schemas: list[str] = []
            self._tables: list[str] = []
            self._username = None
            self._password = None
            self._slot = None
            self._publication = None
            self._deserializer: ChangeDeserializer | None = None
            self._startup = Startup.INITIAL
            self._connect_timeout_s = None
            self._page_rows = None

        def hostname(self, hostname: str) -> PostgresSource.Builder:
            self._hostname = hostname
            return self

        def port(self, port: int) -> PostgresSource.Builder:
            self._port = port
            return self

        def database(self, database: str) -> PostgresSource.Builder:
            self._database = database
            return self

        def schema_list(self, *schemas: str) -> PostgresSource.Builder:
            """Schemas to capture (regular expressions); none: every schema."""
            self._schemas = list(schemas)
            return self

        def table_list(self, *tables: str) -> PostgresSource.Builder:
            """Tables to capture as ``schema.table`` (regular expressions); none: every table of the schemas."""
            self._tables = list(tables)
            return self

        def username(self, username: str) -> PostgresSource.Builder:
            self._username = username
            return self

        def password(self, password: str) -> PostgresSource.Builder:
            self._password = password
            return self

        def slot_name(self, slot_name: str) -> PostgresSource.Builder:
            """The replication slot this job reads (made at its first start; one per job). It stays when the job
            stops, keeping the server's write-ahead log from the job's position on: drop it when the job is retired
            (``SELECT pg_drop_replication_slot('name')``)."""
            self._slot = slot_name
            return self

        def publication_name(self, publication: str) -> PostgresSource.Builder:
            """The publication the slot streams (default ``<slot_name>_publication``, made for the tables)."""
            self._publication = publication
            return self

        def decoding_plugin_name(self, name: str) -> PostgresSource.Builder:
            """Only ``pgoutput`` (PostgreSQL's own since version 10) is read."""
            if name != "pgoutput":
                raise ConfigurationError(f"{_SUBJECT}: decoding_plugin_name({name!r}): this source decodes "
                                         "PostgreSQL's built-in 'pgoutput' only (no server extension needed).")
            return self

        def deserializer(self, deserializer: ChangeDeserializer) -> PostgresSource.Builder:
            """What turns each change into records: ``RowDeserializer()`` (the default) or
            ``JsonDebeziumDeserializationSchema()``, or your own with ``deserialize(change) -> list``."""
            if not callable(getattr(deserializer, "deserialize", None)):
                raise ConfigurationError(f"{_SUBJECT}: deserializer(...) needs an object with deserialize(change), "
                                         f"got {type(deserializer).__name__}.")
            self._deserializer = deserializer
            return self

        def startup_options(self, startup: Startup) -> PostgresSource.Builder:
            if not isinstance(startup, Startup):
                raise ConfigurationError(f"{_SUBJECT}: startup_options(...) takes StartupOptions.initial(), latest() "
                                         f"or snapshot(), got {startup!r}.")
            self._startup = startup
            return self

        def connect_timeout(self, seconds: int) -> PostgresSource.Builder:
            self._connect_timeout_s = seconds
            return self

        def split_size(self, rows: int) -> PostgresSource.Builder:
            """Rows per snapshot page (Flink CDC's chunk size; default 4096)."""
            if not isinstance(rows, int) or rows < 1:
                raise ConfigurationError(f"{_SUBJECT}: split_size({rows!r}) must be a whole number of rows, >= 1.")
            self._page_rows = rows
            return self

        def build(self) -> PostgresSource:
            if not self._slot:
                raise ConfigurationError(f"{_SUBJECT}: slot_name(...) is missing: name the replication slot this job "
                                         "reads (lower case letters, digits and underscores), one per job.")
            if not self._database:
                raise ConfigurationError(f"{_SUBJECT}: database(...) is missing.")
            url = f"jdbc:postgresql://{self._hostname}:{self._port}/{self._database}"
            settings = PostgresConnectionSettings.from_url(url, user=self._username, password=self._password,
                                                           connect_timeout_s=self._connect_timeout_s,
                                                           subject=_SUBJECT)
            deserializer = self._deserializer
            if isinstance(deserializer, JsonDebeziumDeserializationSchema) and not deserializer.database:
                deserializer = JsonDebeziumDeserializationSchema(self._database)
            source = PostgresSource(settings, self._tables, self._schemas, self._slot, self._publication,
                                    deserializer, self._startup)
            if self._page_rows is not None:
                source.snapshot_page_rows = self._page_rows
            return source
