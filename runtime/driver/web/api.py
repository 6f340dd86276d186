"""The REST API's answers, as plain JSON values built from a job master (shapes modelled on Flink's REST API).

Nothing here knows HTTP: :mod:`runtime.driver.web.server` routes requests to these functions on worker
threads, and turns :class:`ApiError` into an error status with ``{"errors": [...]}``, as Flink does. Each
function only reads the job (its metrics, checkpoint history and lifecycle take locks of their own, held for
microseconds), except the actions, which hand a request to the job master's or the coordinator's own thread.

>>> jobs_answer([])
{'jobs': []}
>>> try:
...     find_job({}, "ab12")
... except ApiError as error:
...     error.status, error.message
(404, "No job with id 'ab12' is known here (known: none). GET /jobs lists them.")
"""

from __future__ import annotations

import time

from runtime.driver.result import JobStatus

__all__ = ["ApiError", "find_job", "find_vertex", "jobs_answer", "jobs_overview", "job_details", "vertex_details",
           "backpressure", "watermarks", "checkpoints", "checkpoint_details", "checkpoint_config", "exceptions",
           "metrics_history", "TERMINAL"]

TERMINAL = (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)


class ApiError(Exception):
    """An answer that is an error: ``status`` (404, 409, 400 ...) and a message naming the problem and the fix."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers  # extra response headers (WWW-Authenticate with a 401)


def find_job(jobs: dict, job_id: str):
    """The job master whose id is ``job_id`` (or starts with it: the CLI shows 8 characters)."""
    master = jobs.get(job_id)
    if master is None and len(job_id) >= 4:
        matches = [m for jid, m in jobs.items() if jid.startswith(job_id)]
        if len(matches) == 1:
            master = matches[0]
    if master is None:
        known = ", ".join(f"{jid[:8]} ({m.job_name})" for jid, m in jobs.items()) or "none"
        raise ApiError(404, f"No job with id '{job_id}' is known here (known: {known}). GET /jobs lists them.")
    return master


def find_vertex(master, uid: str):
    for node in master.graph.operators:
        if node.uid == uid:
            return node
    known = ", ".join(node.uid for node in master.graph.operators)
    raise ApiError(404, f"Job '{master.job_name}' has no operator with uid '{uid}' (its operators' uids: {known}).")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _state(master) -> str:
    return master.status.name


def _times(master) -> dict:
    start = master.started_ms or _now_ms()
    end = master.ended_ms if master.ended and master.ended_ms else None
    return {"start-time": start, "end-time": end if end is not None else -1,
            "duration": (end if end is not None else _now_ms()) - start}


def jobs_answer(masters: list) -> dict:
    """``GET /jobs``: every job this driver runs or ran (recently), with its status."""
    return {"jobs": [{"id": m.job_id, "status": _state(m)} for m in masters]}


def jobs_overview(masters: list) -> dict:
    """``GET /jobs/overview``: one line per job, what the dashboard's job list shows."""
    jobs = []
    for m in masters:
        read, written = m.metrics.throughput()
        jobs.append({"jid": m.job_id, "name": m.job_name, "state": _state(m), **_times(m),
                     "restarts": m.restarts, "parallelism": m.graph.slots, "operators": len(m.graph.operators),
                     "records-in-per-second": round(read, 1), "records-out-per-second": round(written, 1)})
    return {"jobs": jobs}


def _plan(master) -> dict:
    graph = master.graph
    chain_of = {node.uid: chain.index for chain in graph.chains for node in chain.operators}
    nodes = []
    for chain in graph.chains:
        for node in chain.operators:
            nodes.append({
                "id": node.uid, "description": node.name, "operator": type(node.operator).__name__,
                "parallelism": node.parallelism, "chain": chain.index, "is_source": node.is_source,
                "is_sink": node.is_sink,
                "inputs": [{"id": edge.source.uid, "ship_strategy": edge.partitioner.kind.upper(),
                            "chained": chain_of[edge.source.uid] == chain.index, "side_output": edge.side_tag,
                            "input": edge.input_number} for edge in node.inputs]})
    return {"jid": master.job_id, "name": master.job_name, "nodes": nodes,
            "chains": [{"index": chain.index, "parallelism": chain.parallelism,
                        "operators": [node.uid for node in chain.operators]} for chain in graph.chains]}


def job_details(master) -> dict:
    """``GET /jobs/<id>``: the job, its graph (``plan``) and every operator (``vertices``) with its metrics."""
    now = _now_ms()
    operators = {op.uid: op for op in master.metrics.operators()}
    vertices = []
    for chain in master.graph.chains:
        for node in chain.operators:
            op = operators.get(node.uid)
            vertices.append({"id": node.uid, "name": node.name, "parallelism": node.parallelism,
                             "chain": chain.index, "metrics": op.to_json(now) if op is not None else {}})
    read, written = master.metrics.throughput()
    history = master.lifecycle.history
    offset = (master.started_ms or now) - master._started * 1000 if master._started else 0
    timestamps: dict[str, int] = {}
    for status, at in history:
        timestamps.setdefault(status.name, int(at * 1000 + offset))
    return {"jid": master.job_id, "name": master.job_name, "state": _state(master), **_times(master), "now": now,
            "attempt": int(master.attempt), "restarts": master.restarts, "parallelism": master.graph.slots,
            "max-parallelism": master.graph.max_parallelism, "checkpointing": master.coordinator is not None,
            "timestamps": timestamps, "records-in-per-second": round(read, 1),
            "records-out-per-second": round(written, 1), "vertices": vertices, "plan": _plan(master)}


def vertex_details(master, uid: str) -> dict:
    """``GET /jobs/<id>/vertices/<uid>``: one operator and each of its subtasks."""
    node = find_vertex(master, uid)
    now = _now_ms()
    op = master.metrics.operator(uid)
    return {"id": uid, "name": node.name, "parallelism": node.parallelism, "now": now,
            "metrics": op.to_json(now) if op is not None else {}, "subtasks": op.subtasks if op is not None else []}


def backpressure(master, uid: str) -> dict:
    """``GET /jobs/<id>/vertices/<uid>/backpressure``: Flink's shape. The ratio is the share of time the
    subtask waited for room in its outputs, measured continuously (not sampled)."""
    find_vertex(master, uid)
    op = master.metrics.operator(uid)
    subtasks = op.subtasks if op is not None else []
    return {"status": "ok", "backpressure-level": op.backpressure_level if op is not None else "ok",
            "end-timestamp": _now_ms(),
            "subtasks": [{"subtask": s["subtask"], "backpressure-level": s["backpressure-level"],
                          "ratio": s["backpressure-ratio"], "idleRatio": s["idle-ratio"], "busyRatio": s["busy-ratio"]}
                         for s in subtasks]}


def watermarks(master) -> dict:
    """``GET /jobs/<id>/watermarks``: every operator's current input watermark (the lowest of its subtasks)
    and how far it lags behind the driver's clock."""
    now = _now_ms()
    result = []
    for op in master.metrics.operators():
        result.append({"id": op.uid, "name": op.name, "watermark": op.watermark,
                       "lag-ms": None if op.watermark is None else max(0, now - op.watermark),
                       "subtasks": [{"subtask": s["subtask"], "watermark": s["current-input-watermark"]}
                                    for s in op.subtasks]})
    return {"now": now, "watermarks": result}


def checkpoints(master) -> dict:
    """``GET /jobs/<id>/checkpoints``: counts, summary, latest and history (newest first)."""
    if master.coordinator is None:
        return {"enabled": False, "counts": {"restored": 0, "total": 0, "in_progress": 0, "completed": 0,
                                             "failed": 0},
                "summary": {}, "latest": {"completed": None, "savepoint": None, "failed": None, "restored": None},
                "history": []}
    return {"enabled": True, **master.coordinator.history.summary()}


def checkpoint_details(master, checkpoint_id: str) -> dict:
    """``GET /jobs/<id>/checkpoints/details/<checkpoint id>``: one checkpoint and each subtask's part."""
    if master.coordinator is None:
        raise ApiError(404, f"Job '{master.job_name}' runs without checkpointing.")
    try:
        number = int(checkpoint_id)
    except ValueError:
        raise ApiError(400, f"'{checkpoint_id}' is not a checkpoint id (a number).") from None
    details = master.coordinator.history.details(number)
    if details is None:
        raise ApiError(404, f"Job '{master.job_name}' has no checkpoint {number} in its history (GET "
                            f"/jobs/{master.job_id}/checkpoints lists them).")
    return details


def checkpoint_config(master) -> dict:
    """``GET /jobs/<id>/checkpoints/config``."""
    coordinator = master.coordinator
    if coordinator is None:
        return {"enabled": False, "state_backend": repr(master.graph.state_backend)}
    config = coordinator.config
    mode = config.externalized
    return {"enabled": True, "mode": config.mode.name.lower(), "interval": config.interval_ms,
            "timeout": config.timeout_ms, "min_pause": config.min_pause_ms,
            "max_concurrent": config.max_concurrent, "tolerable_failed_checkpoints": config.tolerable_failures,
            "max_retained": config.retained,
            "externalization": {"enabled": True, "mode": mode.name,
                                "delete_on_cancellation": mode.deletes_when("CANCELED")},
            "unaligned_checkpoints": bool(master.graph.checkpointing and master.graph.checkpointing.unaligned),
            "aligned_checkpoint_timeout": config.aligned_timeout_ms,
            "state_backend": repr(master.graph.state_backend), "checkpoint_storage": coordinator.storage.url,
            "job_directory": coordinator.storage.job_dir,
            "savepoint_directory": config.savepoint_directory}


def exceptions(master) -> dict:
    """``GET /jobs/<id>/exceptions``: what failed each attempt, newest first, with the user's tracebacks, and
    whether the job restarted after it."""
    entries = list(reversed(master.exceptions))
    root = entries[0] if entries else None
    return {"root-exception": root["stacktrace"] if root else None, "timestamp": root["timestamp"] if root else None,
            "restarts": master.restarts, "exceptionHistory": {"entries": entries, "truncated": False}}


def metrics_history(master, since_ms: int = 0) -> dict:
    """The per-second samples of every operator's throughput and back pressure (the dashboard's charts):
    ``{"samples": [{"t": ms, "operators": {uid: [in per s, out per s, back pressure ratio]}}]}``."""
    return {"samples": [{"t": t, "operators": {uid: list(values) for uid, values in ops.items()}}
                        for t, ops in master.metrics.history_since(since_ms)]}
