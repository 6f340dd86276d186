"""The SparkSession the benchmarks run on: local, with ``slots`` task slots, set up as Chandy sets up its own.

>>> import contextlib
>>> isinstance(spark_session(2), contextlib.AbstractContextManager)   # nothing starts until the block is entered
True
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["ROOT", "spark_session", "start_spark"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_spark(slots: int, conf: dict | None = None):
    """A local SparkSession with ``slots`` task slots, and ``conf`` on top of the benchmarks' settings."""
    # Executors' Python workers must import this package (the benchmark sink lives here).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{slots}]").appName("chandy-benchmarks")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               # as on the sessions Chandy creates itself: workers forked after a failure start with Chandy loaded
               .config("spark.python.daemon.module", "runtime.executor.worker_daemon")
               .config("spark.sql.streaming.numRecentProgressUpdates", "100000"))  # every batch, for exactness
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def spark_session(slots: int, conf: dict | None = None):
    """:func:`start_spark`'s session for the block, stopped when the block ends, however it ends."""
    spark = start_spark(slots, conf)
    try:
        yield spark
    finally:
        spark.stop()
