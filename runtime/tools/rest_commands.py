"""``chandy jobs``, ``chandy status``, ``chandy cancel`` and ``chandy trigger-checkpoint``: the driver's REST API
(:mod:`runtime.driver.web`) from a terminal.

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
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from runtime.errors import JobControlError
from runtime.settings.units import human_bytes, human_count

__all__ = ["parse_url", "token_of", "jobs", "status", "cancel", "trigger_checkpoint", "DEFAULT_URL", "TOKEN_ENV"]

DEFAULT_URL = "http://localhost:8081"
TOKEN_ENV = "CHANDY_UI_TOKEN"
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


def _call(base: str, path: str, method: str = "GET", token: str | None = None) -> dict:
    action = method in ("POST", "PATCH")
    headers = {"Content-Type": "application/json"} if action else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base + path, method=method, data=b"{}" if action else None, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            errors = json.loads(exc.read()).get("errors") or [exc.reason]
        except ValueError:
            errors = [str(exc.reason)]
        hint = (f" For the chandy command: pass the URL with ?token=... as the log prints it, or set {TOKEN_ENV}."
                if exc.code in (401, 403) else "")
        raise JobControlError(f"{method} {base}{path}: {exc.code} {'; '.join(errors)}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise JobControlError(f"No Chandy dashboard answers at {base} ({getattr(exc, 'reason', exc)}): the driver "
                              "is not running, or it listens elsewhere (its log says where: 'Chandy dashboard and "
                              "REST API: ...').") from None
    except ValueError:
        raise JobControlError(f"{base}{path} answered with something other than JSON: is it a Chandy "
                              "dashboard?") from None


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


def trigger_checkpoint(url: str, timeout: float = 600.0) -> str:
    """Trigger a checkpoint and wait for it: its id once it completed."""
    base, job = _job_id(url)
    trigger = _call(base, f"/jobs/{job}/checkpoints", "POST", token=token_of(url))["request-id"]
    deadline = time.monotonic() + timeout
    while True:
        answer = _call(base, f"/jobs/{job}/checkpoints/{trigger}", token=token_of(url))
        if answer["status"]["id"] == "COMPLETED":
            operation = answer["operation"]
            if "failure-cause" in operation:
                raise JobControlError(operation["failure-cause"]["stack-trace"])
            return f"Checkpoint {operation['checkpointId']} of job {job} completed."
        if time.monotonic() > deadline:
            raise JobControlError(f"The checkpoint of job {job} did not complete within {timeout:.0f} s (it may "
                                  "still: GET /jobs/<id>/checkpoints lists it).")
        time.sleep(0.2)
