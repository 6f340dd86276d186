"""The ``chandy`` commands that talk to a running driver, all through its REST API (:mod:`runtime.driver.web`):
``jobs``, ``status``, ``cancel`` and ``trigger-checkpoint`` given the driver's URL, and ``savepoint`` and ``stop``
given the job's directory in the checkpoint storage.

URL is the dashboard's address as the job's log line prints it (``http://host:8081/#/jobs/<id>``), or just
``http://host:8081`` (then the job is the only one running there), or ``host:port``. Actions (``cancel``,
``trigger-checkpoint``) need the server's token (:mod:`runtime.driver.web.access`): in the URL as the driver's log
prints it (``http://host:8081/?token=...``), or in the environment variable ``CHANDY_UI_TOKEN``.

>>> parse_url("http://10.0.0.5:8081/#/jobs/ab12cd")
('http://10.0.0.5:8081', 'ab12cd')
>>> parse_url("10.0.0.5:8082")
('http://10.0.0.5:8082', None)
>>> parse_url("http://10.0.0.5:8081/?token=Xy-1#/jobs/ab12cd"), token_of("http://10.0.0.5:8081/?token=Xy-1")
(('http://10.0.0.5:8081', 'ab12cd'), 'Xy-1')
>>> jobs("http://127.0.0.1:9")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.JobControlError: No Chandy dashboard answers at http://127.0.0.1:9 (...): ...

``savepoint`` and ``stop`` need no URL: a running job with checkpointing publishes the REST server's address, its
token and, in HTTPS, its certificate in ``<job directory>/_job.json`` (whoever can read the job's checkpoints can
control it); the client pins that certificate rather than trusting any CA, and sends the token only to it.

>>> savepoint("memory://rest-commands-doc/orders")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.JobControlError: No job of /rest-commands-doc/orders is running with checkpointing: ...
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from runtime.errors import CheckpointNotFoundError, JobControlError
from runtime.settings.units import human_bytes, human_count
from state_backends.storage import CheckpointStorage

__all__ = ["parse_url", "token_of", "jobs", "status", "cancel", "trigger_checkpoint", "savepoint", "stop",
           "published_job", "PublishedJob", "DEFAULT_URL", "TOKEN_ENV", "DEFAULT_TIMEOUT_S"]

DEFAULT_URL = "http://localhost:8081"
TOKEN_ENV = "CHANDY_UI_TOKEN"
DEFAULT_TIMEOUT_S = 600.0  # how long savepoint, stop and trigger-checkpoint wait for their outcome
POLL_INTERVAL_S = 0.2
_JOB_IN_URL = re.compile(r"^(?P<base>.*?)/(?:\?[^#]*)?(?:#/)?jobs/(?P<job>[0-9a-fA-F]+)")


def parse_url(url: str) -> tuple[str, str | None]:
    """``(the server's base URL, the job id in it or None)``."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    match = _JOB_IN_URL.match(url)
    if match:
        return match.group("base").rstrip("/#"), match.group("job")
    return url.split("#", 1)[0].split("?", 1)[0].rstrip("/"), None


def token_of(url: str) -> str | None:
    """The token in ``url`` (``?token=``), else the environment's ``CHANDY_UI_TOKEN``, else None."""
    query = urllib.parse.urlsplit(url if "://" in url else "http://" + url).query
    return urllib.parse.parse_qs(query).get("token", [None])[0] or os.environ.get(TOKEN_ENV) or None


def _call(base: str, path: str, method: str = "GET", token: str | None = None, body: dict | None = None,
          context: ssl.SSLContext | None = None, refused: str | None = None) -> dict:
    """One request; its JSON answer. ``context``: the TLS context of an HTTPS server whose certificate is pinned;
    ``refused``: what to say when the token is refused (401, 403)."""
    action = method in ("POST", "PATCH")
    headers = {"Content-Type": "application/json"} if action else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body or {}).encode() if action else None
    request = urllib.request.Request(base + path, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            return json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise _refusal(base, path, method, exc.code, exc.read(), str(exc.reason), refused) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _unreachable(base, getattr(exc, "reason", exc), context) from None
    except ValueError:
        raise _not_json(base, path) from None


def _refusal(base: str, path: str, method: str, status: int, body: bytes, reason: str,
             refused: str | None = None) -> JobControlError:
    """The error for an answer with status ``status`` (4xx, 5xx) and the server's JSON ``{"errors": [...]}``."""
    try:
        errors = json.loads(body).get("errors") or [reason]
    except (ValueError, AttributeError):
        errors = [reason]
    if status in (401, 403) and refused is not None:
        return JobControlError(f"{refused} ({status}: {'; '.join(errors)})", status)
    hint = (f" For the chandy command: pass the URL with ?token=... as the log prints it, or set {TOKEN_ENV}."
            if status in (401, 403) else "")
    return JobControlError(f"{method} {base}{path}: {status} {'; '.join(errors)}{hint}", status)


def _unreachable(base: str, reason: object, context: ssl.SSLContext | None) -> JobControlError:
    """The error for a server that could not be reached or whose certificate is not the one trusted."""
    if isinstance(reason, ssl.SSLError):
        pinned = " (the certificate in _job.json)" if context is not None else ""
        return JobControlError(f"{base} does not present the certificate this client trusts{pinned}: "
                               f"{reason}. It is another server than the job's, or another run of the job "
                               "replaced it.")
    return JobControlError(f"No Chandy dashboard answers at {base} ({reason}): the driver "
                           "is not running, or it listens elsewhere (its log says where: 'Chandy dashboard and "
                           "REST API: ...').")


def _not_json(base: str, path: str) -> JobControlError:
    return JobControlError(f"{base}{path} answered with something other than JSON: is it a Chandy dashboard?")


def _job_id(url: str) -> tuple[str, str]:
    base, job = parse_url(url)
    if job is not None:
        return base, job
    listed = _call(base, "/jobs/overview", token=token_of(url))["jobs"]
    running = [j for j in listed if j["state"] not in ("FINISHED", "FAILED", "CANCELED")]
    if len(running) == 1:
        return base, running[0]["jid"]
    if not listed:
        raise JobControlError(f"No job has run at {base}.")
    which = "running" if running else "listed"
    names = ", ".join(f"{j['jid'][:8]} ({j['name']}, {j['state']})" for j in (running or listed))
    raise JobControlError(f"{len(running or listed)} jobs are {which} at {base}: {names}. Name one: "
                          f"{base}/#/jobs/<id>.")


def jobs(url: str = DEFAULT_URL) -> str:
    """One line per job of the driver at ``url``."""
    base, _ = parse_url(url)
    listed = _call(base, "/jobs/overview", token=token_of(url))["jobs"]
    if not listed:
        return f"No job has run at {base}."
    lines = [f"{'ID':8}  {'STATE':10}  {'DURATION':>9}  {'RESTARTS':>8}  {'IN/S':>7}  {'OUT/S':>7}  NAME"]
    for j in listed:
        lines.append(f"{j['jid'][:8]}  {j['state']:10}  {j['duration'] / 1000:8.1f}s  {j['restarts']:>8}  "
                     f"{human_count(j['records-in-per-second']):>7}  {human_count(j['records-out-per-second']):>7}  "
                     f"{j['name']}")
    return "\n".join(lines)


def status(url: str) -> str:
    """The job's state, throughput per operator and its checkpoints."""
    base, job = _job_id(url)
    details = _call(base, f"/jobs/{job}", token=token_of(url))
    checkpoints = _call(base, f"/jobs/{job}/checkpoints", token=token_of(url))
    lines = [f"Job '{details['name']}' ({details['jid']}): {details['state']}, {details['duration'] / 1000:.1f} s, "
             f"attempt {details['attempt']}, {details['restarts']} restarts",
             f"  records in {human_count(details['records-in-per-second'])}/s, out "
             f"{human_count(details['records-out-per-second'])}/s"]
    for vertex in details["vertices"]:
        m = vertex["metrics"]
        if not m:
            continue
        lines.append(f"  {vertex['name']} ({vertex['id']}, p={vertex['parallelism']}): in {m['read-records']} "
                     f"({human_count(m['read-records-per-second'])}/s), out {m['write-records']} "
                     f"({human_count(m['write-records-per-second'])}/s), back pressure {m['backpressure-level']} "
                     f"{m['backpressure-ratio']:.0%}, busy {m['busy-ratio']:.0%}")
    if checkpoints.get("enabled"):
        counts = checkpoints["counts"]
        latest = checkpoints["latest"]["completed"]
        line = f"  checkpoints: {counts['completed']} completed, {counts['failed']} failed, " \
               f"{counts['in_progress']} in progress"
        if latest:
            line += (f"; latest {latest['id']}: {latest['end_to_end_duration']:.0f} ms, "
                     f"{human_bytes(latest['state_size'])}")
        lines.append(line)
    else:
        lines.append("  checkpoints: off")
    return "\n".join(lines)


def cancel(url: str) -> str:
    base, job = _job_id(url)
    _call(base, f"/jobs/{job}?mode=cancel", "PATCH", token=token_of(url))
    return f"Cancelling job {job}."


def trigger_checkpoint(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """Trigger a checkpoint and wait for it: its id once it completed."""
    base, job = _job_id(url)
    trigger = _call(base, f"/jobs/{job}/checkpoints", "POST", token=token_of(url))["request-id"]
    checkpoint_id = _outcome(base, job, "checkpoints", trigger, timeout, f"The checkpoint of job {job}",
                             "GET /jobs/<id>/checkpoints lists it", token=token_of(url))["checkpointId"]
    return f"Checkpoint {checkpoint_id} of job {job} completed."


def _outcome(base: str, job: str, kind: str, trigger: str, timeout: float, what: str, where: str,
             **call) -> dict:
    """Poll ``/jobs/<job>/<kind>/<trigger>`` until the operation completed: its result, or JobControlError with
    the failure's cause, or once ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        answer = _call(base, f"/jobs/{job}/{kind}/{trigger}", **call)
        if answer["status"]["id"] == "COMPLETED":
            operation = answer["operation"]
            if "failure-cause" in operation:
                raise JobControlError(f"{what} failed: {operation['failure-cause']['stack-trace']}")
            return operation
        if time.monotonic() > deadline:
            raise JobControlError(f"{what} did not complete within {timeout:.0f} s (it may still: {where}).")
        time.sleep(POLL_INTERVAL_S)


# -- a job found through its checkpoint storage: chandy savepoint, chandy stop ----------------------------


@dataclass(frozen=True)
class PublishedJob:
    """What a running job's ``_job.json`` says: its id and name, the REST server's base URL, its token, and the
    TLS context that pins the server's certificate (None in plain HTTP)."""

    job_id: str
    job_name: str
    url: str
    token: str
    context: ssl.SSLContext | None

    @property
    def refused(self) -> str:
        return (f"The driver at {self.url} refused the token of job '{self.job_name}' ({self.job_id[:8]}) from "
                "_job.json: another driver answers at that address now, or the file is damaged")


def published_job(directory: str) -> PublishedJob:
    """The job running with job directory ``directory``, as its ``_job.json`` describes it; JobControlError when
    none runs there, or when it withholds its token."""
    storage = CheckpointStorage.for_job_directory(directory if "://" in directory else directory.rstrip("/"))
    try:
        published = storage.read_job_control()
    except CheckpointNotFoundError as exc:
        raise JobControlError(str(exc)) from None
    name, job_id = published.get("job_name", "?"), str(published.get("job_id", "?"))
    if "url" not in published:
        raise JobControlError(f"The _job.json of {storage.job_dir} was written by an older Chandy (it names no "
                              "REST API): use the chandy command of the version the job runs.")
    if "token" not in published:
        raise JobControlError(
            f"Job '{name}' ({job_id[:8]}): its control endpoint {published['url']} is not encrypted as the job asks "
            f"({published.get('unencrypted', 'no token published')}), so _job.json holds no token. Use the REST "
            f"API directly (POST {published['url']}/jobs/{job_id}/savepoints or /stop) with the token from the "
            "driver's log, knowing that it crosses the network unencrypted, or start the job in a driver process "
            "whose first job encrypts.")
    context = None
    if published.get("certificate"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False  # the certificate is pinned: whatever host name it carries, it is the one
        context.verify_mode = ssl.CERT_REQUIRED
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a CA-signed certificate is trusted as itself
        context.load_verify_locations(cadata=published["certificate"])
    return PublishedJob(job_id, name, published["url"], published["token"], context)


def _savepoint_operation(directory: str, action: str, body: dict, timeout: float) -> str:
    job = published_job(directory)
    call = {"token": job.token, "context": job.context, "refused": job.refused}
    trigger = _call(job.url, f"/jobs/{job.job_id}/{action}", "POST", body=body, **call)["request-id"]
    what = f"{'Stopping' if action == 'stop' else 'The savepoint of'} job '{job.job_name}' ({job.job_id[:8]})"
    where = (f"GET {job.url}/jobs/{job.job_id}/savepoints/{trigger} tells, with the token of _job.json; "
             "chandy checkpoints lists the job's checkpoints")
    try:
        return _outcome(job.url, job.job_id, "savepoints", trigger, timeout, what, where, **call)["location"]
    except JobControlError as exc:
        if action == "stop" and str(exc).startswith("No Chandy dashboard answers"):
            under = body.get("targetDirectory") or "the job's savepoint directory"
            raise JobControlError(f"{what}: the driver stopped answering before it said where the savepoint is "
                                  f"(its program may have ended with the job): look under {under} for the newest "
                                  "savepoint-<id>-<hex> directory.") from None
        raise


def _absolute(path: str | None) -> str | None:
    """The driver resolves paths in its own working directory: a relative one is made absolute here."""
    return os.path.abspath(path) if path is not None and "://" not in path else path


def savepoint(directory: str, path: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """Take a savepoint of the job running with job directory ``directory``, under ``path`` (default: the job's
    savepoint directory); its URL once it completed."""
    return _savepoint_operation(directory, "savepoints", {"target-directory": _absolute(path), "cancel-job": False},
                                timeout)


def stop(directory: str, path: str | None = None, drain: bool = False, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """Stop the job running with job directory ``directory`` with a savepoint under ``path`` (``drain``: the input
    ends as if exhausted); the savepoint's URL once the job has ended."""
    return _savepoint_operation(directory, "stop", {"targetDirectory": _absolute(path), "drain": drain}, timeout)
