"""Checks of the arguments of window assigners, triggers and evictors, made where the job is declared.

>>> from runtime.settings.durations import Time
>>> span_millis(Time.seconds(2), "TumblingEventTimeWindows.of", "size"), span_millis(-5, "of", "offset")
(2000, -5)
>>> positive_count(0, "CountTrigger.of", "count")
Traceback (most recent call last):
...
runtime.errors.ApiUsageError: CountTrigger.of(0): the count must be a whole number of at least 1.
"""

from __future__ import annotations

from typing import Any

from runtime.errors import ApiUsageError
from runtime.settings.parsers import parse_duration_ms

__all__ = ["span_millis", "positive_span", "positive_count", "NO_TIMESTAMP_MESSAGE"]

NO_TIMESTAMP_MESSAGE = ("record has no timestamp: call assign_timestamps_and_watermarks(...) or use "
                        "from_source(source, watermark_strategy, name) before an event-time window, or use a "
                        "processing-time window")


def span_millis(value: Any, where: str, what: str) -> int:
    """Milliseconds of a span of time (a ``Time``, a ``Duration``, a ``timedelta``, a whole number of
    milliseconds or a duration string), which may be negative: offsets are; the caller checks the range."""
    return parse_duration_ms(value, f"{where}({what})", negative=True)


def positive_span(value: Any, where: str, what: str) -> int:
    millis = span_millis(value, where, what)
    if millis <= 0:
        raise ApiUsageError(f"{where}(...): the {what} must be positive, got {millis} ms. Pass a span of at "
                            f"least one millisecond, e.g. Time.seconds(10).")
    return millis


def positive_count(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ApiUsageError(f"{where}({value!r}): the {what} must be a whole number of at least 1.")
    return value
