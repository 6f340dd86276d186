"""A PySpark worker daemon that imports Chandy's executor side once, before it forks the Python workers.

PySpark starts each Python worker by forking its daemon; a fresh worker then imports what its first task needs,
and Chandy's executor side with pyarrow takes about 1.5 s of CPU to import. A job's slots are long-lived, but
workers are started again after a failure (a killed worker, a restart) and after Spark's idle timeout, each paying
that import while the job waits. This daemon imports it before forking, so every worker starts with it loaded
(copy-on-write). Nothing imported here starts a thread, which a fork would not carry over.

Spark uses it with ``spark.python.daemon.module=runtime.executor.worker_daemon`` (a setting of the Spark context,
given when it is created); the executors' Python must be able to import Chandy (installed, or on ``PYTHONPATH``).
If it cannot, the daemon still starts, without the preload.

>>> import runtime.executor.worker_daemon as daemon
>>> daemon.PRELOADED
True
"""

import os

PRELOADED_ENV = "CHANDY_WORKER_PRELOADED"  # "1" in the workers of a daemon that preloaded Chandy

try:
    import runtime.executor.entry  # noqa: F401  (the executor side, its dependencies and pyarrow)

    PRELOADED = True
    os.environ[PRELOADED_ENV] = "1"
except ImportError:  # started where Chandy cannot be imported: a plain PySpark daemon
    PRELOADED = False

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
