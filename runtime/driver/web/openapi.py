"""The REST API's OpenAPI 3 description, served at ``/openapi.json``.

>>> document = openapi_document("0.1.0")
>>> document["openapi"], "/jobs/{job_id}/checkpoints" in document["paths"]
('3.0.3', True)
"""

from __future__ import annotations

__all__ = ["openapi_document", "PATHS"]

_JOB = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"},
        "description": "The job's id (GET /jobs), or its first characters when they are unique"}
_UID = {"name": "uid", "in": "path", "required": True, "schema": {"type": "string"}, "description": "An operator's uid"}
_TRIGGER = {"name": "trigger_id", "in": "path", "required": True, "schema": {"type": "string"},
            "description": "The request-id a POST answered with"}
_ERROR = {"description": "An error: {\"errors\": [message]}",
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _json(description: str, schema: dict | None = None) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": schema or {"type": "object"}}}}


def _get(summary: str, parameters=(), errors=(404,), schema: dict | None = None) -> dict:
    responses = {"200": _json(summary, schema)}
    responses.update({str(code): _ERROR for code in errors})
    return {"get": {"summary": summary, "parameters": list(parameters), "responses": responses}}


_TRIGGERED = _json("Accepted: poll the operation with the request-id",
                   {"type": "object", "properties": {"request-id": {"type": "string"}}, "required": ["request-id"]})
_OPERATION = {"type": "object", "properties": {
    "status": {"type": "object", "properties": {"id": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]}}},
    "operation": {"type": "object"}}, "required": ["status"]}

PATHS: dict[str, dict] = {
    "/jobs": _get("Every job of this driver and its status", errors=(), schema={
        "type": "object", "properties": {"jobs": {"type": "array", "items": {
            "type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}}}}}}),
    "/jobs/overview": _get("One line per job: name, state, times, throughput", errors=()),
    "/overview": _get("How many jobs run, finished, failed, were cancelled", errors=()),
    "/config": _get("The dashboard's settings (refresh interval) and Chandy's version", errors=()),
    "/jobs/{job_id}": {
        **_get("The job: state, times, its graph (plan) and every operator (vertices) with its metrics", [_JOB]),
        "patch": {"summary": "Cancel the job (mode=cancel)", "parameters": [
            _JOB, {"name": "mode", "in": "query", "required": False, "schema": {"type": "string", "enum": ["cancel"]}}],
            "responses": {"202": _json("Cancelling"), "404": _ERROR, "409": _ERROR, "400": _ERROR}}},
    "/jobs/{job_id}/vertices/{uid}": _get("One operator and each of its subtasks", [_JOB, _UID]),
    "/jobs/{job_id}/vertices/{uid}/backpressure": _get("The operator's back pressure, per subtask", [_JOB, _UID]),
    "/jobs/{job_id}/watermarks": _get("Every operator's current input watermark and its lag", [_JOB]),
    "/jobs/{job_id}/exceptions": _get("What failed each attempt (the user's tracebacks) and the restarts", [_JOB]),
    "/jobs/{job_id}/metrics/history": {"get": {
        "summary": "Per-second throughput and back pressure of every operator (the last ten minutes)",
        "parameters": [_JOB, {"name": "since", "in": "query", "required": False, "schema": {"type": "integer"},
                              "description": "Only samples after this time (epoch ms)"}],
        "responses": {"200": _json("Samples"), "404": _ERROR, "400": _ERROR}}},
    "/jobs/{job_id}/checkpoints": {
        **_get("Checkpoint counts, summary, latest ones and history (newest first)", [_JOB]),
        "post": {"summary": "Trigger a checkpoint now", "parameters": [_JOB],
                 "responses": {"202": _TRIGGERED, "404": _ERROR, "409": _ERROR}}},
    "/jobs/{job_id}/checkpoints/config": _get("The job's checkpointing settings", [_JOB]),
    "/jobs/{job_id}/checkpoints/details/{checkpoint_id}": _get(
        "One checkpoint and every subtask's part", [_JOB, {"name": "checkpoint_id", "in": "path", "required": True,
                                                           "schema": {"type": "integer"}}], errors=(404, 400)),
    "/jobs/{job_id}/checkpoints/{trigger_id}": _get("A triggered checkpoint: in progress, or its id or failure",
                                                    [_JOB, _TRIGGER], schema=_OPERATION),
    "/jobs/{job_id}/savepoints": {"post": {
        "summary": "Trigger a savepoint (cancel-job: then stop the job)", "parameters": [_JOB],
        "requestBody": {"required": False, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"target-directory": {"type": "string"},
                                             "cancel-job": {"type": "boolean"}}}}}},
        "responses": {"202": _TRIGGERED, "404": _ERROR, "409": _ERROR, "400": _ERROR}}},
    "/jobs/{job_id}/savepoints/{trigger_id}": _get("A triggered savepoint: in progress, or its location or failure",
                                                   [_JOB, _TRIGGER], schema=_OPERATION),
    "/jobs/{job_id}/stop": {"post": {
        "summary": "Stop the job with a savepoint (drain: end the input first)", "parameters": [_JOB],
        "requestBody": {"required": False, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"targetDirectory": {"type": "string"}, "drain": {"type": "boolean"}}}}}},
        "responses": {"202": _TRIGGERED, "404": _ERROR, "409": _ERROR, "400": _ERROR}}},
    "/jobs/{job_id}/state": _get("The job's queryable states: name -> operator uid, state name and kind",
                                 [_JOB], schema={"type": "object", "properties": {"states": {"type": "object"}}}),
    "/jobs/{job_id}/state/{name}": _get(
        "The value of a queryable state for one key, read by the subtask that owns the key (null: none)",
        [_JOB, {"name": "name", "in": "path", "required": True, "schema": {"type": "string"},
                "description": "The name given to set_queryable()"},
         {"name": "key", "in": "query", "required": True, "schema": {"type": "string"},
          "description": "The key: JSON (42, \"eu\", [1, 2] for a tuple) or plain text"}],
        errors=(400, 404, 409, 410, 500, 503, 504),
        schema={"type": "object", "properties": {"name": {"type": "string"}, "key": {}, "value": {}}}),
    "/metrics": {"get": {"summary": "Prometheus metrics (text exposition format), names prefixed chandy_",
                         "responses": {"200": {"description": "Metrics",
                                               "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/openapi.json": _get("This description", errors=()),
}


def openapi_document(version: str) -> dict:
    return {"openapi": "3.0.3",
            "info": {"title": "Chandy REST API", "version": version,
                     "description": "Watch and control the Chandy jobs of one driver; shapes follow Flink's REST API. "
                                    "Actions need the server's token (printed once in the driver's log, or "
                                    "spark.chandy.ui.token) unless it listens on the loopback address only; reads "
                                    "need it too with spark.chandy.ui.requireToken=true. A request without it is "
                                    "401, with a wrong one 403."},
            "paths": PATHS,
            "security": [{"token": []}, {}],
            "components": {
                "schemas": {"Error": {"type": "object", "properties": {
                    "errors": {"type": "array", "items": {"type": "string"}}}, "required": ["errors"]}},
                "securitySchemes": {"token": {"type": "http", "scheme": "bearer",
                                              "description": "the server's token; ?token= works too"}}}}
