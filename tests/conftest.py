"""One SparkSession for the whole test session: starting Spark costs seconds, jobs share it fine."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading

import pytest

SLOTS = 4
# No test takes minutes: one that does is stuck (a job waiting for an event that never comes). Then every
# thread's traceback is printed and the run ends, instead of hanging CI until its time limit.
STUCK_AFTER_S = float(os.environ.get("CHANDY_TEST_STUCK_AFTER_S", "600"))


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    """Mark every test that starts Spark (the integration folder, and any test using the ``spark`` or ``env``
    fixture): ``pytest -m "not spark"`` is the fast tier, which needs no JVM. With pytest-xdist (``-n 2 --dist
    loadgroup``, the README's test command) every Spark test is in one group, so one worker runs them one after
    the other in one SparkSession while the other worker runs the rest. (Those that start Spark in processes of
    their own stay in the group too: beside the session's jobs, two Spark applications on two cores made the whole
    suite slower, not faster.)"""
    integration = os.path.join(ROOT, "tests", "integration") + os.sep
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if str(item.fspath).startswith(integration) or {"spark", "env"} & fixtures:
            item.add_marker(pytest.mark.spark)
            if grouped:
                item.add_marker(pytest.mark.xdist_group("spark"))
        if "kafka" in fixtures:
            item.add_marker(pytest.mark.kafka)
        if "postgres" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if "s3_server" in fixtures:
            item.add_marker(pytest.mark.s3)


def pytest_configure(config):
    """Point the session at its S3 server before any SparkSession starts: executors learn it from the environment
    they inherit (tests/s3_server.py)."""
    from tests.s3_server import configure_environment

    configure_environment()


@pytest.fixture(scope="session")
def kafka():
    """A Kafka-protocol broker for the session (tests/kafka_broker.py)."""
    from tests.kafka_broker import start_broker

    broker = start_broker()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (tests/postgres_server.py)."""
    from tests.postgres_server import start_server

    server = start_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server():
    """An S3-protocol server for the session (tests/s3_server.py)."""
    from tests.s3_server import start_server

    server = start_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Executors' Python workers inherit this, so classes defined in test modules unpickle there.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master(f"local[{SLOTS}]").appName("chandy-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.python.daemon.module", "runtime.executor.worker_daemon")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def env(spark):
    from runtime import StreamExecutionEnvironment

    return StreamExecutionEnvironment.get_execution_environment(spark)


@pytest.fixture(autouse=True)
def fail_a_stuck_test(request):
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def stuck():
        if capture is not None:  # pytest's capture holds stderr: give it back, or the report is lost
            capture.suspend_global_capture(in_=True)
        sys.stderr.write(f"\n{request.node.nodeid} is stuck after {STUCK_AFTER_S} s. Every thread's stack:\n")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(3)

    timer = threading.Timer(STUCK_AFTER_S, stuck)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()
