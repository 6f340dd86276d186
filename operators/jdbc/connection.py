"""Where a JDBC sink connects: a ``jdbc:postgresql://`` URL read into libpq's settings, and connecting with errors that
name the server and the fix.

PgJDBC's URL forms are understood (``jdbc:postgresql://host:port/database?key=value&...``, several ``host:port``
pairs, ``[::1]``, ``jdbc:postgresql:database``), and so are libpq's own URIs (``postgresql://user@host/database``).
The URL's parameters that libpq has under another name are translated (``ApplicationName``, ``connectTimeout``,
``currentSchema`` ...); PgJDBC's tuning parameters, which mean nothing to libpq (``reWriteBatchedInserts``,
``prepareThreshold`` ...), are accepted and ignored; any other parameter is refused, naming the ones understood.
A URL of another database is refused too, naming what is supported.

>>> settings = PostgresConnectionSettings.from_url("jdbc:postgresql://db.example.com:6432/shop?ApplicationName=etl",
...                                                user="writer", password="secret")
>>> settings.describe()
'postgresql://db.example.com:6432/shop'
>>> settings.connect_arguments()["application_name"], "secret" in repr(settings)
('etl', False)
>>> PostgresConnectionSettings.from_url("jdbc:mysql://localhost:3306/shop")
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: JdbcSink: jdbc:mysql://localhost:3306/shop is a MySQL URL, and Chandy's JDBC
connector writes to PostgreSQL only ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from runtime.errors import ConfigurationError

__all__ = ["PostgresConnectionSettings", "SUPPORTED_URL", "DEFAULT_PORT", "connect"]

SUPPORTED_URL = "jdbc:postgresql://host:port/database"
DEFAULT_PORT = 5432
DEFAULT_CONNECT_TIMEOUT_S = 60  # Flink's JdbcConnectionOptions.connectionCheckTimeoutSeconds
_DRIVER_PACKAGE = "org.postgresql."  # PgJDBC's classes: org.postgresql.Driver, org.postgresql.xa.PGXADataSource

# The JDBC URL's subprotocol -> the database it names, for a clear refusal.
_OTHER_DATABASES = {
    "mysql": "MySQL", "mariadb": "MariaDB", "oracle": "Oracle", "sqlserver": "SQL Server", "jtds": "SQL Server",
    "db2": "Db2", "derby": "Derby", "h2": "H2", "sqlite": "SQLite", "hsqldb": "HSQLDB", "clickhouse": "ClickHouse",
    "trino": "Trino", "presto": "Presto", "snowflake": "Snowflake", "redshift": "Redshift", "vertica": "Vertica",
    "cockroach": "CockroachDB", "sap": "SAP HANA", "informix-sqli": "Informix", "teradata": "Teradata",
    "crate": "CrateDB", "dm": "Dameng", "oceanbase": "OceanBase",
}

# PgJDBC's URL parameters -> libpq's keywords (the value unchanged).
_RENAMED = {"user": "user", "password": "password", "sslmode": "sslmode", "sslcert": "sslcert", "sslkey": "sslkey",
            "sslrootcert": "sslrootcert", "sslpassword": "sslpassword", "ApplicationName": "application_name",
            "application_name": "application_name", "connectTimeout": "connect_timeout",
            "loginTimeout": "connect_timeout", "connect_timeout": "connect_timeout", "options": "options",
            "targetServerType": "target_session_attrs", "target_session_attrs": "target_session_attrs",
            "gssEncMode": "gssencmode", "channelBinding": "channel_binding", "channel_binding": "channel_binding",
            "sslnegotiation": "sslnegotiation", "keepalives": "keepalives"}
# PgJDBC's driver tuning, which libpq has no use for: accepted, so that a URL written for Java works unchanged.
_IGNORED = {"reWriteBatchedInserts", "prepareThreshold", "preparedStatementCacheQueries",
            "preparedStatementCacheSizeMiB", "defaultRowFetchSize", "binaryTransfer", "binaryTransferEnable",
            "binaryTransferDisable", "stringtype", "loggerLevel", "loggerFile", "socketTimeout", "cancelSignalTimeout",
            "assumeMinServerVersion", "sendBufferSize", "receiveBufferSize", "logUnclosedConnections",
            "disableColumnSanitiser", "unknownLength", "readOnly", "readOnlyMode", "autosave", "cleanupSavepoints",
            "hostRecheckSeconds", "loadBalanceHosts", "tcpNoDelay", "socketFactory", "sslfactory",
            "sslhostnameverifier",
            "quoteReturningIdentifiers", "escapeSyntaxCallMode", "preferQueryMode", "logServerErrorDetail",
            "maxResultBuffer", "adaptiveFetch", "adaptiveFetchMinimum", "adaptiveFetchMaximum",
            "groupStartupParameters",
            "xmlFactoryFactory", "jaasApplicationName", "jaasLogin", "kerberosServerName", "gsslib", "sspiServiceClass",
            "useSpnego", "allowEncodingChanges", "databaseMetadataCacheFields", "databaseMetadataCacheFieldsMiB"}
_TARGET_SERVER_TYPES = {"any": "any", "primary": "read-write", "master": "read-write", "secondary": "standby",
                        "slave": "standby", "preferSecondary": "prefer-standby", "preferslave": "prefer-standby",
                        "prefer-standby": "prefer-standby", "read-write": "read-write", "read-only": "read-only",
                        "standby": "standby", "primary-or-standby": "any"}
_SUBPROTOCOL = re.compile(r"jdbc:(?P<name>[A-Za-z0-9_.-]+):")


@dataclass(frozen=True)
class PostgresConnectionSettings:
    """A PostgreSQL server and who logs in: what a sink passes to libpq (through psycopg) in every process.

    ``hosts`` and ``ports`` are comma-separated lists of the same length (libpq tries them in turn); ``parameters``
    are further libpq keywords (``sslmode``, ``application_name`` ...). The password never shows in ``repr``.
    """

    hosts: str
    ports: str
    database: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    parameters: tuple[tuple[str, str], ...] = ()
    connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S

    @classmethod
    def from_url(cls, url: str, user: str | None = None, password: str | None = None, driver_name: str | None = None,
                 connect_timeout_s: int | None = None, subject: str = "JdbcSink") -> PostgresConnectionSettings:
        """The settings of a ``jdbc:postgresql:`` URL (or a ``postgresql://`` URI); ``user`` and ``password`` win
        over the URL's own.

        >>> s = PostgresConnectionSettings.from_url("jdbc:postgresql://[::1],replica:5433/orders?currentSchema=sales")
        >>> s.hosts, s.ports, s.database, dict(s.parameters)["options"]
        ('::1,replica', '5432,5433', 'orders', '-c search_path=sales')
        >>> PostgresConnectionSettings.from_url("jdbc:postgresql:orders").describe()
        'postgresql://localhost:5432/orders'
        """
        if not isinstance(url, str) or not url.strip():
            raise ConfigurationError(f"{subject}: no database URL: set one with with_url('{SUPPORTED_URL}').")
        url = url.strip()
        _check_driver(driver_name, subject)
        lowered = url.lower()
        if lowered.startswith("jdbc:postgresql:"):
            rest = url[len("jdbc:postgresql:"):]
        elif lowered.startswith(("postgresql://", "postgres://")):
            rest = url.split(":", 1)[1]
        else:
            raise ConfigurationError(_unsupported_url(url, subject))
        hosts, ports, database, url_user, url_password, query = _split(rest, url, subject)
        parameters = _parameters(query, url, subject)
        timeout = parameters.pop("connect_timeout", None)
        if connect_timeout_s is not None:
            timeout = connect_timeout_s
        timeout = _seconds(timeout, subject)
        url_user = parameters.pop("user", None) or url_user
        url_password = parameters.pop("password", None) or url_password
        return cls(hosts, ports, database, user or url_user, password if password is not None else url_password,
                   tuple(sorted(parameters.items())), timeout)

    def describe(self) -> str:
        """Where it connects, for messages: ``postgresql://host:port/database`` (no user, no password)."""
        pairs = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}"
                         for h, p in zip(self.hosts.split(","), self.ports.split(",")))
        return f"postgresql://{pairs}/{self.database}"

    def connect_arguments(self) -> dict:
        """The keyword arguments of ``psycopg.connect``."""
        arguments = {"host": self.hosts, "port": self.ports, "dbname": self.database,
                     "connect_timeout": self.connect_timeout_s, "application_name": "chandy"}
        if self.user:
            arguments["user"] = self.user
        if self.password is not None:
            arguments["password"] = self.password
        arguments.update(self.parameters)
        return arguments


def connect(settings: PostgresConnectionSettings, subject: str, autocommit: bool = False):
    """A new connection, or the error that says why not (the server, libpq's reason, the fix)."""
    import psycopg

    from operators.jdbc.errors import connection_error

    try:
        return psycopg.connect(autocommit=autocommit, **settings.connect_arguments())
    except psycopg.Error as exc:
        raise connection_error(settings, exc, subject) from None


def _check_driver(driver_name: str | None, subject: str) -> None:
    if driver_name and not driver_name.startswith(_DRIVER_PACKAGE):
        raise ConfigurationError(
            f"{subject}: with_driver_name({driver_name!r}) names another database's JDBC driver. Chandy's JDBC "
            f"connector writes to PostgreSQL only, on psycopg (no JDBC driver is loaded): leave the driver name out, "
            "or give 'org.postgresql.Driver'.")


def _unsupported_url(url: str, subject: str) -> str:
    match = _SUBPROTOCOL.match(url)
    other = _OTHER_DATABASES.get(match.group("name").lower()) if match else None
    instead = ("Write to another database with a sink of your own on its Python client: operators.IdempotentSink for "
               "upserts by key, or operators.TwoPhaseCommitSink where it has prepared transactions, and "
               "stream.sink_to(sink).")
    shown = _redacted(url)
    if other is not None:
        return (f"{subject}: {shown} is a{'n' if other[0] in 'AEIOU' else ''} {other} URL, and Chandy's JDBC "
                f"connector writes to PostgreSQL only ({SUPPORTED_URL}, on psycopg). {instead}")
    if match:
        return (f"{subject}: {shown} is a JDBC URL for '{match.group('name')}', and Chandy's JDBC connector writes "
                f"to PostgreSQL only ({SUPPORTED_URL}, on psycopg). {instead}")
    return (f"{subject}: {shown} is not a JDBC URL: give a PostgreSQL one, {SUPPORTED_URL} (optionally "
            "?key=value&... parameters).")


def _redacted(url: str) -> str:
    url = re.sub(r"(?i)(password=)[^&;]*", r"\1***", url)
    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)


def _split(rest: str, url: str, subject: str):
    """``(hosts, ports, database, user, password, query)`` of the part after ``jdbc:postgresql:``."""
    rest, _, query = rest.partition("?")
    user = password = None
    if rest.startswith("//"):
        authority, slash, database = rest[2:].partition("/")
        if "@" in authority:
            credentials, authority = authority.rsplit("@", 1)
            user, _, password = credentials.partition(":")
            user, password = unquote(user) or None, unquote(password) if password else None
        hosts, ports = [], []
        for pair in [pair for pair in authority.split(",") if pair] or ["localhost"]:
            host, port = _host_port(pair, url, subject)
            hosts.append(host)
            ports.append(port)
    else:  # jdbc:postgresql:database, jdbc:postgresql:/
        database = rest.lstrip("/")
        hosts, ports = ["localhost"], [str(DEFAULT_PORT)]
    database = unquote(database) or (user or "postgres")
    return ",".join(hosts), ",".join(ports), database, user, password, query


def _host_port(pair: str, url: str, subject: str) -> tuple[str, str]:
    if pair.startswith("["):
        host, _, port = pair[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = pair.partition(":")
    port = port or str(DEFAULT_PORT)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{subject}: {_redacted(url)} has the port {port!r}: give a number from 1 to 65535 "
                                 f"({SUPPORTED_URL}).")
    return host or "localhost", port


def _seconds(value, subject: str) -> int:
    if value is None:
        return DEFAULT_CONNECT_TIMEOUT_S
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        seconds = 0
    if seconds <= 0:
        raise ConfigurationError(f"{subject}: the connection timeout must be a whole number of seconds, at least 1, "
                                 f"got {value!r}.")
    return seconds


def _parameters(query: str, url: str, subject: str) -> dict:
    """The URL's parameters as libpq keywords."""
    parameters: dict = {}
    unknown = []
    for key, value in parse_qsl(query.replace(";", "&"), keep_blank_values=True):
        if key in _IGNORED:
            continue
        if key == "ssl":
            if value.lower() in ("", "true"):
                parameters.setdefault("sslmode", "verify-full")  # PgJDBC's ssl=true verifies the server fully
            continue
        if key == "currentSchema":
            parameters["options"] = f"-c search_path={value}"
            continue
        if key == "tcpKeepAlive":
            parameters["keepalives"] = "1" if value.lower() == "true" else "0"
            continue
        name = _RENAMED.get(key)
        if name is None:
            unknown.append(key)
            continue
        parameters[name] = _TARGET_SERVER_TYPES.get(value, value) if name == "target_session_attrs" else value
    if unknown:
        understood = sorted(set(_RENAMED) | {"ssl", "currentSchema", "tcpKeepAlive"})
        raise ConfigurationError(
            f"{subject}: {_redacted(url)} has parameters that neither libpq nor PgJDBC knows: {sorted(unknown)}. "
            f"Understood: {understood}; PgJDBC's tuning parameters (reWriteBatchedInserts, prepareThreshold, ...) are "
            "accepted and ignored.")
    return parameters
