"""Seconds spent waiting, a wait going on included: back pressure that shows while a stall lasts.

Written by the one thread that waits (``start``/``stop`` around its wait), read by the slot's metrics reporter
(``seconds``) without a lock: two float attributes, each read whole under the GIL.

>>> clock = iter([10.0, 12.5, 13.0, 20.0]).__next__
>>> timer = WaitTimer(clock)
>>> timer.start(); timer.seconds()  # 2.5 s into a wait
2.5
>>> timer.stop(); timer.seconds()  # it lasted 3 s
3.0
"""

from __future__ import annotations

import time

__all__ = ["WaitTimer"]


class WaitTimer:
    __slots__ = ("_total", "_since", "_clock")

    def __init__(self, clock=time.monotonic):
        self._total = 0.0
        self._since = 0.0  # the clock's value when the wait going on began (0: none goes on)
        self._clock = clock

    def start(self) -> None:
        self._since = self._clock()

    def stop(self) -> None:
        self._total += self._clock() - self._since
        self._since = 0.0

    def seconds(self) -> float:
        since = self._since
        return self._total + (self._clock() - since if since else 0.0)
