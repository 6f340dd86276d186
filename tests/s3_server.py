"""An S3-protocol server for the tests: moto's server (``moto_server``, from the ``test`` extra), started by the session.

Executors learn where it is as a user's executors would: from botocore's standard environment variables. The session
sets them at its start (:func:`configure_environment`, called from ``pytest_configure``), before any SparkSession
starts, so the Spark JVM and every Python worker it forks inherit them: ``AWS_ENDPOINT_URL`` (the server, on a port
reserved then), dummy ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, and ``AWS_EC2_METADATA_DISABLED`` (a test
without credentials must not wait for an EC2 metadata service). The server itself starts when a test first asks for
the ``s3_server`` fixture. moto keeps objects in memory and, unless told otherwise (:meth:`S3Server.authentication`),
accepts any credentials.

With ``CHANDY_TEST_S3=http://host:port`` the same tests run against that server instead (MinIO, a real S3 endpoint),
nothing is started, and credentials already in the environment are kept.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

__all__ = ["S3Server", "start_server", "configure_environment", "EXTERNAL_ENV"]

EXTERNAL_ENV = "CHANDY_TEST_S3"
START_TIMEOUT_S = 30
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "chandy-test", "AWS_SECRET_ACCESS_KEY": "chandy-test-secret"}
_reserved_endpoint: str | None = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def configure_environment() -> str:
    """Point this process (and what it starts later) at the session's S3 server; returns its endpoint URL."""
    global _reserved_endpoint
    external = os.environ.get(EXTERNAL_ENV)
    if external:
        _reserved_endpoint = external.rstrip("/")
        for name, value in DUMMY_CREDENTIALS.items():
            os.environ.setdefault(name, value)
    else:
        _reserved_endpoint = f"http://127.0.0.1:{_free_port()}"
        os.environ.update(DUMMY_CREDENTIALS)
    os.environ["AWS_ENDPOINT_URL"] = _reserved_endpoint
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    return _reserved_endpoint


class S3Server:
    """A running S3-protocol server at ``endpoint_url``. ``process`` is None for a server that is not ours."""

    def __init__(self, endpoint_url: str, process: subprocess.Popen | None, log_path: str | None):
        self.endpoint_url = endpoint_url
        self.process = process
        self.log_path = log_path

    @property
    def is_moto(self) -> bool:
        return self.process is not None

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1")

    def bucket(self, prefix: str = "chandy") -> str:
        """A new, empty bucket, unique to the caller: its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}".lower()
        self.client().create_bucket(Bucket=name)
        return name

    def filesystem(self, **options):
        """An s3fs filesystem on this server (its own instance: no cache shared with the code under test)."""
        import s3fs

        return s3fs.S3FileSystem(**{"endpoint_url": self.endpoint_url, "skip_instance_cache": True,
                                    "use_listings_cache": False, **options})

    @contextlib.contextmanager
    def authentication(self):
        """While inside: the server checks credentials, and knows none (so every request is refused as a wrong key
        would be). moto only; another server checks credentials anyway."""
        if not self.is_moto:
            yield
            return
        self._set_auth_free_requests("0")
        try:
            yield
        finally:
            self._set_auth_free_requests("inf")

    def _set_auth_free_requests(self, count: str) -> None:
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset-auth", data=count.encode(), method="POST",
                                         headers={"Content-Type": "text/plain"})  # a form would hide the body
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def start_server() -> S3Server:
    """The server :func:`configure_environment` pointed the session at: started here (moto), or the one
    ``CHANDY_TEST_S3`` names."""
    endpoint = _reserved_endpoint or configure_environment()
    if os.environ.get(EXTERNAL_ENV):
        server = S3Server(endpoint, None, None)
        _wait_until_ready(server)
        return server
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.access(moto, os.X_OK):
        raise RuntimeError(f"The S3 tests need moto's server ({moto}), which the test extra installs: pip install -e "
                           f"'.[test]' (or 'moto[server]'); or run them against a server of your own: "
                           f"{EXTERNAL_ENV}=http://host:port.")
    port = int(endpoint.rsplit(":", 1)[1])
    log_path = os.path.join(tempfile.mkdtemp(prefix="chandy-moto-"), "moto.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    server = S3Server(endpoint, process, log_path)
    try:
        _wait_until_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_ready(server: S3Server) -> None:
    """Until the server answers HTTP (any status: an S3 error is an answer), or a clear error by the deadline."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{server.endpoint_url}/", timeout=2) as response:
                response.read()
            return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError, socket.timeout) as exc:
            if server.process is not None and server.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with status {server.process.returncode} before it listened "
                                   f"on {server.endpoint_url}: {_tail(server.log_path)}") from exc
            if time.monotonic() > deadline:
                raise RuntimeError(f"The S3 server at {server.endpoint_url} did not answer within {START_TIMEOUT_S} "
                                   f"s ({exc}). {_tail(server.log_path)}") from exc
            time.sleep(0.05)


def _tail(path: str | None) -> str:
    if path is None or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return f.read()[-2000:].decode(errors="replace")
