"""``Configuration``: PyFlink's key-value settings, and the Flink option keys Chandy understands.

A program that configures its job the Flink way (``Configuration`` with Flink's keys, passed to
``StreamExecutionEnvironment.get_execution_environment(config)`` or ``env.configure(config)``) gets the same
settings here. Durations are written as Flink writes them (``"10 s"``, ``"1 min"``, ``"500ms"``, a bare
number of milliseconds). Keys Chandy does not use are named in one WARNING, not silently dropped.

>>> config = Configuration()
>>> config.set_string("execution.checkpointing.interval", "10 s").set_integer("parallelism.default", 4)
Configuration({'execution.checkpointing.interval': '10 s', 'parallelism.default': '4'})
>>> config.get_integer("parallelism.default", 1), config.get_string("missing", "default")
(4, 'default')
>>> parse_duration_ms("1 min"), parse_duration_ms("250ms"), parse_duration_ms("1500")
(60000, 250, 1500)
"""

from __future__ import annotations

import re

from runtime.errors import ConfigurationError

__all__ = ["Configuration", "parse_duration_ms", "parse_boolean"]

_UNITS_MS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000, "m": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_duration_ms(text, key: str = "a duration") -> int:
    """Milliseconds of a duration written as Flink writes them: ``"10 s"``, ``"1min"``, ``"250 ms"``, ``"2 h"``,
    or a number of milliseconds."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = _DURATION.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or (unit and unit not in _UNITS_MS):
        raise ConfigurationError(f"{key} = {text!r} is not a duration: write a number and a unit, like '10 s', "
                                 "'500 ms', '1 min' or '2 h' (a bare number is milliseconds).")
    return int(match.group(1)) * _UNITS_MS.get(unit or "ms")


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def parse_boolean(text, key: str) -> bool:
    """A boolean setting as Spark's and Flink's users write one (``true/false``, ``yes/no``, ``on/off``, ``1/0``, in
    any case); anything else is a ConfigurationError naming ``key``, never silently false.

    >>> parse_boolean("Yes", "spark.chandy.network.encryption"), parse_boolean(False, "x")
    (True, False)
    >>> parse_boolean("ture", "spark.chandy.network.encryption")
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: spark.chandy.network.encryption = 'ture' is not a boolean: write true or false (yes/no, on/off and 1/0 work too).
    """
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(f"{key} = {text!r} is not a boolean: write true or false (yes/no, on/off and 1/0 work "
                             "too).")


class Configuration:
    """String settings by key (PyFlink's ``Configuration``); the typed getters parse on read.

    >>> Configuration().set_boolean("pipeline.object-reuse", True).get_boolean("pipeline.object-reuse", False)
    True
    """

    def __init__(self, other: "Configuration | None" = None):
        self._values: dict[str, str] = dict(other._values) if other is not None else {}

    def set_string(self, key: str, value: str) -> "Configuration":
        self._values[key] = str(value)
        return self

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        return self._values.get(key, default_value)

    def set_integer(self, key: str, value: int) -> "Configuration":
        return self.set_string(key, str(int(value)))

    def get_integer(self, key: str, default_value: int = 0) -> int:
        return self._typed(key, default_value, int, "an integer")

    def set_float(self, key: str, value: float) -> "Configuration":
        return self.set_string(key, repr(float(value)))

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        return self._typed(key, default_value, float, "a number")

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        return self.set_string(key, "true" if value else "false")

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        value = self._values.get(key)
        return default_value if value is None else parse_boolean(value, key)

    def _typed(self, key: str, default, kind, what: str):
        value = self._values.get(key)
        if value is None:
            return default
        try:
            return kind(value)
        except ValueError:
            raise ConfigurationError(f"{key} = {value!r} is not {what}.") from None

    def contains_key(self, key: str) -> bool:
        return key in self._values

    def keys(self) -> set[str]:
        return set(self._values)

    def remove_config(self, key: str) -> bool:
        return self._values.pop(key, None) is not None

    def add_all(self, other: "Configuration", prefix: str = "") -> "Configuration":
        for key, value in other._values.items():
            self._values[prefix + key] = value
        return self

    def to_dict(self) -> dict[str, str]:
        return dict(self._values)

    def __eq__(self, other) -> bool:
        return isinstance(other, Configuration) and other._values == self._values

    def __repr__(self) -> str:
        return f"Configuration({self._values!r})"
