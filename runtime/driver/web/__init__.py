"""The driver's web side: the REST API, the dashboard and ``/metrics`` (:mod:`runtime.driver.web.server`).

One server per driver process serves every job it runs; the first job starts it. Settings, from the job's
``Configuration`` (Flink's keys) or the Spark conf:

- ``rest.port`` / ``spark.chandy.ui.port``: the port (default 8081, Flink's); the next free one when taken;
- ``rest.bind-address`` / ``spark.chandy.ui.bindAddress``: the address to listen on (default: the driver's host,
  ``spark.driver.host``);
- ``spark.chandy.ui.enabled=false``: no server;
- ``spark.chandy.ui.token``: the token that actions (and with ``spark.chandy.ui.requireToken=true`` or
  ``spark.acls.enable=true``, reads too) need (:mod:`runtime.driver.web.access`); default: a random one, printed once
  in the log's dashboard line.

>>> dashboard_for("127.0.0.1", DashboardSettings(enabled=False)) is None
True
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

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
    enabled: bool = True
    port: int = DEFAULT_PORT
    bind_address: str | None = None  # None: the driver's host
    token: str | None = None  # None: a random one
    require_token: bool = False  # for reads too


def dashboard_for(host: str, settings: DashboardSettings):
    """This process's server, started on first use; None when disabled or when it cannot start (the job runs
    without it: a dashboard is never a reason for a job to fail)."""
    global _server
    if not settings.enabled:
        return None
    with _lock:
        if _server is None:
            from runtime.driver.web.server import DashboardServer

            try:
                _server = DashboardServer(host, settings.port, settings.bind_address, settings.token,
                                          settings.require_token)
            except Exception as exc:
                log.warning("The Chandy dashboard could not start (%s); the job runs without it", exc)
                return None
            log.info("Chandy dashboard and REST API: %s", _server.url_with_token)
        return _server
