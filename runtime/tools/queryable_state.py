"""Looking up a running job's queryable state from Python: the REST API's ``/jobs/<id>/state`` behind one call.

Flink's ``QueryableStateClient`` in our words. A function marks a keyed state queryable with
``descriptor.set_queryable(name)``; while the job runs, ``get(name, key)`` returns that state's value for the key
(None when the key has none), read by the subtask that owns the key between two batches: consistent for that
key, not a snapshot of the whole state. Values arrive as JSON (tuples as lists, dict keys that JSON cannot name as
``[key, value]`` pairs): the client never unpickles anything.

While the job starts or restarts, the REST API answers 503 (ask again); the client asks again, waiting a little
longer each time, for up to ``retry_for_s`` seconds, then raises :class:`QueryableStateError` with the status.
Every other refusal (an unknown state: 404, a bad key: 400, a job that has ended: 410) is raised at once.

>>> client = QueryableStateClient("http://127.0.0.1:9/#/jobs/ab12cd34")
>>> client.get("counts", 42)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.QueryableStateError: No Chandy dashboard answers at http://127.0.0.1:9 (...): ...
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.parse
from typing import Any

from runtime.errors import JobControlError, QueryableStateError
from runtime.tools.rest_commands import _call, _job_id, parse_url, published_job, token_of

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

    def _get(self, path: str) -> dict:
        deadline = time.monotonic() + self.retry_for_s
        pause = FIRST_PAUSE_S
        while True:
            try:
                return self._wrapped(lambda: _call(self.base, path, token=self.token, context=self.context))
            except QueryableStateError as exc:
                if exc.status != 503 or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE_S)

    @staticmethod
    def _wrapped(call):
        try:
            return call()
        except JobControlError as exc:
            raise QueryableStateError(str(exc), exc.status) from None
