"""PyFlink's ``pyflink.datastream.window``: windows, assigners, triggers and evictors (defined in
:mod:`operators.window`).

>>> from runtime.datastream.window import TumblingEventTimeWindows, TimeWindow
>>> from runtime.common import Time
>>> TumblingEventTimeWindows.of(Time.seconds(10)).assign_windows(None, 12_345, None)
[TimeWindow(start=10000, end=20000)]
"""

from operators import window as _window
from operators.window import *  # noqa: F403 (the names of operators.window.__all__)

# operators.window's names, less those that only the engine and tests use: the parts of a count window, the merging
# of session windows, and a trigger context for tests
_ENGINE_PARTS = ("count_window_parts", "MergingWindowSet", "InMemoryTriggerContext")
__all__ = [name for name in _window.__all__ if name not in _ENGINE_PARTS]
