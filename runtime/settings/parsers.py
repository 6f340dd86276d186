"""One parser per kind of setting: booleans, durations, memory sizes, whole numbers, ports.

Every setting and every API argument of these kinds goes through them, so that a value means the same wherever
it is written (a ``Configuration`` key, a Spark conf, an argument of ``enable_checkpointing``), and a value that
does not parse is a :class:`~runtime.errors.SettingValueError` naming the key, the value and what is accepted.

>>> parse_boolean("Yes", "spark.chandy.progress"), parse_boolean("0", "spark.chandy.progress")
(True, False)
>>> parse_duration_ms("10 s", "heartbeat.timeout"), parse_duration_ms("1min", "x"), parse_duration_ms(250, "x")
(10000, 60000, 250)
>>> parse_memory_size("64 mb", "part size"), parse_memory_size("1g", "x"), parse_memory_size(4096, "x")
(67108864, 1073741824, 4096)
"""

from __future__ import annotations

import re
from datetime import timedelta

from runtime.errors import SettingValueError
from runtime.settings.durations import Duration, Time

__all__ = ["parse_boolean", "parse_duration_ms", "parse_memory_size", "parse_int", "parse_port", "parse_string",
           "BOOLEAN_ACCEPTED", "DURATION_ACCEPTED", "MEMORY_SIZE_ACCEPTED"]

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
BOOLEAN_ACCEPTED = "true or false (yes/no, on/off and 1/0 work too, in any case)"


def parse_boolean(value, key: str) -> bool:
    """A boolean as Spark's and Flink's users write one: true/false, yes/no, on/off, 1/0, in any case.

    >>> [parse_boolean(text, "k") for text in ("TRUE", "off", "On", "no", True)]
    [True, False, True, False, True]
    >>> parse_boolean("ture", "spark.chandy.network.encryption")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: spark.chandy.network.encryption = 'ture' is not a boolean: write true or false (yes/no, on/off and 1/0 work too, in any case).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)):
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise SettingValueError(f"{key} = {value!r} is not a boolean: write {BOOLEAN_ACCEPTED}.")


_MS_PER_UNIT = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_NUMBER_AND_UNIT = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([a-zA-Zµ]*)\s*$")
DURATION_ACCEPTED = ("a number and a unit as Flink writes them ('10 s', '500 ms', '1 min', '2 h'), a Duration, a Time, "
                     "a timedelta, or a number of milliseconds")


def parse_duration_ms(value, key: str = "a span of time", *, negative: bool = False, fractional: bool = False,
                      bare_unit: str = "ms") -> int | float:
    """Milliseconds of a span of time: Flink's duration strings (``"10 s"``, ``"500ms"``, ``"1 min"``, ``"2 h"``),
    a :class:`Duration`, a :class:`Time`, a ``datetime.timedelta``, or a plain number (of ``bare_unit``,
    milliseconds unless the key says otherwise, as ``spark.chandy.slotWaitSeconds`` does).

    ``negative``: whether a span below zero is allowed (a window offset, an interval-join bound).
    ``fractional``: whether a part of a millisecond is kept (restart delays); otherwise a number must be whole
    and sub-millisecond parts of a Duration or timedelta are dropped.

    >>> parse_duration_ms("1500", "k"), parse_duration_ms(" 3 seconds ", "k"), parse_duration_ms(Time.hours(1), "k")
    (1500, 3000, 3600000)
    >>> parse_duration_ms(timedelta(seconds=2), "k"), parse_duration_ms(Duration.of_millis(5), "k")
    (2000, 5)
    >>> parse_duration_ms("90", "spark.chandy.slotWaitSeconds", bare_unit="s")
    90000
    >>> parse_duration_ms(-5, "offset", negative=True), parse_duration_ms(0.5, "delay", fractional=True)
    (-5, 0.5)
    >>> parse_duration_ms("10 parsecs", "execution.checkpointing.interval")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: execution.checkpointing.interval = '10 parsecs' is not a duration: write a number and a unit as Flink writes them ('10 s', '500 ms', '1 min', '2 h'), a Duration, a Time, a timedelta, or a number of milliseconds.
    >>> parse_duration_ms(-1, "set_auto_watermark_interval")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: set_auto_watermark_interval = -1 is negative: a span of time here must be 0 or more.
    """
    if isinstance(value, (Duration, Time)):
        millis = value.to_milliseconds() if not fractional or isinstance(value, Time) else value.to_nanos() / 1e6
    elif isinstance(value, timedelta):
        millis = value / timedelta(milliseconds=1)
        millis = millis if fractional and not millis.is_integer() else int(millis)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        millis = _whole(value * _MS_PER_UNIT[bare_unit], value, key, fractional)
    elif isinstance(value, str):
        match = _NUMBER_AND_UNIT.match(value)
        unit = match.group(2).lower() if match else ""
        if match is None or (unit and unit not in _MS_PER_UNIT):
            raise SettingValueError(f"{key} = {value!r} is not a duration: write {DURATION_ACCEPTED}.")
        number = float(match.group(1)) if "." in match.group(1) else int(match.group(1))
        millis = _whole(number * _MS_PER_UNIT[unit or bare_unit], value, key, fractional)
    else:
        raise SettingValueError(f"{key} = {value!r} is not a duration: write {DURATION_ACCEPTED}.")
    if millis < 0 and not negative:
        raise SettingValueError(f"{key} = {value!r} is negative: a span of time here must be 0 or more.")
    return millis


def _whole(millis: float, value, key: str, fractional: bool) -> int | float:
    if fractional or float(millis).is_integer():
        return int(millis) if float(millis).is_integer() else millis
    raise SettingValueError(f"{key} = {value!r} is not a whole number of milliseconds: write {DURATION_ACCEPTED}.")


_BYTES_PER_UNIT = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "tebibytes": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")
MEMORY_SIZE_ACCEPTED = ("a number and a unit as Flink writes them ('64 mb', '1g', '512 kb'; units of 1024), or a "
                        "number of bytes")


def parse_memory_size(value, key: str) -> int:
    """Bytes of a memory size as Flink writes one (``"64 mb"``, ``"1g"``, ``"512kb"``: Flink's ``MemorySize``,
    where every unit is a power of 1024), or a whole number of bytes.

    >>> parse_memory_size("128 MB", "k"), parse_memory_size("2 kibibytes", "k"), parse_memory_size("100", "k")
    (134217728, 2048, 100)
    >>> parse_memory_size("lots", "part_size")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: part_size = 'lots' is not a memory size: write a number and a unit as Flink writes them ('64 mb', '1g', '512 kb'; units of 1024), or a number of bytes.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise SettingValueError(f"{key} = {value!r} is negative: a memory size is 0 bytes or more.")
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match and match.group(2).lower() in _BYTES_PER_UNIT:
            return int(match.group(1)) * _BYTES_PER_UNIT[match.group(2).lower()]
    raise SettingValueError(f"{key} = {value!r} is not a memory size: write {MEMORY_SIZE_ACCEPTED}.")


def parse_int(value, key: str) -> int:
    """A whole number, from an int or its decimal text.

    >>> parse_int(" 4 ", "parallelism.default"), parse_int(7, "k")
    (4, 7)
    >>> parse_int("many", "parallelism.default")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: parallelism.default = 'many' is not an integer: write a whole number.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise SettingValueError(f"{key} = {value!r} is not an integer: write a whole number.") from None


def parse_port(value, key: str) -> int:
    """A TCP port to listen on, 0..65535 (0: any free port).

    >>> parse_port("9091", "rest.port")
    9091
    >>> parse_port("70000", "rest.port")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: rest.port = '70000' is not a port number: write a port number, 0..65535 (0: any free port).
    """
    try:
        port = parse_int(value, key)
    except SettingValueError:
        port = -1
    if not 0 <= port < 65536:
        raise SettingValueError(f"{key} = {value!r} is not a port number: write a port number, 0..65535 (0: any "
                                "free port).")
    return port


def parse_string(value, key: str) -> str | None:
    """Text as given, surrounding spaces removed; empty text is no value.

    >>> parse_string(" /mnt/fast ", "state.backend.rocksdb.localdir"), parse_string("", "k")
    ('/mnt/fast', None)
    """
    text = str(value).strip()
    return text or None
