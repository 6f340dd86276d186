"""What a benchmark ran on: stated in every result, since numbers mean nothing without it."""

from __future__ import annotations

import os
import platform


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
