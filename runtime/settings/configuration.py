"""``Configuration``: PyFlink's key-value settings, read with Flink's option keys.

A program that configures its job the Flink way (``Configuration`` with Flink's keys, passed to
``StreamExecutionEnvironment.get_execution_environment(config)`` or ``env.configure(config)``) gets the same
settings here. Values are text; the typed getters parse them with the parsers every setting uses
(:mod:`runtime.settings.parsers`). What each key means is declared in :mod:`runtime.settings.options`.

>>> config = Configuration()
>>> config.set_string("execution.checkpointing.interval", "10 s").set_integer("parallelism.default", 4)
Configuration({'execution.checkpointing.interval': '10 s', 'parallelism.default': '4'})
>>> config.get_integer("parallelism.default", 1), config.get_string("missing", "default")
(4, 'default')
>>> config.get_boolean("pipeline.object-reuse", False)
False
"""

from __future__ import annotations

from runtime.errors import ConfigurationError
from runtime.settings.parsers import parse_boolean, parse_int

__all__ = ["Configuration"]


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
        value = self._values.get(key)
        return default_value if value is None else parse_int(value, key)

    def set_float(self, key: str, value: float) -> "Configuration":
        return self.set_string(key, repr(float(value)))

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        value = self._values.get(key)
        if value is None:
            return default_value
        try:
            return float(value)
        except ValueError:
            raise ConfigurationError(f"{key} = {value!r} is not a number.") from None

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        return self.set_string(key, "true" if value else "false")

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        value = self._values.get(key)
        return default_value if value is None else parse_boolean(value, key)

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
