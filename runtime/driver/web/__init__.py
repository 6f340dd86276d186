"""The driver's web side: the REST API, the dashboard and ``/metrics`` (:mod:`runtime.driver.web.server`).

One server per driver process serves every job it runs; the first job starts it, and its settings (the port, the
token, HTTPS or not, the dashboard or not) hold for the process. The REST API is also the control plane of every
job with checkpointing: the job publishes the server's address and token in its ``_job.json``, where ``chandy
savepoint`` and ``chandy stop`` find them. Settings, from the job's ``Configuration`` (Flink's keys) or the Spark
conf:

- ``rest.port`` / ``spark.chandy.ui.port``: the port (default 8081, Flink's); the next free one when taken;
- ``rest.bind-address`` / ``spark.chandy.ui.bindAddress``: the address to listen on (default: the driver's host,
  ``spark.driver.host``);
- ``spark.chandy.ui.enabled=false``: no dashboard. A job without checkpointing starts no server; one with
  checkpointing still needs the REST API as its control plane: the server then serves no page and every request,
  reads too, needs the token (as the job-control port before it did), and on a server that an earlier job started
  with the dashboard, the job is seen only by requests with the token;
- ``spark.chandy.ui.token``: the token that actions (and with ``spark.chandy.ui.requireToken=true`` or
  ``spark.acls.enable=true``, reads too) need (:mod:`runtime.driver.web.access`); default: a random one, printed once
  in the log's dashboard line (without the dashboard, only in the jobs' ``_job.json``);
- when the job encrypts its connections (:mod:`runtime.driver.security_settings`): HTTPS, with the user's
  certificate (``spark.chandy.network.tls.*``) or one made for the server (:attr:`DashboardSettings.tls`).

>>> dashboard_for("127.0.0.1", DashboardSettings(enabled=False)) is None
True
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from runtime.network.tls import TlsMaterial
from runtime.settings.options import option_named

__all__ = ["DashboardSettings", "dashboard_for", "UI_PORT_CONF", "UI_ENABLED_CONF", "UI_BIND_CONF", "UI_TOKEN_CONF",
           "UI_REQUIRE_TOKEN_CONF", "SPARK_ACLS_CONF", "DEFAULT_PORT"]

log = logging.getLogger(__name__)

UI_PORT_CONF = option_named("ui_port").spark_key
UI_ENABLED_CONF = option_named("ui_enabled").spark_key
UI_BIND_CONF = option_named("ui_bind_address").spark_key
UI_TOKEN_CONF = option_named("ui_token").spark_key
UI_REQUIRE_TOKEN_CONF = option_named("ui_require_token").spark_key
SPARK_ACLS_CONF = "spark.acls.enable"
DEFAULT_PORT = option_named("ui_port").default

_lock = threading.Lock()
_server = None


@dataclass(frozen=True)
class DashboardSettings:
    enabled: bool = True  # the dashboard's page; False: the REST API alone, for jobs with checkpointing
    port: int = DEFAULT_PORT
    bind_address: str | None = None  # None: the driver's host
    token: str | None = None  # None: a random one
    require_token: bool = False  # for reads too
    tls: TlsMaterial | None = field(default=None, repr=False)  # HTTPS with this (the job encrypts); None: HTTP


def dashboard_for(host: str, settings: DashboardSettings, control: bool = False):
    """This process's server, started on first use, for a job that wants the dashboard or, with ``control`` (it
    has checkpointing), needs the REST API as its control plane; None when neither, or when it cannot start (the
    job runs without it: a dashboard is never a reason for a job to fail)."""
    global _server
    if not (settings.enabled or control):
        return None
    with _lock:
        if _server is None:
            from runtime.driver.web.server import DashboardServer

            try:
                _server = DashboardServer(host, settings.port, settings.bind_address, settings.token,
                                          settings.require_token, tls=settings.tls, dashboard=settings.enabled)
            except Exception as exc:
                log.warning("The Chandy dashboard and REST API could not start (%s); the job runs without it", exc)
                return None
            if _server.serves_dashboard:
                log.info("Chandy dashboard and REST API: %s", _server.url_with_token)
            else:
                log.info("Chandy REST API: %s (%s=false: no dashboard, and every request needs the token)",
                         _server.url_with_token, UI_ENABLED_CONF)
        elif settings.enabled and not _server.serves_dashboard:
            log.warning("This driver's REST server was started without the dashboard (%s=false, by an earlier job "
                        "of this process): no job of it gets a dashboard until the driver restarts", UI_ENABLED_CONF)
        return _server
