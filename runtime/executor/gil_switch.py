"""How often a busy thread of an executor's Python worker hands the GIL to a waiting one.

CPython makes a thread that waits for the GIL wait up to the switch interval (5 ms by default) while another
thread computes. A slot's threads take turns all the time: a subtask's output and its control thread each wait once
per socket call, a lookup of queryable state crosses four threads. A shorter interval cuts those waits, at the
cost of more switches between the busy subtask threads.

>>> import sys
>>> before = sys.getswitchinterval()
>>> with switch_interval(0.5):
...     sys.getswitchinterval()
0.0005
>>> sys.getswitchinterval() == before
True
>>> with switch_interval(None):       # None: the process's own interval stands
...     sys.getswitchinterval() == before
True
"""

from __future__ import annotations

import contextlib
import sys

__all__ = ["switch_interval"]


@contextlib.contextmanager
def switch_interval(milliseconds: float | None):
    """Run the block with the GIL's switch interval at ``milliseconds``, then put the process's back (a Python
    worker runs one task at a time, and Spark reuses it for the next task); None leaves it as it is."""
    if milliseconds is None:
        yield
        return
    before = sys.getswitchinterval()
    sys.setswitchinterval(milliseconds / 1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
