"""The driver's job-control endpoint: how ``chandy savepoint``, ``chandy stop`` and ``chandy cancel`` reach a
running job from another process.

While a job with checkpointing runs, its driver listens on a TCP port of the driver's host and publishes
where, with a random token (and, when the job encrypts, its certificate), in ``<job directory>/_job.json`` of the
checkpoint storage (:meth:`~state_backends.storage.CheckpointStorage.publish_job_control`): whoever can read the
job's checkpoints can find and control the job. A connection first proves that it knows the token, by the
challenge-response every internal connection uses (:mod:`runtime.network.auth`: the token never crosses the
wire), inside TLS when the job encrypts (the client checks the driver's certificate against the one in
``_job.json``); a connection that cannot is refused before a byte of its request is read. Then a request is one
line of JSON, answered by one line of JSON: ``{"action": "status" | "savepoint" | "stop" | "cancel", "path": ...,
"drain": ...}`` -> ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``. Each connection has its own thread,
so a savepoint that takes a minute blocks nobody else, and never the job master.

>>> calls = []
>>> class Master:
...     job_id, job_name, status = "ab12", "orders", "RUNNING"
...     def trigger_savepoint(self, path=None): calls.append(path); return "file:///sp/savepoint-7-1a2b3c"
>>> server = JobControlServer(Master(), "127.0.0.1")
>>> request(server.address, server.token, "savepoint", path="/sp")
{'ok': True, 'path': 'file:///sp/savepoint-7-1a2b3c'}
>>> request(server.address, "wrong", "status")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.JobControlError: The job's driver at 127.0.0.1:... refused the token: read it from the _job.json of the job that runs now (...).
>>> server.close()
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from runtime.errors import AuthenticationError, ChandyError, JobControlError
from runtime.network.acceptor import Acceptor
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsMaterial

__all__ = ["JobControlServer", "request", "MAX_REQUEST_BYTES"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024
ACTIONS = ("status", "savepoint", "stop", "cancel")


REQUEST_TIMEOUT_S = 30.0  # to send the request line once authenticated: a silent client holds no thread for long


class JobControlServer:
    """Serves control requests for ``master`` (a :class:`~runtime.driver.job.JobMaster`) on ``host``; in TLS with
    ``tls`` (clients check the server's certificate; they prove themselves with the token)."""

    def __init__(self, master, host: str, tls: TlsMaterial | None = None):
        self.master = master
        self.token = secrets.token_hex(16)
        self.tls = tls
        security = ConnectionSecurity(self.token.encode(), tls, verify_client_certificate=False)
        self._acceptor = Acceptor(host, self._serve, "chandy-job-control", security, "job-control",
                                  f"the job-control endpoint of job '{master.job_name}'")
        self.address = self._acceptor.address
        self._acceptor.start()

    def _serve(self, stream, peer: str) -> None:
        try:
            stream.settimeout(REQUEST_TIMEOUT_S)
            with stream.makefile("rb") as lines:
                line = lines.readline(MAX_REQUEST_BYTES)
            stream.settimeout(None)
            try:
                answer = self.answer(json.loads(line))
            except ValueError as exc:
                answer = {"ok": False, "error": f"a request is one line of JSON: {exc}"}
            stream.sendall(json.dumps(answer).encode() + b"\n")
        except OSError as exc:
            log.debug("job-control connection from %s ended: %s", peer, exc)
        finally:
            stream.close()

    def describe(self) -> dict[str, Any]:
        """What ``_job.json`` holds."""
        host, port = self.address
        described = {"job_id": self.master.job_id, "job_name": self.master.job_name, "host": host, "port": port,
                     "token": self.token}
        if self.tls is not None:
            described["certificate"] = self.tls.certificate
        return described

    def answer(self, message: Any) -> dict[str, Any]:
        """The answer to one request of a client that proved it knows the token."""
        if not isinstance(message, dict):
            return {"ok": False, "error": "a request is a JSON object"}
        action = message.get("action")
        master = self.master
        try:
            if action == "status":
                return {"ok": True, "job_id": master.job_id, "job_name": master.job_name,
                        "status": getattr(master.status, "value", str(master.status))}
            if action == "savepoint":
                return {"ok": True, "path": master.trigger_savepoint(message.get("path"))}
            if action == "stop":
                return {"ok": True, "path": master.stop_with_savepoint(message.get("path"),
                                                                       bool(message.get("drain", False)))}
            if action == "cancel":
                master.cancel()
                return {"ok": True}
        except ChandyError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # the caller must hear why; the job goes on
            log.exception("job-control request %r failed", action)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": False, "error": f"unknown action {action!r}: one of {', '.join(ACTIONS)}"}

    def close(self) -> None:
        """Take no more requests; one being answered (a stop, which waits for the job's end) still gets its answer."""
        self._acceptor.stop_accepting()


def request(address: tuple[str, int], token: str, action: str, timeout: float | None = None,
            certificate: str | None = None, **arguments) -> dict[str, Any]:
    """Send one request to a job-control endpoint and return its answer; ``certificate``: the job's, from
    ``_job.json``, when the job encrypts. Raises JobControlError when the endpoint does not answer, or does not
    take the token."""
    host, port = address
    tls = TlsMaterial(None, None, certificate) if certificate else None
    try:
        stream = ConnectionSecurity(token.encode(), tls).connect((host, port), "job-control", timeout_s=30)
    except AuthenticationError as exc:
        raise JobControlError(f"The job's driver at {host}:{port} refused the token: read it from the _job.json of "
                              f"the job that runs now ({exc}).") from None
    except OSError as exc:
        raise JobControlError(
            f"The job's driver at {host}:{port} does not answer ({type(exc).__name__}: {exc}): the job is not "
            "running any more, or this machine cannot reach the driver's host.") from exc
    try:
        stream.settimeout(timeout)
        stream.sendall(json.dumps({"action": action, **arguments}).encode() + b"\n")
        with stream.makefile("rb") as answer:
            reply = answer.readline(MAX_REQUEST_BYTES)
    except OSError as exc:
        raise JobControlError(f"The job's driver at {host}:{port} broke the connection ({exc}).") from exc
    finally:
        stream.close()
    if not reply:
        raise JobControlError(f"The job's driver at {host}:{port} closed the connection without answering.")
    try:
        return json.loads(reply)
    except ValueError:
        raise JobControlError(f"{host}:{port} answered with something other than a Chandy job's JSON: "
                              f"{reply[:100]!r}") from None
