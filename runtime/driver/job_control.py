"""The driver's job-control endpoint: how ``chandy savepoint``, ``chandy stop`` and ``chandy cancel`` reach a
running job from another process.

While a job with checkpointing runs, its driver listens on a TCP port of the driver's host and publishes
where, with a random token, in ``<job directory>/_job.json`` of the checkpoint storage
(:meth:`~state_backends.storage.CheckpointStorage.publish_job_control`): whoever can read the job's
checkpoints can find and control the job; a request without the token is refused. A request is one line of
JSON, answered by one line of JSON: ``{"token": ..., "action": "status" | "savepoint" | "stop" | "cancel",
"path": ..., "drain": ...}`` -> ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``. Each connection
has its own thread, so a savepoint that takes a minute blocks nobody else, and never the job master.

>>> calls = []
>>> class Master:
...     job_id, job_name, status = "ab12", "orders", "RUNNING"
...     def trigger_savepoint(self, path=None): calls.append(path); return "file:///sp/savepoint-7-1a2b3c"
>>> server = JobControlServer(Master(), "127.0.0.1")
>>> request(server.address, server.token, "savepoint", path="/sp")
{'ok': True, 'path': 'file:///sp/savepoint-7-1a2b3c'}
>>> request(server.address, "wrong", "status")["error"]
'the token does not match this job: read it from the _job.json of the job that runs now'
>>> server.close()
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socket
import socketserver
import threading
from typing import Any

from runtime.errors import ChandyError, JobControlError

__all__ = ["JobControlServer", "request", "MAX_REQUEST_BYTES"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024
ACTIONS = ("status", "savepoint", "stop", "cancel")


class _Handler(socketserver.StreamRequestHandler):
    server: "_Server"
    timeout = 30  # seconds to send the request line: a connection that says nothing holds no thread for long

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES)
        try:
            answer = self.server.control.answer(json.loads(line))
        except ValueError as exc:
            answer = {"ok": False, "error": f"a request is one line of JSON: {exc}"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    control: "JobControlServer"


class JobControlServer:
    """Serves control requests for ``master`` (a :class:`~runtime.driver.job.JobMaster`) on ``host``."""

    def __init__(self, master, host: str):
        self.master = master
        self.token = secrets.token_hex(16)
        self._server = _Server((host, 0), _Handler)
        self._server.control = self
        self.address = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, name="chandy-job-control", daemon=True)
        self._thread.start()

    def describe(self) -> dict[str, Any]:
        """What ``_job.json`` holds."""
        host, port = self.address
        return {"job_id": self.master.job_id, "job_name": self.master.job_name, "host": host, "port": port,
                "token": self.token}

    def answer(self, message: Any) -> dict[str, Any]:
        if not isinstance(message, dict) or not hmac.compare_digest(str(message.get("token", "")), self.token):
            return {"ok": False, "error": "the token does not match this job: read it from the _job.json of the "
                                          "job that runs now"}
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
        self._server.shutdown()
        self._server.server_close()


def request(address: tuple[str, int], token: str, action: str, timeout: float | None = None,
            **arguments) -> dict[str, Any]:
    """Send one request to a job-control endpoint and return its answer. Raises JobControlError when the
    endpoint does not answer."""
    host, port = address
    try:
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.settimeout(timeout)
            sock.sendall(json.dumps({"token": token, "action": action, **arguments}).encode() + b"\n")
            with sock.makefile("rb") as answer:
                reply = answer.readline()
    except OSError as exc:
        raise JobControlError(
            f"The job's driver at {host}:{port} does not answer ({type(exc).__name__}: {exc}): the job is not "
            "running any more, or this machine cannot reach the driver's host.") from exc
    if not reply:
        raise JobControlError(f"The job's driver at {host}:{port} closed the connection without answering.")
    try:
        return json.loads(reply)
    except ValueError:
        raise JobControlError(f"{host}:{port} answered with something other than a Chandy job's JSON: "
                              f"{reply[:100]!r}") from None
