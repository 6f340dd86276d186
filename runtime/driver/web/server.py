"""The driver's web server: the REST API, the dashboard's files and Prometheus' ``/metrics``, for every job
this driver process runs (one server per process, like Flink's per cluster).

Why aiohttp: it is one well-kept package that serves many concurrent clients (dashboards polling every second,
a Prometheus scrape, a CLI) from one asyncio loop, and it runs on a thread of our own with its own loop, so the
job master and the coordinator never wait for a client, nor a client for them: every answer is computed on a
worker thread, and the actions only hand a request to the job's own threads. The
standard library's ``http.server`` answers one request at a time per thread and has no routing; uvicorn would
want the main thread's signal handlers.

The port is ``spark.chandy.ui.port`` (or Flink's ``rest.port``), default 8081; when it is taken, the next free
one of the following 100 is used and the log says which. Who may act, and who may read, is the
:class:`~runtime.driver.web.access.AccessGuard`'s to say: every request passes it before it is routed, and a
request body (the JSON of an action, at most :data:`MAX_BODY_BYTES`) is read only after that.

The server is also every checkpointed job's control plane: the job publishes its address and token in
``<job directory>/_job.json`` (:meth:`describe_for`), where ``chandy savepoint`` and ``chandy stop`` find it
(:mod:`runtime.tools.rest_commands`). So it runs without the dashboard too (``dashboard=False``, for
``spark.chandy.ui.enabled=false``): then it serves no page and every request needs the token; and a job
registered ``private`` (its own ``spark.chandy.ui.enabled=false``, on a server an earlier job started with the
dashboard) is seen only by requests that carry the token. With ``tls`` it speaks HTTPS only, with that
certificate, which ``_job.json`` publishes for the CLI to pin.

>>> import json, urllib.request
>>> server = DashboardServer("127.0.0.1", 0)
>>> json.load(urllib.request.urlopen(server.url + "/jobs"))
{'jobs': []}
>>> server.close()
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import errno
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections import OrderedDict

from aiohttp import web

from runtime.driver.queryable_state import parse_key
from runtime.driver.web import api
from runtime.driver.web.access import AccessGuard, is_loopback, presented_token
from runtime.driver.web.openapi import openapi_document
from runtime.driver.web.prometheus import prometheus_text
from runtime.errors import ChandyError, QueryableStateError
from runtime.network.tls import TlsMaterial
from runtime.protocol.json_values import to_json
from runtime.protocol.server_timing import server_timing

__all__ = ["DashboardServer", "PORT_ATTEMPTS", "KEPT_ENDED_JOBS", "KEPT_OPERATIONS", "MAX_BODY_BYTES",
           "COLLECTION_GRACE_S"]

log = logging.getLogger(__name__)

PORT_ATTEMPTS = 100  # the configured port, then the next ones (Flink's rest.bind-port takes a range)
KEPT_ENDED_JOBS = 50  # ended jobs still shown (their final state), oldest forgotten first
KEPT_OPERATIONS = 1000  # triggered checkpoints and savepoints whose outcome can be asked for
MAX_BODY_BYTES = 64 * 1024  # an action's JSON is a few names and paths: a larger body is refused (413) unread
# When the driver process exits, it waits up to this long for clients to collect the outcome of operations they
# triggered that have just ended (``chandy stop`` asks for its savepoint once the job has ended, and a driver
# whose program ends with the job would otherwise exit before the answer).
COLLECTION_GRACE_S = 10.0
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


class DashboardServer:
    """Serves every registered job on ``host``: the port asked for, or the next free one."""

    def __init__(self, host: str, port: int, bind_host: str | None = None, token: str | None = None,
                 require_token: bool = False, guard: AccessGuard | None = None, tls: TlsMaterial | None = None,
                 dashboard: bool = True):
        self.host = host
        self.tls = tls  # None: plain HTTP
        self.serves_dashboard = dashboard  # False: the REST API alone, every request with the token
        listening = [bind_host or host] + ([] if _listens_on_loopback_alone(bind_host or host) else ["127.0.0.1"])
        if guard is None:
            guard = (AccessGuard.for_server(listening, token, require_token) if dashboard
                     else AccessGuard.for_everything(token))
        self.guard = guard
        self.jobs: OrderedDict[str, object] = OrderedDict()
        self._private: set[str] = set()  # ids of jobs only requests with the token see
        self._jobs_lock = threading.Lock()
        # request id -> (job id, "checkpoint" | "savepoint", its future); the newest KEPT_OPERATIONS
        self._operations: OrderedDict[str, tuple[str, str, concurrent.futures.Future]] = OrderedDict()
        # request id -> when its outcome was known (None: not yet), until a client has been told it
        self._uncollected: dict[str, float | None] = {}
        self._collected = threading.Condition(self._jobs_lock)
        self._readers = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="chandy-web")
        self._actions = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="chandy-web-action")
        # Lookups of queryable state wait for a subtask's answer: on a pool of their own, so that a stalled
        # subtask never holds up the dashboard's reads.
        self._lookups = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="chandy-web-state")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chandy-web", daemon=True)
        self._thread.start()
        try:
            self.port, self._runner, self.addresses = asyncio.run_coroutine_threadsafe(
                self._start(bind_host or host, port), self._loop).result(60)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            raise
        atexit.register(self.wait_for_collection)
        if self.port != port and port != 0:
            log.warning("Port %d is taken: the Chandy dashboard and REST API use port %d instead", port, self.port)

    @property
    def url(self) -> str:
        """The base URL, on the driver's host as other machines reach it."""
        return f"{'https' if self.tls is not None else 'http'}://{self.host}:{self.port}"

    @property
    def certificate(self) -> str | None:
        """The PEM certificate (chain) the server presents in HTTPS, for clients to pin; None in plain HTTP."""
        return self.tls.certificate if self.tls is not None else None

    @property
    def url_with_token(self) -> str:
        """The address to open in a browser, with the token when the server needs one (printed once in the log)."""
        return f"{self.url}/{self.guard.url_query()}"

    # -- jobs ----------------------------------------------------------------------------------------

    def register(self, master, private: bool = False) -> None:
        """Serve ``master``'s job; ``private``: only to requests that carry the token."""
        with self._jobs_lock:
            self.jobs[master.job_id] = master
            if private:
                self._private.add(master.job_id)
            ended = [jid for jid, m in self.jobs.items() if m.ended]
            for jid in ended[:max(0, len(ended) - KEPT_ENDED_JOBS)]:
                del self.jobs[jid]
                self._private.discard(jid)

    def describe_for(self, master) -> dict:
        """What ``<job directory>/_job.json`` holds for ``master``'s job: where to reach it and the token (and
        the certificate to pin, in HTTPS)."""
        described = {"job_id": master.job_id, "job_name": master.job_name, "url": self.url,
                     "token": self.guard.token}
        if self.certificate is not None:
            described["certificate"] = self.certificate
        return described

    def _visible(self, request: web.Request | None) -> dict:
        """The jobs ``request`` may see: all with the token, else those not private."""
        authenticated = request is not None and self.guard.accepts(presented_token(request.headers, request.query))
        with self._jobs_lock:
            if authenticated:
                return dict(self.jobs)
            return {jid: m for jid, m in self.jobs.items() if jid not in self._private}

    def _masters(self, request: web.Request | None) -> list:
        return list(self._visible(request).values())

    def _job(self, request: web.Request):
        job_id = request.match_info["job_id"]
        try:
            return api.find_job(self._visible(request), job_id)
        except api.ApiError:
            with self._jobs_lock:
                private = any(jid.startswith(job_id) for jid in self._private) and len(job_id) >= 4
            if private:  # it exists, but only for the token's holders
                raise api.ApiError(401, f"Job '{job_id}' is served only to requests with the server's token "
                                        "(the job runs with spark.chandy.ui.enabled=false): send the token of its "
                                        "_job.json as 'Authorization: Bearer <token>'.",
                                   {"WWW-Authenticate": 'Bearer realm="chandy"'}) from None
            raise

    # -- serving -------------------------------------------------------------------------------------

    async def _start(self, host: str, port: int) -> tuple[int, web.AppRunner, list[tuple[str, int]]]:
        app = web.Application(middlewares=[_errors_as_json, self._guarded], client_max_size=MAX_BODY_BYTES)
        self._routes(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        ssl_context = self.tls.server_context(verify_client=False) if self.tls is not None else None
        last_error: OSError | None = None
        for candidate in ([port] if port == 0 else range(port, min(65536, port + PORT_ATTEMPTS))):
            # SO_REUSEADDR: a driver started again soon after another still gets the port its old connections
            # hold in TIME_WAIT (on Linux it never lets two servers listen on one port).
            site = web.TCPSite(runner, host, candidate, reuse_address=True, ssl_context=ssl_context)
            try:
                await site.start()
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    await runner.cleanup()
                    raise ChandyError(f"The Chandy dashboard cannot listen on {host}:{candidate}: {exc}. Set "
                                      "spark.chandy.ui.port (or rest.port) to a free port, or "
                                      "spark.chandy.ui.enabled=false.") from exc
                last_error = exc
                continue
            bound = site._server.sockets[0].getsockname()[1]
            if not _listens_on_loopback_alone(host) and host not in ("0.0.0.0", "::"):
                # Also on the loopback address: `chandy jobs` on the driver's machine needs no address.
                try:
                    await web.TCPSite(runner, "127.0.0.1", bound, reuse_address=True, ssl_context=ssl_context).start()
                except OSError:
                    log.debug("the dashboard is not on 127.0.0.1:%d too", bound, exc_info=True)
            addresses = [s.getsockname()[:2] for started in runner.sites if started._server is not None
                         for s in started._server.sockets]
            return bound, runner, addresses
        await runner.cleanup()
        raise ChandyError(f"No free port for the Chandy dashboard on {host} in {port}..{port + PORT_ATTEMPTS - 1} "
                          f"({last_error}). Set spark.chandy.ui.port (or rest.port) to a free port.")

    def _routes(self, app: web.Application) -> None:
        get, job = app.router.add_get, self._job
        json = self._json
        if self.serves_dashboard:
            get("/", self._index)
            app.router.add_static("/static/", STATIC)
        get("/config", json(lambda r: {"refresh-interval": 1000, "chandy-version": _version()}))
        get("/overview", json(lambda r: self._overview(r)))
        get("/openapi.json", json(lambda r: openapi_document(_version())))
        get("/metrics", self._prometheus)
        get("/jobs", json(lambda r: api.jobs_answer(self._masters(r))))
        get("/jobs/overview", json(lambda r: api.jobs_overview(self._masters(r))))
        get("/jobs/{job_id}", json(lambda r: api.job_details(job(r))))
        app.router.add_patch("/jobs/{job_id}", json(self._cancel, status=202))
        get("/jobs/{job_id}/vertices/{uid}", json(lambda r: api.vertex_details(job(r), r.match_info["uid"])))
        get("/jobs/{job_id}/vertices/{uid}/backpressure",
            json(lambda r: api.backpressure(job(r), r.match_info["uid"])))
        get("/jobs/{job_id}/watermarks", json(lambda r: api.watermarks(job(r))))
        get("/jobs/{job_id}/exceptions", json(lambda r: api.exceptions(job(r))))
        get("/jobs/{job_id}/metrics/history",
            json(lambda r: api.metrics_history(job(r), _int(r.query.get("since", "0"), "since"))))
        get("/jobs/{job_id}/checkpoints", json(lambda r: api.checkpoints(job(r))))
        app.router.add_post("/jobs/{job_id}/checkpoints", json(self._trigger_checkpoint, status=202))
        get("/jobs/{job_id}/checkpoints/config", json(lambda r: api.checkpoint_config(job(r))))
        get("/jobs/{job_id}/checkpoints/details/{checkpoint_id}",
            json(lambda r: api.checkpoint_details(job(r), r.match_info["checkpoint_id"])))
        get("/jobs/{job_id}/checkpoints/{trigger_id}", self._operation_handler("checkpoint", "checkpointId"))
        app.router.add_post("/jobs/{job_id}/savepoints", json(self._trigger_savepoint, status=202, body=True))
        get("/jobs/{job_id}/savepoints/{trigger_id}", self._operation_handler("savepoint", "location"))
        app.router.add_post("/jobs/{job_id}/stop", json(self._stop, status=202, body=True))
        get("/jobs/{job_id}/state", json(lambda r: {"states": job(r).queryable_state.states()}))
        get("/jobs/{job_id}/state/{name}", self._state_lookup)

    def _json(self, compute, status: int = 200, body: bool = False):
        """A handler answering ``compute(request)`` (or ``compute(request, body)``) as JSON, computed on a worker
        thread: nothing a job does can hold up the server's loop, nor the loop a job. Actions (anything but GET)
        run on a pool of their own, so that actions waiting for a job's lock never starve the readers; they
        must say ``Content-Type: application/json``, which a page of another site cannot send without the
        browser asking first (and this server never allows it)."""
        async def handler(request: web.Request) -> web.Response:
            loop = asyncio.get_running_loop()
            if request.method == "GET":
                answer = await loop.run_in_executor(self._readers, compute, request)
            else:
                if request.content_type != "application/json":
                    raise api.ApiError(415, f"{request.method} {request.path} needs 'Content-Type: "
                                            f"application/json' (got '{request.content_type}').")
                arguments = (request, await _body(request)) if body else (request,)
                answer = await loop.run_in_executor(self._actions, compute, *arguments)
            return web.json_response(answer, status=status, dumps=_dumps)
        return handler

    async def _state_lookup(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        answer, timings = await asyncio.get_running_loop().run_in_executor(self._lookups, self._look_up, request)
        timings = {"driver": (time.monotonic() - started) * 1000.0, **timings}
        return web.json_response(answer, dumps=_dumps, headers={"Server-Timing": server_timing(timings)})

    def _look_up(self, request: web.Request) -> tuple[dict, dict[str, float]]:
        """``GET /jobs/<id>/state/<name>?key=<key>``: the value of queryable state ``name`` for the key, read by the
        subtask that owns it between two batches (``null``: none), and where the lookup's time went."""
        master, name = self._job(request), request.match_info["name"]
        text = request.query.get("key")
        if text is None:
            raise api.ApiError(400, f"GET {request.path} needs ?key=<key>: JSON (key=42, key=%22eu%22 for the text "
                                    "\"eu\", key=[1,2] for a tuple) or plain text (key=eu).")
        try:
            key = parse_key(text)
            value, timings = master.queryable_state.timed_lookup(name, key)
        except QueryableStateError as exc:
            raise api.ApiError(exc.status, str(exc)) from None
        return {"name": name, "key": json.loads(to_json(key)), "value": json.loads(value)}, timings

    @web.middleware
    async def _guarded(self, request: web.Request, handler):
        """Before a request is routed (and before its body is read): does it carry the token it needs?"""
        refused = self.guard.check(request.method, request.path, presented_token(request.headers, request.query))
        if refused is not None:
            raise api.ApiError(refused.status, refused.message,
                               {"WWW-Authenticate": 'Bearer realm="chandy"'} if refused.status == 401 else None)
        return await handler(request)

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(os.path.join(STATIC, "index.html"), headers={"Cache-Control": "no-cache"})

    async def _prometheus(self, request: web.Request) -> web.Response:
        text, content_type = await asyncio.get_running_loop().run_in_executor(self._readers, prometheus_text,
                                                                              self._masters(request))
        return web.Response(body=text, headers={"Content-Type": content_type})

    def _overview(self, request: web.Request) -> dict:
        states = [m.status.name for m in self._masters(request)]
        return {"chandy-version": _version(), "jobs-running": sum(s in ("RUNNING", "RESTARTING", "CREATED",
                                                                        "INITIALIZING", "CANCELLING")
                                                                       for s in states),
                "jobs-finished": states.count("FINISHED"), "jobs-cancelled": states.count("CANCELED"),
                "jobs-failed": states.count("FAILED")}

    # -- actions -------------------------------------------------------------------------------------

    def _running(self, master, action: str):
        if master.ended or master.status in api.TERMINAL:
            raise api.ApiError(409, f"Job '{master.job_name}' ({master.job_id[:8]}) is {master.status.name}: it "
                                    f"cannot {action} any more.")
        return master

    def _cancel(self, request: web.Request) -> dict:
        mode = request.query.get("mode", "cancel")
        if mode != "cancel":
            raise api.ApiError(400, f"mode={mode!r} is not supported: PATCH /jobs/<id>?mode=cancel cancels the job; "
                                    "POST /jobs/<id>/stop stops it with a savepoint.")
        self._running(self._job(request), "be cancelled").request_cancel()
        return {}

    def _remember(self, master, kind: str, future: concurrent.futures.Future) -> dict:
        trigger_id = uuid.uuid4().hex
        with self._jobs_lock:
            self._operations[trigger_id] = (master.job_id, kind, future)
            self._uncollected[trigger_id] = None
            while len(self._operations) > KEPT_OPERATIONS:
                self._uncollected.pop(self._operations.popitem(last=False)[0], None)
        future.add_done_callback(lambda _: self._ended(trigger_id))
        return {"request-id": trigger_id}

    def _ended(self, trigger_id: str) -> None:
        with self._jobs_lock:
            if trigger_id in self._uncollected:
                self._uncollected[trigger_id] = time.monotonic()

    def wait_for_collection(self, grace_s: float = COLLECTION_GRACE_S) -> None:
        """Wait (at most ``grace_s``) until clients have collected the outcome of every operation still running
        or ended within the last ``grace_s``: run when the driver process exits, so that ``chandy stop`` hears
        the savepoint of a job whose end also ends its program."""
        deadline = time.monotonic() + grace_s
        with self._collected:
            while True:
                now = time.monotonic()
                waiting = [t for t, ended in self._uncollected.items() if ended is None or now - ended < grace_s]
                if not waiting or now >= deadline:
                    return
                self._collected.wait(min(0.1, deadline - now))

    def _trigger_checkpoint(self, request: web.Request) -> dict:
        master = self._running(self._job(request), "take a checkpoint")
        try:
            return self._remember(master, "checkpoint", master.trigger_checkpoint())
        except ChandyError as exc:
            raise api.ApiError(409, str(exc)) from None

    def _trigger_savepoint(self, request: web.Request, body: dict) -> dict:
        master = self._running(self._job(request), "take a savepoint")
        if master.coordinator is None:
            raise api.ApiError(409, f"Job '{master.job_name}' runs without checkpointing: it takes no savepoints.")
        directory = body.get("target-directory")
        if body.get("cancel-job"):
            return self._remember(master, "savepoint", self._actions.submit(master.stop_with_savepoint, directory,
                                                                            False))
        return self._remember(master, "savepoint", self._actions.submit(master.trigger_savepoint, directory))

    def _stop(self, request: web.Request, body: dict) -> dict:
        master = self._running(self._job(request), "stop")
        if master.coordinator is None:
            raise api.ApiError(409, f"Job '{master.job_name}' runs without checkpointing: cancel it instead.")
        directory = body.get("targetDirectory", body.get("target-directory"))
        return self._remember(master, "savepoint", self._actions.submit(master.stop_with_savepoint, directory,
                                                                        bool(body.get("drain"))))

    def _operation_handler(self, kind: str, result_name: str):
        """The handler of ``GET /jobs/<id>/<kind>s/<request id>``. It answers on the loop itself (the answer is a
        lookup under a lock held for microseconds), since it must still answer while the interpreter exits
        (:meth:`wait_for_collection`), when the worker threads take no more work; and it sends the answer before
        it counts an outcome as collected, so that the exit does not cut it off."""
        async def handler(request: web.Request) -> web.StreamResponse:
            answer = self._operation(request, kind, result_name)
            response = web.json_response(answer, dumps=_dumps)
            await response.prepare(request)
            await response.write_eof()
            if answer["status"]["id"] == "COMPLETED":
                with self._collected:
                    self._uncollected.pop(request.match_info["trigger_id"], None)
                    self._collected.notify_all()
            return response
        return handler

    def _operation(self, request: web.Request, kind: str, result_name: str) -> dict:
        """Flink's asynchronous operation result: ``IN_PROGRESS``, or ``COMPLETED`` with the result or the cause."""
        master = self._job(request)
        trigger_id = request.match_info["trigger_id"]
        with self._jobs_lock:
            job_id, triggered, future = self._operations.get(trigger_id, (None, None, None))
        if future is None or job_id != master.job_id or triggered != kind:
            raise api.ApiError(404, f"No {kind} of job '{master.job_name}' was triggered with request id "
                                    f"'{trigger_id}' (or it is one of more than {KEPT_OPERATIONS} older ones).")
        if not future.done():
            return {"status": {"id": "IN_PROGRESS"}}
        error = future.exception()
        if error is not None:
            return {"status": {"id": "COMPLETED"},
                    "operation": {"failure-cause": {"class": type(error).__name__, "stack-trace": str(error)}}}
        return {"status": {"id": "COMPLETED"}, "operation": {result_name: future.result()}}

    def close(self) -> None:
        atexit.unregister(self.wait_for_collection)

        async def stop():
            await self._runner.cleanup()
        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._actions.shutdown(wait=False)
            self._readers.shutdown(wait=False)


@web.middleware
async def _errors_as_json(request: web.Request, handler):
    """Every error as Flink answers one: a status and ``{"errors": [message]}``; never an HTML page."""
    try:
        return await handler(request)
    except api.ApiError as exc:
        return web.json_response({"errors": [exc.message]}, status=exc.status, headers=exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = f"{exc.reason}: {request.method} {request.path}"
        if exc.status == 404:
            message += " (GET /openapi.json lists what this server answers)"
        return web.json_response({"errors": [message]}, status=exc.status)
    except Exception as exc:  # our bug: the client hears what it was, the job goes on
        log.exception("REST request %s %s failed", request.method, request.path)
        return web.json_response({"errors": [f"{type(exc).__name__}: {exc}"]}, status=500)


async def _body(request: web.Request) -> dict:
    if not request.can_read_body:
        return {}
    try:
        value = await request.json()
    except ValueError as exc:
        raise api.ApiError(400, f"The request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise api.ApiError(400, "The request body must be a JSON object.")
    return value


def _listens_on_loopback_alone(host: str) -> bool:
    return host == "localhost" or is_loopback(host)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise api.ApiError(400, f"{name}={text!r} is not a whole number.") from None


def _dumps(value) -> str:
    import json

    return json.dumps(value, default=str)


def _version() -> str:
    # The package ``runtime`` is imported before any of its modules (the layers forbid importing it from here).
    return getattr(sys.modules.get("runtime"), "__version__", "unknown")
