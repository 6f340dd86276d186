"""Checkpointing and restart settings, in PyFlink's names.

>>> config = CheckpointConfig()
>>> config.set_checkpoint_storage("memory://ck").set_checkpoint_timeout(60_000).get_checkpoint_storage()
'memory://ck'
"""

from __future__ import annotations

import logging
import os
from enum import Enum

from runtime.settings.durations import Duration
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.settings.parsers import parse_duration_ms
from runtime.restart_strategies import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartStrategy,
)

__all__ = ["CheckpointingMode", "CheckpointConfig", "ExternalizedCheckpointCleanup", "RestartStrategies",
           "RestartStrategy", "FallbackRestartStrategy"]

log = logging.getLogger(__name__)


class CheckpointingMode(Enum):
    """EXACTLY_ONCE aligns barriers across inputs; AT_LEAST_ONCE only counts them (no blocking).

    >>> CheckpointConfig().get_checkpointing_mode()
    <CheckpointingMode.EXACTLY_ONCE: 'EXACTLY_ONCE'>
    >>> CheckpointConfig().set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE).get_checkpointing_mode().name
    'AT_LEAST_ONCE'
    """

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class ExternalizedCheckpointCleanup(Enum):
    """What happens to a job's checkpoints when it ends (PyFlink's ``ExternalizedCheckpointCleanup``, Flink 2's
    ``ExternalizedCheckpointRetention``). ``RETAIN_ON_CANCELLATION`` (the default, as in Flink 2): they stay,
    whatever the ending, so a cancelled or failed job can be restored. ``DELETE_ON_CANCELLATION``: deleted when
    the job is cancelled, kept when it fails or finishes. ``NO_EXTERNALIZED_CHECKPOINTS``: deleted whenever
    the job ends; they only serve its own restarts. Only the checkpoints of the ending run are deleted, never
    the one it was restored from, and never a savepoint.

    >>> ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION.value
    'RETAIN_ON_CANCELLATION'
    >>> ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION.deletes_when("CANCELED")
    True
    >>> ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION.deletes_when("FAILED")
    False
    """

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"

    def deletes_when(self, status: str) -> bool:
        """Whether a job ending with ``status`` (a JobStatus name) deletes its checkpoints."""
        if self is ExternalizedCheckpointCleanup.NO_EXTERNALIZED_CHECKPOINTS:
            return True
        return self is ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION and status == "CANCELED"


ExternalizedCheckpointRetention = ExternalizedCheckpointCleanup


def _span(name: str, value, minimum: float = 0) -> float:
    """Milliseconds of a span given as milliseconds, a ``Duration``, a ``timedelta`` or a duration string."""
    millis = parse_duration_ms(value, name, fractional=True)
    if millis < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum} ms, got {value!r}")
    return millis


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
        self.externalized = ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION
        self.savepoint_directory: str | None = None  # None: <checkpoint storage>/<job>/savepoints
        self.unaligned = False
        self.aligned_timeout_ms = 0  # with unaligned: start aligned, switch after this long (0: unaligned at once)
        self.force_unaligned = False

    def is_checkpointing_enabled(self) -> bool:
        return self.interval_ms is not None

    def set_checkpoint_interval(self, interval_ms: float) -> "CheckpointConfig":
        self.interval_ms = _span("checkpoint interval", interval_ms, 1)
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

    def set_checkpoint_storage(self, url, filesystem=None) -> "CheckpointConfig":
        """Where checkpoints go: any fsspec URL (``file:///...``, ``s3://...``, ``memory://`` in one process), or
        a ``FileSystemCheckpointStorage`` / ``JobManagerCheckpointStorage`` object (PyFlink's form).

        ``filesystem``: an fsspec filesystem instance to use for it (credentials, custom options); it is
        pickled to the executors.
        """
        url = getattr(url, "url", url)  # runtime.datastream.checkpoint_storage objects
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"set_checkpoint_storage() expects a URL or a path, got {url!r}")
        self.storage = url if "://" in url else "file://" + os.path.abspath(url)
        self.filesystem = filesystem
        return self

    set_checkpoint_storage_dir = set_checkpoint_storage

    def get_checkpoint_storage(self) -> str:
        return self.storage

    def set_default_savepoint_directory(self, url: str) -> "CheckpointConfig":
        """Where ``trigger_savepoint()`` and ``stop_with_savepoint()`` put savepoints when not given a path
        (Flink's ``execution.checkpointing.savepoint-dir``); by default ``<checkpoint storage>/<job>/savepoints``.

        >>> config = CheckpointConfig().set_default_savepoint_directory("s3://bucket/savepoints")
        >>> config.get_default_savepoint_directory()
        's3://bucket/savepoints'
        """
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"set_default_savepoint_directory() expects a URL or a path, got {url!r}")
        self.savepoint_directory = url if "://" in url else "file://" + os.path.abspath(url)
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return self.savepoint_directory

    def set_checkpoint_timeout(self, timeout_ms: float) -> "CheckpointConfig":
        """A checkpoint not acknowledged by every subtask within this time is aborted."""
        self.timeout_ms = _span("checkpoint timeout", timeout_ms, 1)
        return self

    def get_checkpoint_timeout(self) -> float:
        return self.timeout_ms

    def set_min_pause_between_checkpoints(self, pause_ms: float) -> "CheckpointConfig":
        self.min_pause_ms = _span("min pause between checkpoints", pause_ms)
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

    def enable_externalized_checkpoints(self, cleanup_mode: "ExternalizedCheckpointCleanup") -> "CheckpointConfig":
        """What happens to the job's checkpoints when it ends (see :class:`ExternalizedCheckpointCleanup`):
        ``RETAIN_ON_CANCELLATION`` by default; ``DELETE_ON_CANCELLATION`` deletes them when it is cancelled;
        ``NO_EXTERNALIZED_CHECKPOINTS`` whenever it ends.

        >>> CheckpointConfig().enable_externalized_checkpoints(
        ...     ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION).get_externalized_checkpoint_cleanup().name
        'DELETE_ON_CANCELLATION'
        """
        if not isinstance(cleanup_mode, ExternalizedCheckpointCleanup):
            raise ApiUsageError(f"expected an ExternalizedCheckpointCleanup, got {cleanup_mode!r}")
        self.externalized = cleanup_mode
        return self

    set_externalized_checkpoint_cleanup = set_externalized_checkpoint_retention = enable_externalized_checkpoints

    def get_externalized_checkpoint_cleanup(self) -> "ExternalizedCheckpointCleanup":
        return self.externalized

    get_externalized_checkpoint_retention = get_externalized_checkpoint_cleanup

    def is_externalized_checkpoints_enabled(self) -> bool:
        return True

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        """Unaligned checkpoints (EXACTLY_ONCE only): a subtask snapshots at the first barrier, which overtakes the
        records queued in its input, and stores the records in flight as channel state. Checkpoints then take
        about as long under backpressure as without it, at the cost of storing those records.

        >>> config = CheckpointConfig().enable_unaligned_checkpoints()
        >>> config.is_unaligned_checkpoints_enabled(), config.get_aligned_checkpoint_timeout()
        (True, Duration.of_millis(0))
        """
        self.unaligned = bool(enabled)
        return self

    def disable_unaligned_checkpoints(self) -> "CheckpointConfig":
        return self.enable_unaligned_checkpoints(False)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self.unaligned

    def set_aligned_checkpoint_timeout(self, alignment_timeout) -> "CheckpointConfig":
        """With unaligned checkpoints enabled: start each checkpoint aligned, and switch a subtask to unaligned
        when its barrier comes later than this after the trigger (Flink's aligned checkpoint timeout; a
        ``Duration``, ``timedelta`` or milliseconds; 0, the default: unaligned from the start).

        >>> from runtime.settings.durations import Duration
        >>> CheckpointConfig().set_aligned_checkpoint_timeout(Duration.of_seconds(2)).get_aligned_checkpoint_timeout()
        Duration.of_millis(2000)
        """
        self.aligned_timeout_ms = parse_duration_ms(alignment_timeout, "set_aligned_checkpoint_timeout")
        return self

    set_alignment_timeout = set_aligned_checkpoint_timeout

    def get_aligned_checkpoint_timeout(self) -> Duration:
        return Duration.of_millis(self.aligned_timeout_ms)

    get_alignment_timeout = get_aligned_checkpoint_timeout

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> "CheckpointConfig":
        """Accepted (Flink forces unaligned checkpoints on iterative jobs with it; Chandy has no iterations)."""
        self.force_unaligned = bool(force_unaligned_checkpoints)
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        return self.force_unaligned


class FallbackRestartStrategy(RestartStrategy):
    """``RestartStrategies.fall_back_restart()``: the environment's default strategy.

    >>> FallbackRestartStrategy()
    FallbackRestartStrategy()
    """

    def __repr__(self) -> str:
        return "FallbackRestartStrategy()"


class RestartStrategies:
    """Factories named as PyFlink's ``RestartStrategies`` (durations in milliseconds or ``timedelta``s).

    >>> RestartStrategies.fixed_delay_restart(3, 1000)
    FixedDelayRestartStrategy(max_attempts=3, delay_ms=1000)
    >>> RestartStrategies.no_restart().max_attempts
    0
    >>> RestartStrategies.failure_rate_restart(3, 60_000, 500).max_failures_per_interval
    3
    """

    FixedDelayRestartStrategyConfiguration = FixedDelayRestartStrategy
    FailureRateRestartStrategyConfiguration = FailureRateRestartStrategy
    ExponentialDelayRestartStrategyConfiguration = ExponentialDelayRestartStrategy
    NoRestartStrategyConfiguration = NoRestartStrategy
    FallbackRestartStrategyConfiguration = FallbackRestartStrategy

    @staticmethod
    def no_restart() -> RestartStrategy:
        return NoRestartStrategy()

    @staticmethod
    def fall_back_restart() -> RestartStrategy:
        """The environment's default: exponential delay with checkpointing (as in Flink 2), else no restart."""
        return FallbackRestartStrategy()

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts) -> RestartStrategy:
        """Restart up to ``restart_attempts`` times, ``delay_between_attempts`` apart."""
        return FixedDelayRestartStrategy(restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(failure_rate: int, failure_interval, delay_interval) -> RestartStrategy:
        """Restart after ``delay_interval``, unless ``failure_rate`` failures came within ``failure_interval``."""
        return FailureRateRestartStrategy(failure_rate, failure_interval, delay_interval)

    @staticmethod
    def exponential_delay_restart(initial_backoff=1_000, max_backoff=60_000, backoff_multiplier: float = 1.5,
                                  reset_backoff_threshold=3_600_000, jitter_factor: float = 0.1) -> RestartStrategy:
        """Restart after a delay growing from ``initial_backoff`` by ``backoff_multiplier`` up to ``max_backoff``,
        back to the start after ``reset_backoff_threshold`` without a failure, with ``jitter_factor`` of
        randomness (Flink's ``exponentialDelayRestart``).

        >>> RestartStrategies.exponential_delay_restart(100, 10_000, 2.0, 60_000, 0.0).delay_after((0.0, 1.0))
        200
        """
        return ExponentialDelayRestartStrategy(initial_backoff, max_backoff, backoff_multiplier,
                                               reset_backoff_threshold, jitter_factor)
