"""Looking up a running job's queryable state from Python: the REST API's ``/jobs/<id>/state`` behind one call.

Flink's ``QueryableStateClient`` in our words. A function marks a keyed state queryable with
``descriptor.set_queryable(name)``; while the job runs, ``get(name, key)`` returns that state's value for the key
(None when the key has none), read by the subtask that owns the key between two batches: consistent for that
key, not a snapshot of the whole state. Values arrive as JSON (tuples as lists, dict keys that JSON cannot name as
``[key, value]`` pairs): the client never unpickles anything.

While the job starts or restarts, the REST API answers 503 (ask again); the client asks again, waiting a little
longer each time, for up to ``retry_for_s`` seconds, then raises :class:`QueryableStateError` with the status.
Every other refusal (an unknown state: 404, a bad key: 400, a job that has ended: 410) is raised at once.

Each thread of a client keeps its connection to the server open between lookups (a lookup is then one request
and its answer, without a new TCP or TLS handshake), and ``last_timings`` tells where its thread's last lookup's
time went (the server's ``Server-Timing`` header, in milliseconds): ``driver`` (from the driver's reading the
request to its answer), ``slot`` (from sending the query to the slot to its answer), ``subtask-wait`` (in the slot,
until the subtask took it up between two batches) and ``state-read``.

>>> client = QueryableStateClient("http://127.0.0.1:9/#/jobs/ab12cd34")
>>> client.get("counts", 42)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.QueryableStateError: No Chandy dashboard answers at http://127.0.0.1:9 (...): ...
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from typing import Any

from runtime.errors import JobControlError, QueryableStateError
from runtime.protocol.server_timing import parse_server_timing
from runtime.tools.rest_commands import (_job_id, _not_json, _refusal, _unreachable, parse_url, published_job,
                                         token_of)

__all__ = ["QueryableStateClient", "RETRY_FOR_S"]

RETRY_FOR_S = 30.0  # a restart restores state and starts slots in seconds; a job down longer is worth an error
FIRST_PAUSE_S, LONGEST_PAUSE_S = 0.05, 1.0


class QueryableStateClient:
    """Lookups of the queryable state of the job at ``url``: the dashboard's address as the driver's log prints it
    (``http://host:8081/?token=...#/jobs/<id>``; without a job id, the only job running there). ``token``: the
    server's, when the URL does not carry it (lookups need it whenever actions do). ``retry_for_s``: how long a
    lookup asks again while the job starts or restarts (0: never)."""

    def __init__(self, url: str, token: str | None = None, context: ssl.SSLContext | None = None,
                 retry_for_s: float = RETRY_FOR_S):
        self.url = url
        self.base, self._job = parse_url(url)
        self.token = token or token_of(url)
        self.context = context
        self.retry_for_s = retry_for_s
        self._threads = threading.local()  # each thread's kept connection and its last lookup's timings

    @classmethod
    def for_job_directory(cls, directory: str) -> "QueryableStateClient":
        """The client of the job that runs with checkpoint directory ``directory`` (its ``_job.json`` says where its
        REST API listens, with the token and, in HTTPS, the certificate to trust)."""
        job = published_job(directory)
        client = cls(f"{job.url}/#/jobs/{job.job_id}", job.token, job.context)
        return client

    @property
    def job_id(self) -> str:
        if self._job is None:
            self.base, self._job = self._wrapped(lambda: _job_id(self.url))
        return self._job

    def states(self) -> dict[str, dict]:
        """The job's queryable states: name -> ``{"operator": uid, "state": its name, "kind": "value" | ...}``."""
        return self._get(f"/jobs/{self.job_id}/state")["states"]

    def get(self, name: str, key: Any) -> Any:
        """The value of queryable state ``name`` for ``key`` (as ``key_by`` returns it), or None."""
        query = urllib.parse.urlencode({"key": json.dumps(key)})
        return self._get(f"/jobs/{self.job_id}/state/{urllib.parse.quote(name, safe='')}?{query}")["value"]

    @property
    def last_timings(self) -> dict[str, float]:
        """Where this thread's last answered request spent its time, as the server reported it (milliseconds)."""
        return dict(getattr(self._threads, "timings", {}))

    def close(self) -> None:
        """Close this thread's connection (the next lookup opens one again)."""
        connection = getattr(self._threads, "connection", None)
        self._threads.connection = None
        if connection is not None:
            connection.close()

    def _get(self, path: str) -> dict:
        deadline = time.monotonic() + self.retry_for_s
        pause = FIRST_PAUSE_S
        while True:
            try:
                return self._wrapped(lambda: self._request(path))
            except QueryableStateError as exc:
                if exc.status != 503 or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE_S)

    def _request(self, path: str) -> dict:
        """GET ``path`` on this thread's kept connection: its JSON answer, or the JobControlError the REST commands
        raise for the same answer. A kept connection the server has closed since is opened again once (a GET can be
        asked twice)."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        target = urllib.parse.urlsplit(self.base).path.rstrip("/") + path  # a server behind a path prefix
        connection = getattr(self._threads, "connection", None)
        for fresh in (connection is None, True):
            if connection is None:
                connection = self._connect()
            try:
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
                body = response.read()
                break
            except (http.client.HTTPException, OSError) as exc:
                connection.close()
                connection = None
                if fresh:
                    self._threads.connection = None
                    raise _unreachable(self.base, exc, self.context) from None
        self._threads.connection = None if response.will_close else connection
        if response.will_close:
            connection.close()
        self._threads.timings = parse_server_timing(response.getheader("Server-Timing"))
        if response.status >= 400:
            raise _refusal(self.base, path, "GET", response.status, body, response.reason)
        try:
            return json.loads(body or b"{}")
        except ValueError:
            raise _not_json(self.base, path) from None

    def _connect(self) -> http.client.HTTPConnection:
        parts = urllib.parse.urlsplit(self.base)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=30,
                                               context=self.context or ssl.create_default_context())
        return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=30)

    @staticmethod
    def _wrapped(call):
        try:
            return call()
        except JobControlError as exc:
            raise QueryableStateError(str(exc), exc.status) from None
