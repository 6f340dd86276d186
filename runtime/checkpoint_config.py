"""Checkpointing and restart settings, in PyFlink's names.

>>> config = CheckpointConfig()
>>> config.set_checkpoint_storage("memory://ck").set_checkpoint_timeout(60_000).get_checkpoint_storage()
'memory://ck'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from runtime.errors import ApiUsageError, ConfigurationError

__all__ = ["CheckpointingMode", "CheckpointConfig", "RestartStrategies", "RestartStrategy"]


class CheckpointingMode(Enum):
    """EXACTLY_ONCE aligns barriers across inputs; AT_LEAST_ONCE only counts them (no blocking).

    >>> CheckpointConfig().get_checkpointing_mode()
    <CheckpointingMode.EXACTLY_ONCE: 'EXACTLY_ONCE'>
    >>> CheckpointConfig().set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE).get_checkpointing_mode().name
    'AT_LEAST_ONCE'
    """

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


def _positive(name: str, value: float, minimum: float = 0) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be a number >= {minimum}, got {value!r}")
    return value


class CheckpointConfig:
    """Settings of a job's checkpoints. Get it from ``env.get_checkpoint_config()``.

    >>> config = CheckpointConfig()
    >>> config.is_checkpointing_enabled()
    False
    >>> config.set_checkpoint_interval(1000).set_max_retained_checkpoints(5).get_max_retained_checkpoints()
    5
    >>> config.is_checkpointing_enabled(), config.get_checkpoint_interval()
    (True, 1000)
    """

    def __init__(self):
        self.interval_ms: float | None = None
        self.mode = CheckpointingMode.EXACTLY_ONCE
        self.storage = "file://" + os.path.abspath("chandy-checkpoints")
        self.filesystem = None
        self.timeout_ms: float = 10 * 60 * 1000
        self.min_pause_ms: float = 0
        self.max_concurrent = 1
        self.tolerable_failures = 0
        self.retained = 3

    def is_checkpointing_enabled(self) -> bool:
        return self.interval_ms is not None

    def set_checkpoint_interval(self, interval_ms: float) -> "CheckpointConfig":
        self.interval_ms = _positive("checkpoint interval (ms)", interval_ms, 1)
        return self

    def get_checkpoint_interval(self) -> float | None:
        return self.interval_ms

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> "CheckpointConfig":
        if not isinstance(mode, CheckpointingMode):
            raise ApiUsageError(f"set_checkpointing_mode() expects a CheckpointingMode, got {mode!r}")
        self.mode = mode
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.mode

    def set_checkpoint_storage(self, url: str, filesystem=None) -> "CheckpointConfig":
        """Where checkpoints go: any fsspec URL (``file:///...``, ``s3://...``, ``memory://`` in one process).

        ``filesystem``: an fsspec filesystem instance to use for it (credentials, custom options); it is
        pickled to the executors.
        """
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"set_checkpoint_storage() expects a URL or a path, got {url!r}")
        self.storage = url if "://" in url else "file://" + os.path.abspath(url)
        self.filesystem = filesystem
        return self

    set_checkpoint_storage_dir = set_checkpoint_storage

    def get_checkpoint_storage(self) -> str:
        return self.storage

    def set_checkpoint_timeout(self, timeout_ms: float) -> "CheckpointConfig":
        """A checkpoint not acknowledged by every subtask within this time is aborted."""
        self.timeout_ms = _positive("checkpoint timeout (ms)", timeout_ms, 1)
        return self

    def get_checkpoint_timeout(self) -> float:
        return self.timeout_ms

    def set_min_pause_between_checkpoints(self, pause_ms: float) -> "CheckpointConfig":
        self.min_pause_ms = _positive("min pause (ms)", pause_ms)
        return self

    def get_min_pause_between_checkpoints(self) -> float:
        return self.min_pause_ms

    def set_max_concurrent_checkpoints(self, count: int) -> "CheckpointConfig":
        self.max_concurrent = int(_positive("max concurrent checkpoints", count, 1))
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self.max_concurrent

    def set_tolerable_checkpoint_failure_number(self, count: int) -> "CheckpointConfig":
        """Consecutive failed checkpoints tolerated before the job fails over (default 0)."""
        self.tolerable_failures = int(_positive("tolerable checkpoint failures", count))
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self.tolerable_failures

    def set_max_retained_checkpoints(self, count: int) -> "CheckpointConfig":
        """Completed checkpoints kept; older ones are deleted once a newer one is committed (default 3)."""
        self.retained = int(_positive("retained checkpoints", count, 1))
        return self

    def get_max_retained_checkpoints(self) -> int:
        return self.retained


@dataclass(frozen=True)
class RestartStrategy:
    """How often, and how long apart, a failed job is restarted from its latest checkpoint.

    >>> RestartStrategy(max_attempts=3, delay_ms=1000).max_attempts
    3
    """

    max_attempts: int
    delay_ms: float

    def __post_init__(self):
        _positive("restart attempts", self.max_attempts)
        _positive("restart delay (ms)", self.delay_ms)


class RestartStrategies:
    """Factories named as PyFlink's ``RestartStrategies``.

    >>> RestartStrategies.fixed_delay_restart(3, 1000)
    RestartStrategy(max_attempts=3, delay_ms=1000)
    >>> RestartStrategies.no_restart().max_attempts
    0
    """

    @staticmethod
    def no_restart() -> RestartStrategy:
        return RestartStrategy(0, 0)

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: float) -> RestartStrategy:
        """Restart up to ``restart_attempts`` times, ``delay_between_attempts`` ms apart."""
        return RestartStrategy(restart_attempts, delay_between_attempts)
