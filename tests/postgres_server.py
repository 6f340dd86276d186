"""A PostgreSQL server for the tests: a private cluster in a temporary directory, started and removed by the session.

The cluster is made with the installed binaries (``initdb``, ``pg_ctl``; Debian's ``postgresql`` package, found with
``pg_config --bindir``, under ``/usr/lib/postgresql/<version>/bin`` or on the ``PATH``), listens on a free port of
127.0.0.1 only, and has what the connectors need: ``wal_level=logical`` with replication slots and WAL senders (change
data capture), ``max_prepared_transactions > 0`` (the exactly-once sink) and a role with a password, checked over TCP
(scram-sha-256). The server refuses to run as root, so when the tests run as root every command runs as the
unprivileged ``postgres`` user (``runuser -u postgres --``), which then owns the directory. Durability is off
(``fsync=off``): a test's data never outlives the session.

With the environment variable ``CHANDY_TEST_POSTGRES=postgresql://user:password@host:port/database`` the same tests
run against that server instead, and nothing is started (it needs ``max_prepared_transactions > 0``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from urllib.parse import unquote, urlsplit

__all__ = ["PostgresServer", "start_server", "EXTERNAL_ENV", "SERVER_SETTINGS"]

EXTERNAL_ENV = "CHANDY_TEST_POSTGRES"
USER = "chandy"
PASSWORD = "chandy-test-password"
DATABASE = "postgres"
SERVER_SETTINGS = {
    "wal_level": "logical",
    "max_prepared_transactions": "20",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "lock_timeout": "10s",  # a test that waits for a lock fails with the server's message instead of hanging
}
START_TIMEOUT_S = 60


class PostgresServer:
    """A running server: where it listens and who may log in. ``data_dir`` is None for a server that is not ours."""

    def __init__(self, host: str, port: int, user: str, password: str, database: str, data_dir: str | None,
                 bin_dir: str | None):
        self.host, self.port = host, port
        self.user, self.password, self.database = user, password, database
        self.data_dir = data_dir
        self.bin_dir = bin_dir

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def conninfo(self) -> str:
        return (f"host={self.host} port={self.port} dbname={self.database} user={self.user} "
                f"password={self.password}")

    def connect(self, autocommit: bool = True):
        import psycopg

        return psycopg.connect(self.conninfo, autocommit=autocommit)

    def query(self, sql, params=None) -> list[tuple]:
        """The rows ``sql`` returns (or ``[]``), on a connection of its own, committed."""
        with self.connect() as connection:
            cursor = connection.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    def table(self, prefix: str, columns: str) -> str:
        """A new table, unique to the caller: ``columns`` as in ``CREATE TABLE name (columns)``."""
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.query(f"CREATE TABLE {name} ({columns})")
        return name

    def prepared_transactions(self, prefix: str = "") -> list[str]:
        """The gids of the transactions prepared on this server (in every database) that start with ``prefix``."""
        rows = self.query("SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s) ORDER BY gid", (prefix,))
        return [gid for (gid,) in rows]

    def restart(self) -> None:
        """Stop the server as a crash would (connections cut, no checkpoint) and start it again."""
        assert self.data_dir is not None, "only a server the tests started can be restarted"
        _run_as_owner([os.path.join(self.bin_dir, "pg_ctl"), "-D", os.path.join(self.data_dir, "data"), "-m",
                       "immediate", "-w", "-t", str(START_TIMEOUT_S), "-l", os.path.join(self.data_dir, "server.log"),
                       "restart"])
        _wait_until_ready(self)

    def stop(self) -> None:
        if self.data_dir is None:
            return
        _run_as_owner([os.path.join(self.bin_dir, "pg_ctl"), "-D", os.path.join(self.data_dir, "data"), "-m",
                       "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _bin_dir() -> str:
    """Where ``initdb`` and ``pg_ctl`` are, or a clear error saying how to install them."""
    candidates = []
    try:
        candidates.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                         check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(os.path.dirname(os.path.realpath(on_path)))
    for candidate in candidates:
        if all(os.access(os.path.join(candidate, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return candidate
    raise RuntimeError("The PostgreSQL tests need the PostgreSQL server binaries (initdb, pg_ctl, postgres), and "
                       "none were found (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH). Install them "
                       "(apt-get install postgresql, as .ci/run does), or run the tests against a server of your "
                       f"own: {EXTERNAL_ENV}=postgresql://user:password@host:port/database.")


def _version(path: str) -> float:
    try:
        return float(path.split("/")[-2])
    except ValueError:
        return 0.0


def _as_root() -> bool:
    return os.geteuid() == 0


def _run_as_owner(command: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """``command`` as the ``postgres`` user when we are root (the server refuses root), else as ourselves."""
    if _as_root():
        command = ["runuser", "-u", "postgres", "--", *command]
    out = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S, **kwargs)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out


def _external(dsn: str) -> PostgresServer:
    parts = urlsplit(dsn)
    return PostgresServer(parts.hostname or "localhost", parts.port or 5432, unquote(parts.username or ""),
                          unquote(parts.password or ""), parts.path.lstrip("/") or DATABASE, None, None)


def start_server(settings: dict | None = None, external: bool = True) -> PostgresServer:
    """A running server, with :data:`SERVER_SETTINGS` updated by ``settings``. ``external``: use the server that
    ``CHANDY_TEST_POSTGRES`` names, when it names one."""
    dsn = os.environ.get(EXTERNAL_ENV)
    if external and dsn:
        return _external(dsn)
    bin_dir = _bin_dir()
    root = tempfile.mkdtemp(prefix="chandy-postgres-")
    data, socket_dir = os.path.join(root, "data"), os.path.join(root, "socket")
    os.mkdir(socket_dir)
    password_file = os.path.join(root, "password")
    with open(password_file, "w") as f:
        f.write(PASSWORD)
    if _as_root():
        owner = pwd.getpwnam("postgres")
        for path in (root, socket_dir, password_file):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    port = _free_port()
    server = PostgresServer("127.0.0.1", port, USER, PASSWORD, DATABASE, root, bin_dir)
    try:
        _run_as_owner([os.path.join(bin_dir, "initdb"), "-D", data, "-U", USER, f"--pwfile={password_file}",
                       "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "-N"])
        options = {**SERVER_SETTINGS, **(settings or {}), "port": str(port), "listen_addresses": "127.0.0.1",
                   "unix_socket_directories": socket_dir}
        flags = " ".join(f"-c {name}={value}" for name, value in options.items())
        _run_as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", os.path.join(root, "server.log"), "-w",
                       "-t", str(START_TIMEOUT_S), "-o", flags, "start"])
        _wait_until_ready(server)
    except BaseException:
        log = os.path.join(root, "server.log")
        tail = open(log).read()[-2000:] if os.path.exists(log) else ""
        server.stop()
        if tail:
            raise RuntimeError(f"The test PostgreSQL server did not start; its log ends:\n{tail}")
        raise
    return server


def _wait_until_ready(server: PostgresServer) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            server.query("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
