"""What a benchmark ran on: stated in every result, since numbers mean nothing without it."""

from __future__ import annotations

import os
import platform
import time

_LOOP = 2_000_000


def describe_machine() -> dict:
    import pyarrow
    import pyspark

    memory_gib = None
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
            memory_gib = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "platform": platform.platform(),
    }


def cpu_steadiness(samples: int = 8) -> dict:
    """How long one fixed single-threaded Python loop takes, ``samples`` times: the spread says how steady
    the machine was (a shared VM's varies by 2x at times, and every rate measured then with it).

    >>> row = cpu_steadiness(2); row["loop_ms_min"] <= row["loop_ms_max"]
    True
    """
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        total = 0
        for i in range(_LOOP):
            total += i
        times.append((time.perf_counter() - started) * 1000)
    return {"loop_ms_min": round(min(times), 1), "loop_ms_max": round(max(times), 1)}


def steadied(run) -> dict:
    """``run()``'s row of results, with the machine's steadiness just before and just after it
    (``steadiness_before``, ``steadiness_after``: :func:`cpu_steadiness` of 4 samples).

    >>> sorted(steadied(lambda: {"rate": 1}))
    ['rate', 'steadiness_after', 'steadiness_before']
    """
    before = cpu_steadiness(4)
    row = run()
    row["steadiness_before"], row["steadiness_after"] = before, cpu_steadiness(4)
    return row


def job_cpu_seconds() -> float:
    """CPU seconds used so far by this process (the driver) and every PySpark Python worker and daemon on the
    machine, with their children that ended (a daemon reaps the workers it forked)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(os.times()[:2])
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
            if b"pyspark.daemon" not in command and b"pyspark.worker" not in command:
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        total += sum(int(value) for value in fields[11:15]) / ticks  # utime, stime, cutime, cstime
    return total
