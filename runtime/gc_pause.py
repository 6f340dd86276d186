"""Keeping Python's cyclic garbage collector out of short critical sections.

A full collection walks every tracked object, so with a large state it takes far longer than the
synchronous part of a snapshot; paused there, it runs a moment later, after the barrier has gone out.

>>> import gc
>>> with gc_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc

__all__ = ["gc_paused"]


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
