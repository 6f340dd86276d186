"""The executor's standard output, where ``stream.print()`` and the user's own ``print()`` calls on the executors go.

Spark starts its Python workers with their stdout piped into the executor JVM, which copies it to the JVM's
*stderr*: ``print()`` in a job would land on the terminal's stderr locally and in the executor's ``stderr`` log on
a cluster. Flink prints to the TaskManager's stdout (the terminal's stdout locally), and so does Chandy: while a
slot runs, ``sys.stdout`` is the stdout of the JVM that started the worker (its ``/proc/<pid>/fd/1``, opened for
appending): the terminal (or the file or pipe it was redirected to) in local mode, the executor's ``stdout`` log
on a cluster, where Spark's UI shows it. Where that stream cannot be reached (not Linux, no JVM among the
worker's ancestors, a permission refused), the worker's own stdout stays, with Spark's redirection.

>>> with printing_to_the_executors_stdout():  # outside Spark: no JVM above this process, nothing changes
...     print("hello")
hello
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Iterator, TextIO

__all__ = ["printing_to_the_executors_stdout", "java_ancestor"]

log = logging.getLogger(__name__)

_MAX_GENERATIONS = 4  # worker -> pyspark.daemon -> executor JVM, and a wrapper script around python at most


def _parent_and_command(pid: int) -> tuple[int, str]:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read().decode("utf-8", "replace")
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    command = stat[stat.index("(") + 1:stat.rindex(")")]
    return int(stat[stat.rindex(")") + 2:].split()[1]), command


def java_ancestor(pid: int | None = None) -> int | None:
    """The nearest process above ``pid`` (default: this one) whose command is ``java``; None when there is none
    within a few generations or ``/proc`` cannot tell."""
    try:
        current = os.getpid() if pid is None else pid
        for _ in range(_MAX_GENERATIONS):
            current, _ = _parent_and_command(current)
            if current <= 1:
                return None
            if _parent_and_command(current)[1] == "java":
                return current
    except (OSError, ValueError, IndexError):
        return None
    return None


def _open_executor_stdout() -> TextIO | None:
    jvm = java_ancestor()
    if jvm is None:
        return None
    try:
        # Append: on a cluster the JVM's stdout is a log file, which opening for writing would truncate.
        return open(f"/proc/{jvm}/fd/1", "a", buffering=1, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        log.debug("the executor JVM's stdout cannot be opened (%s); printing goes to Spark's stderr", exc)
        return None


@contextlib.contextmanager
def printing_to_the_executors_stdout() -> Iterator[None]:
    """``sys.stdout`` is the executor JVM's stdout inside the block (see the module's docstring)."""
    stream = _open_executor_stdout()
    if stream is None:
        yield
        return
    previous = sys.stdout
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = previous
        with contextlib.suppress(OSError):
            stream.close()
