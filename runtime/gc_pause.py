"""Keeping Python's cyclic garbage collector out of short critical sections, and off what lives for a whole run.

A full collection walks every tracked object, so with a large state it takes far longer than the
synchronous part of a snapshot; paused there, it runs a moment later, after the barrier has gone out.

>>> import gc
>>> with gc_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True

A worker's modules, a job's operators and the state they restored stay until the slot ends, yet every full
collection walked them all again (100,000 objects in a worker with nothing restored: 150-220 ms with the
machine busy, every record in flight waiting). :func:`long_lived_frozen` freezes them once they exist: collections
run as before, over what the run itself makes.

>>> with long_lived_frozen() as heap:
...     kept = [[]]
...     heap.freeze()
...     gc.get_freeze_count() >= 1
True
>>> gc.get_freeze_count()
0

Records are short-lived container objects, made by the thousand per batch and freed when the batch has gone on.
A young collection in the middle of a batch walks the batch in flight, finds it alive, and moves it to the
middle generation, which the next collection of that generation walks again; after the batch, the same collection
walks next to nothing. :func:`young_collections_between_batches` lets a subtask raise the young generation's
threshold while it processes a batch and put it back after: the collection the batch's allocations called for
comes at its end (at the next allocation), over what outlived it. The raised threshold stays a bound: a batch
whose functions leave cycles behind by the hundred thousand is still collected within it. The subtasks of one
worker share the thresholds: one that finishes a batch while another is in one lowers it for both, and the
collection comes at the end of the first one's batch.

>>> before = gc.get_threshold()
>>> with young_collections_between_batches() as young:
...     gc.set_threshold(young.within)    # a batch starts
...     during = gc.get_threshold()[0]
...     gc.set_threshold(young.between)   # it has gone on
...     during == 100 * before[0], gc.get_threshold() == before
(True, True)
>>> gc.get_threshold() == before
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc

__all__ = ["YoungThresholds", "gc_paused", "long_lived_frozen", "young_collections_between_batches"]

# How much higher the young generation's threshold is while a batch is processed: out of a batch's way (in the
# latency job at 1M records/s, no collection ran at it), a bound on one whose functions leave cycles behind.
BATCH_YOUNG_FACTOR = 100


@contextlib.contextmanager
def gc_paused():
    """Run the block without automatic collections (nesting and already-disabled GC are respected)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Freezer:
    def freeze(self) -> None:
        """Move every object tracked now out of the collector's reach until the block ends."""
        gc.freeze()


@contextlib.contextmanager
def long_lived_frozen():
    """Run the block, which calls ``freeze()`` on what this yields once its long-lived objects exist; at its end
    everything frozen is collectable again (Spark reuses the worker for other tasks). Nothing is collected
    first: a worker holds next to no cyclic garbage between tasks (a full collection at a slot's start found none,
    and took 110-320 ms of its start)."""
    try:
        yield _Freezer()
    finally:
        gc.unfreeze()


@dataclasses.dataclass(frozen=True)
class YoungThresholds:
    """The young generation's threshold while a batch is processed, and between batches (the process's own)."""

    within: int
    between: int


@contextlib.contextmanager
def young_collections_between_batches(factor: int = BATCH_YOUNG_FACTOR):
    """Yield the :class:`YoungThresholds` for the process's threshold now; at the block's end put every
    generation's threshold back as it was (whatever a batch left). A process whose automatic collections are off
    (a threshold of 0) keeps them off: both thresholds are 0."""
    before = gc.get_threshold()
    try:
        yield YoungThresholds(within=before[0] * factor, between=before[0])
    finally:
        gc.set_threshold(*before)
