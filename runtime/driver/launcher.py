"""Getting a SparkSession, checking its slots, and running a job attempt as one Spark barrier stage.

Facts this module relies on (DESIGN §5): a barrier stage runs all its tasks at once or not at all; Spark
retries a too-small cluster for minutes, so we count slots first; a failed barrier result stage is not
retried by Spark, so restarts are the driver's; cancellation goes through a job group with
``interruptOnCancel=True``.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from runtime.errors import InsufficientSlotsError
from runtime.settings.options import SPARK_SIGNALS, known_spark_keys, option_named

__all__ = ["obtain_spark_session", "spark_conf_of", "available_slots", "require_slots", "BarrierStage",
           "StageCompleted", "StageFailed"]

log = logging.getLogger(__name__)

_SLOT_WAIT = option_named("slot_wait_ms")


def obtain_spark_session(slots_needed: int):
    """The active SparkSession, or (under spark-submit) the configured one, or a new ``local[N]`` one.

    A new local session gets ``N = slots_needed``: every subtask needs a slot of its own, and more task
    threads than slots would only let another Spark job compete with the long-running ones.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Executors must run the same interpreter as the driver, or cloudpickled functions will not load.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("chandy")
    if SparkContext._active_spark_context is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # The workers' daemon imports Chandy before it forks them (runtime.executor.worker_daemon): a worker
        # started after a failure is ready at once. It must find the package wherever the driver found it.
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        session = (builder.master(f"local[{slots_needed}]")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.ui.enabled", "false")
                   .config("spark.python.daemon.module", "runtime.executor.worker_daemon")
                   .getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        return session
    return builder.getOrCreate()


def spark_conf_of(spark) -> dict[str, str]:
    """The session's conf as a mapping: its runtime conf (which starts from the SparkContext's and holds what
    ``spark.conf.set`` changed since). A stand-in without ``getAll`` is asked for the keys Chandy knows."""
    conf = spark.conf
    whole = _conf_in_one_call(spark)
    if whole is not None:
        return whole
    try:
        return dict(conf.getAll)
    except (AttributeError, TypeError):
        keys = sorted(known_spark_keys()) + [key for key, _ in SPARK_SIGNALS]
        return {key: conf.get(key, None) for key in keys if conf.get(key, None) is not None}


def _conf_in_one_call(spark) -> dict[str, str] | None:
    """A classic session's runtime conf, pickled in the JVM by the pickler PySpark itself uses: one py4j call
    instead of two per entry, which is what ``dict(conf.getAll)`` costs (tens of ms at each job's start-up, for
    a conf of twenty entries). None for any other session (Spark Connect, a stand-in) or if that fails."""
    jconf = getattr(spark.conf, "_jconf", None)
    if jconf is None:
        return None
    jvm = getattr(spark.sparkContext, "_jvm", None)
    if jvm is None:
        return None
    try:
        entries = pickle.loads(bytes(jvm.net.razorvine.pickle.Pickler().dumps(jconf.getAllAsJava())))
    except Exception:  # another pickler, another Spark: ask entry by entry
        log.debug("reading the Spark conf in one call failed", exc_info=True)
        return None
    if not isinstance(entries, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
        return None
    return entries


def available_slots(spark) -> int:
    """Tasks the cluster can run at once now, as Spark's own barrier check counts them."""
    jsc = spark.sparkContext._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return int(jsc.maxNumConcurrentTasks(profile))


def require_slots(spark, needed: int, stop: Callable[[], bool] = lambda: False, wait_ms: int | None = None) -> bool:
    """Return True once ``needed`` slots exist, False if ``stop()`` became true while waiting; raise
    :class:`InsufficientSlotsError` otherwise.

    On a local master the answer is immediate; on a cluster, executors may still be starting, so we wait up to
    ``wait_ms`` (the job's ``Settings.slot_wait_ms``; None: ``spark.chandy.slotWaitSeconds`` read from the
    session, for a restart, whose value the launch already checked).
    """
    sc = spark.sparkContext
    master = sc.master
    if wait_ms is None:
        text = spark_conf_of(spark).get(_SLOT_WAIT.spark_key)
        wait_ms = _SLOT_WAIT.parse(text, _SLOT_WAIT.spark_key) if text else _SLOT_WAIT.default
    wait = 0.0 if master.startswith("local[") or master == "local" else wait_ms / 1000
    deadline = time.monotonic() + wait
    while True:
        slots = available_slots(spark)
        if slots >= needed:
            return True
        if time.monotonic() >= deadline:
            raise InsufficientSlotsError(needed, slots, master)
        if stop():
            return False
        time.sleep(0.25)  # Spark announces no executor registrations to Python: look again


@dataclass(frozen=True)
class StageCompleted:
    attempt: int
    results: list


@dataclass(frozen=True)
class StageFailed:
    attempt: int
    error: BaseException


class BarrierStage:
    """One job attempt's barrier stage, submitted from its own thread; outcome goes to ``events``."""

    def __init__(self, spark, group_id: str, description: str, slots: int, task_function: Any, attempt: int,
                 events: queue.Queue):
        from pyspark import InheritableThread

        self.spark = spark
        self.group_id = group_id
        self.description = description
        self.slots = slots
        self.task_function = task_function
        self.attempt = attempt
        self.events = events
        self.submitted_at: float | None = None  # time.time() when collect() was called (a start-up mark)
        self.thread = InheritableThread(target=self._submit, name=f"chandy-stage-{group_id}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _submit(self) -> None:
        sc = self.spark.sparkContext
        try:
            sc.setJobGroup(self.group_id, self.description, interruptOnCancel=True)
            rdd = sc.parallelize(range(self.slots), self.slots).barrier().mapPartitions(self.task_function)
            self.submitted_at = time.time()
            results = rdd.collect()
            self.events.put(StageCompleted(self.attempt, results))
        except BaseException as exc:  # reported to the job, which decides what it means
            self.events.put(StageFailed(self.attempt, exc))

    def cancel(self) -> None:
        try:
            self.spark.sparkContext.cancelJobGroup(self.group_id)
        except Exception:  # the context may already be stopping
            log.debug("cancelJobGroup(%s) failed", self.group_id, exc_info=True)

    def join(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()
