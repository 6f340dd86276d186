"""Pinning a slot's Python worker to one CPU while the slot runs (``spark.chandy.cpuAffinity``).

A Python worker computes on one core at a time (its interpreter lock), however many threads it has. Left alone,
Linux wakes a thread on or near the core of the thread that woke it: a channel's reader woken by another slot's
data, a subtask woken by a batch. So a worker's threads can queue on a core where another worker computes while
their own core idles, until the scheduler's balancing moves them apart. On the 2-core benchmark machine the
windowed reference job's cores idled 6.6% of its run unpinned and 1.1% pinned (medians of six alternated rounds),
and it ran 6% faster pinned.

Pinned, the threads a worker starts during the slot (RocksDB's, Arrow's) share its core too. That costs nothing
when every core runs a slot anyway, and would waste idle cores otherwise: so ``auto`` pins only when the job's
slots on an executor are exactly as many as the CPUs the executor may use. At the end of the slot every thread
of the worker gets the CPUs the worker had before back: Spark reuses a worker for later tasks.

>>> cpu_for_slot("auto", rank=1, colocated=2, allowed={0, 1})  # two slots, two CPUs: one each
1
>>> cpu_for_slot("auto", rank=0, colocated=2, allowed={0, 1, 2, 3}) is None  # spare CPUs: left to Linux
True
>>> cpu_for_slot("on", rank=5, colocated=8, allowed={2, 3}), cpu_for_slot("off", 0, 2, {0, 1})
(3, None)
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterable

__all__ = ["cpu_for_slot", "pinned_to", "allowed_cpus"]

log = logging.getLogger(__name__)

_TASKS = "/proc/self/task"


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on; empty where the platform cannot pin (not Linux)."""
    if not hasattr(os, "sched_getaffinity") or not os.path.isdir(_TASKS):
        return set()
    return set(os.sched_getaffinity(0))


def cpu_for_slot(policy: str, rank: int, colocated: int, allowed: Iterable[int]) -> int | None:
    """The CPU to pin the slot to, or None to leave it unpinned. ``rank``: the slot's place among the job's
    ``colocated`` slots on its executor (0 first); ``allowed``: the CPUs the executor's worker may use."""
    cpus = sorted(allowed)
    if policy == "off" or not cpus or (policy == "auto" and colocated != len(cpus)):
        return None
    return cpus[rank % len(cpus)]


@contextlib.contextmanager
def pinned_to(cpu: int | None):
    """Every thread of this process on ``cpu`` while the block runs (threads started meanwhile inherit it), then
    every thread back on the CPUs the process had. None: nothing changes."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    _set_every_thread({cpu})
    log.debug("Slot pinned to CPU %d (of %s)", cpu, sorted(before))
    try:
        yield
    finally:
        _set_every_thread(before)


def _set_every_thread(cpus: set[int]) -> None:
    for thread in os.listdir(_TASKS):
        try:
            os.sched_setaffinity(int(thread), cpus)
        except OSError:  # the thread ended since the listing
            pass
