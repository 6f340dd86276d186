"""A PySpark worker daemon that imports Chandy's executor side once, before it forks the Python workers.

PySpark starts each Python worker by forking its daemon; a fresh worker then imports what its first task needs,
and Chandy's executor side with pyarrow takes about 1.5 s of CPU to import. A job's slots are long-lived, but
workers are started again after a failure (a killed worker, a restart) and after Spark's idle timeout, each paying
that import while the job waits. This daemon imports it before forking, so every worker starts with it loaded
(copy-on-write). Nothing imported here starts a thread, which a fork would not carry over.

Two more costs of a fresh worker go too (measured with a daemon that preloaded Chandy, a worker forked after a
kill, on this 2-core machine): PySpark's own worker module, which the daemon imports only after the fork (0.1-0.3 s;
it starts no thread either), and the directories of the zip archives on ``sys.path`` (PySpark's and py4j's), which
Python 3.11 reads again, once per importer (18 of them), when the worker calls ``importlib.invalidate_caches()``
after putting the task's files directory on ``sys.path``, which a fresh worker always does (0.3 s). Those archives
belong to the Spark installation and do not change while the daemon lives: an importer keeps the directory it has
while its archive's size and modification time are those the daemon saw.

Spark uses it with ``spark.python.daemon.module=runtime.executor.worker_daemon`` (a setting of the Spark context,
given when it is created); the executors' Python must be able to import Chandy (installed, or on ``PYTHONPATH``).
If it cannot, the daemon still starts, without the preload.

>>> import runtime.executor.worker_daemon as daemon
>>> daemon.PRELOADED
True
"""

import os

PRELOADED_ENV = "CHANDY_WORKER_PRELOADED"  # "1" in the workers of a daemon that preloaded Chandy


def _keep_unchanged_zip_directories() -> None:
    """Make ``zipimporter.invalidate_caches()`` re-read an archive's directory only when the archive changed since
    the daemon read it (see the module's docstring)."""
    import zipimport

    read_again = getattr(zipimport.zipimporter, "invalidate_caches", None)
    directories = getattr(zipimport, "_zip_directory_cache", None)
    if read_again is None or directories is None:  # another Python: leave it alone
        return

    def stamp(archive: str) -> tuple[int, int] | None:
        try:
            status = os.stat(archive)
        except OSError:
            return None
        return status.st_size, status.st_mtime_ns

    seen = {archive: stamp(archive) for archive in list(directories)}

    def invalidate_caches(self) -> None:
        now = stamp(self.archive)
        if now is None or seen.get(self.archive) != now:
            read_again(self)
            seen[self.archive] = now

    zipimport.zipimporter.invalidate_caches = invalidate_caches


try:
    import runtime.executor.entry  # noqa: F401  (the executor side, its dependencies and pyarrow)

    PRELOADED = True
    os.environ[PRELOADED_ENV] = "1"
except ImportError:  # started where Chandy cannot be imported: a plain PySpark daemon
    PRELOADED = False

if __name__ == "__main__":
    if PRELOADED:
        import pyspark.worker  # noqa: F401  (what PySpark's daemon imports in every worker after the fork)

        _keep_unchanged_zip_directories()  # last: every archive the imports read is seen
    from pyspark.daemon import manager

    manager()
