"""``Duration`` and ``Time``: spans of time as PyFlink names them, exact in milliseconds.

PyFlink has both: ``Duration`` (``pyflink.common.Duration``, Java's) for watermark strategies and timeouts,
``Time`` (``pyflink.common.time.Time``) for window sizes. Both are exact integers of milliseconds here;
``Duration`` keeps nanoseconds too, since Java's does. Everything in Chandy that takes a span of time takes
either, or a plain number of milliseconds, a ``timedelta`` or a duration string
(:func:`runtime.settings.parsers.parse_duration_ms` reads them all).

>>> Duration.of_seconds(5).to_milliseconds(), Time.minutes(1).to_milliseconds()
(5000, 60000)
>>> Duration.of_millis(1500) == Duration.of_seconds(1).plus(Duration.of_millis(500))
True
>>> Time.hours(-8)   # a negative span: a window offset, an interval-join bound (a size must be positive)
Time.milliseconds(-28800000)
>>> Duration.of_seconds(-1)
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: Duration.of_seconds(-1): a span of time must not be negative.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.errors import ConfigurationError

__all__ = ["Duration", "Time"]

_NANOS_PER_MILLI = 1_000_000


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time, exact to the nanosecond (PyFlink's ``Duration``).

    >>> Duration.of_seconds(5), Duration.of_minutes(2).to_milliseconds(), Duration.of_nanos(1500)
    (Duration.of_millis(5000), 120000, Duration.of_nanos(1500))
    """

    nanos: int

    @staticmethod
    def of_nanos(nanos: int) -> "Duration":
        return Duration(_whole(nanos, "Duration.of_nanos"))

    @staticmethod
    def of_millis(millis: int) -> "Duration":
        return Duration(_whole(millis, "Duration.of_millis") * _NANOS_PER_MILLI)

    @staticmethod
    def of_seconds(seconds: int) -> "Duration":
        return Duration(_whole(seconds, "Duration.of_seconds") * 1000 * _NANOS_PER_MILLI)

    @staticmethod
    def of_minutes(minutes: int) -> "Duration":
        return Duration(_whole(minutes, "Duration.of_minutes") * 60_000 * _NANOS_PER_MILLI)

    @staticmethod
    def of_hours(hours: int) -> "Duration":
        return Duration(_whole(hours, "Duration.of_hours") * 3_600_000 * _NANOS_PER_MILLI)

    @staticmethod
    def of_days(days: int) -> "Duration":
        return Duration(_whole(days, "Duration.of_days") * 86_400_000 * _NANOS_PER_MILLI)

    @staticmethod
    def zero() -> "Duration":
        return Duration(0)

    def plus(self, other: "Duration") -> "Duration":
        return Duration(self.nanos + other.nanos)

    def to_milliseconds(self) -> int:
        return self.nanos // _NANOS_PER_MILLI

    def to_nanos(self) -> int:
        return self.nanos

    def __repr__(self) -> str:
        return f"Duration.of_millis({self.to_milliseconds()})" if self.nanos % _NANOS_PER_MILLI == 0 \
            else f"Duration.of_nanos({self.nanos})"


@dataclass(frozen=True, order=True)
class Time:
    """A span of time in milliseconds, for window sizes (PyFlink's ``Time``). Negative spans are allowed, as in
    Flink, for window offsets and interval-join bounds (``Time.hours(-8)``); a size must still be positive.

    >>> Time.seconds(10), Time.hours(1).to_milliseconds()
    (Time.milliseconds(10000), 3600000)
    """

    millis: int

    @staticmethod
    def milliseconds(milliseconds: int) -> "Time":
        return Time(_whole(milliseconds, "Time.milliseconds", signed=True))

    @staticmethod
    def seconds(seconds: int) -> "Time":
        return Time(_whole(seconds, "Time.seconds", signed=True) * 1000)

    @staticmethod
    def minutes(minutes: int) -> "Time":
        return Time(_whole(minutes, "Time.minutes", signed=True) * 60_000)

    @staticmethod
    def hours(hours: int) -> "Time":
        return Time(_whole(hours, "Time.hours", signed=True) * 3_600_000)

    @staticmethod
    def days(days: int) -> "Time":
        return Time(_whole(days, "Time.days", signed=True) * 86_400_000)

    def to_milliseconds(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        return f"Time.milliseconds({self.millis})"


def _whole(value, where: str, signed: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigurationError(f"{where}({value!r}): a span of time is a whole number (of the unit named).")
    if value < 0 and not signed:
        raise ConfigurationError(f"{where}({value!r}): a span of time must not be negative.")
    return value

