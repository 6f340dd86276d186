"""One SparkSession for the whole test session: starting Spark costs seconds, jobs share it fine."""

from __future__ import annotations

import os
import sys

import pytest

SLOTS = 4


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def env(spark):
    from runtime import StreamExecutionEnvironment

    return StreamExecutionEnvironment.get_execution_environment(spark)
