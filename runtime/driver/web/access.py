"""Who may do what on the driver's web server: a token guards the actions, and the reads when asked to.

One token per server (one server per driver process): ``spark.chandy.ui.token``, else a random one printed once in
the log's dashboard line, Jupyter-style (``http://host:8081/?token=...``); the dashboard page takes it from there
and sends it with every request. A client sends it as ``Authorization: Bearer <token>`` (what Prometheus' scrape
configuration calls ``authorization: credentials``), as ``X-Chandy-Token``, or as ``?token=``.

- Actions (cancel, stop, savepoints, checkpoints: anything but GET) need it unless the server listens on the
  loopback address only; so do lookups of queryable state (``GET /jobs/<id>/state...``), which read a job's data.
- Reads need it too with ``spark.chandy.ui.requireToken=true``, or when ``spark.acls.enable=true``: Spark's ACLs
  name users, whom Spark identifies with servlet filters (``spark.ui.filters``) that this server does not run, so
  the token stands in for them rather than letting everyone read.
- The page itself and its scripts (``/`` and ``/static/``) hold no job data and stay open, so that a browser can
  load the page that then asks with the token.
- Without the dashboard (``spark.chandy.ui.enabled=false``) the server is the checkpointed jobs' control plane
  alone (:meth:`AccessGuard.for_everything`): every request needs the token, which each job publishes in its
  ``_job.json``.

>>> guard = AccessGuard("s3cret", actions=True, reads=False)
>>> guard.check("GET", "/jobs", None) is None
True
>>> guard.check("POST", "/jobs/ab12/checkpoints", None).status
401
>>> guard.check("POST", "/jobs/ab12/checkpoints", "wrong").status
403
>>> guard.check("POST", "/jobs/ab12/checkpoints", "s3cret") is None
True
>>> guard.check("GET", "/jobs/ab12/state/counts", None).status
401
>>> AccessGuard.for_everything("s3cret").check("GET", "/", None).status
401
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket

__all__ = ["AccessGuard", "is_loopback", "presented_token"]

_STATE_LOOKUP = re.compile(r"^/jobs/[^/]+/state(/|$)")


class AccessRefused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class AccessGuard:
    """``token``; whether actions need it; whether reads need it."""

    def __init__(self, token: str, actions: bool, reads: bool, configured: bool = False, open_page: bool = True):
        self.token = token
        self.actions = actions or reads
        self.reads = reads
        self.configured = configured  # the user chose the token: the log does not print it
        self.open_page = open_page  # the dashboard's page and scripts need no token

    @classmethod
    def for_server(cls, listen_hosts: list[str], token: str | None, require_token: bool) -> "AccessGuard":
        """The guard of a server listening on ``listen_hosts``: actions need the token unless every one is a
        loopback address."""
        return cls(token or secrets.token_urlsafe(24), not all(is_loopback(h) for h in listen_hosts), require_token,
                   configured=bool(token))

    @classmethod
    def for_everything(cls, token: str | None) -> "AccessGuard":
        """The guard of a server without the dashboard: every request needs the token, wherever it listens."""
        return cls(token or secrets.token_urlsafe(24), True, True, configured=bool(token), open_page=False)

    @property
    def needed(self) -> bool:
        return self.actions or self.reads

    def url_query(self) -> str:
        """What to append to the server's URL in the log line: the token for a browser, or where it is set."""
        if not self.needed:
            return ""
        if self.configured:
            return "?token=<spark.chandy.ui.token>"
        # Without the dashboard nobody opens the address in a browser: the token stays in the jobs' _job.json.
        return f"?token={self.token}" if self.open_page else "?token=<the token in a job's _job.json>"

    def check(self, method: str, path: str, presented: str | None) -> AccessRefused | None:
        """None when the request may go ahead, else why not (401: no token; 403: a wrong one)."""
        # A lookup of queryable state reads a job's data, key by key: guarded as an action is.
        action = method not in ("GET", "HEAD", "OPTIONS") or _STATE_LOOKUP.match(path) is not None
        if self.open_page and (path == "/" or path.startswith("/static/")):
            return None
        if not (self.actions if action else self.reads):
            return None
        what = f"{method} {path}"
        if not presented:
            return AccessRefused(401, f"{what} needs the dashboard's token: the driver's log prints it once, in the "
                                      "line 'Chandy dashboard and REST API: http://...?token=...' (or it is "
                                      "spark.chandy.ui.token), and a job with checkpointing publishes it in its "
                                      "job directory's _job.json. Send it as 'Authorization: Bearer <token>' or "
                                      "?token=<token>.")
        if not self.accepts(presented):
            return AccessRefused(403, f"{what}: the token does not match this driver's (the log line 'Chandy "
                                      "dashboard and REST API: ...' of the driver that runs now has it, and the "
                                      "_job.json of a job it runs).")
        return None

    def accepts(self, presented: str | None) -> bool:
        """Whether ``presented`` is the token (compared in constant time)."""
        return bool(presented) and hmac.compare_digest(presented.encode(), self.token.encode())


def presented_token(headers, query) -> str | None:
    """The token a request carries: ``Authorization: Bearer``, ``X-Chandy-Token`` or ``?token=``."""
    authorization = headers.get("Authorization", "")
    if authorization[:7].lower() == "bearer ":
        return authorization[7:].strip()
    return headers.get("X-Chandy-Token") or query.get("token") or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) only ever means this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("192.0.2.7")
    (True, True, False, False)
    """
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
