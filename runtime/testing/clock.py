"""The harness's processing time: a clock the test sets, read where the operator would read the wall clock.

A subtask fires processing-time timers when the wall clock reaches them; a harness fires them when the test
moves this clock (``set_processing_time``). It is the operator's ``SubtaskInfo.clock``, which timer services,
window contexts and triggers read, and the heap backend's, so state with a time-to-live expires on it too.

>>> clock = ManualClock()
>>> clock.set(1_000); clock.now_ms()
1000
>>> clock.set(500)
Traceback (most recent call last):
    ...
runtime.testing.errors.HarnessError: set_processing_time(500): processing time is 1000 and moves forward only ...
"""

from __future__ import annotations

from runtime.testing.errors import HarnessError

__all__ = ["ManualClock"]


class ManualClock:
    """Processing time in epoch milliseconds, starting at ``start_ms`` and moved only by :meth:`set`.

    >>> clock = ManualClock(start_ms=10)
    >>> clock.now_ms(), clock.set(25), clock.now_ms()
    (10, None, 25)
    """

    def __init__(self, start_ms: int = 0):
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def set(self, now_ms: int) -> None:
        """Move the clock to ``now_ms``: timers already fired cannot fire again, so time never goes back."""
        if type(now_ms) is not int:
            raise HarnessError(f"set_processing_time({now_ms!r}): processing time is an int of epoch milliseconds.")
        if now_ms < self._now_ms:
            raise HarnessError(f"set_processing_time({now_ms}): processing time is {self._now_ms} and moves forward "
                               "only (timers up to it have fired). Build a new harness to start over at an earlier "
                               "time.")
        self._now_ms = now_ms
