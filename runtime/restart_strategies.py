"""Restart strategies: whether, and after how long, a failed job restarts from its latest checkpoint.

A strategy is a frozen value; the job master hands it the (monotonic, seconds) times of the job's failures so
far, the current one last, and it answers with a delay in milliseconds, or None and the reason when the job must
fail. Deriving everything from the failure times keeps the strategies free of state and easy to test.

>>> strategy = ExponentialDelayRestartStrategy(1_000, 60_000, 2.0, 3_600_000, jitter_factor=0.0)
>>> [strategy.delay_after(tuple(range(n))) for n in (1, 2, 3, 8)]   # failures one second apart
[1000, 2000, 4000, 60000]
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from runtime.errors import ConfigurationError
from runtime.settings.parsers import parse_duration_ms

__all__ = ["RestartStrategy", "FixedDelayRestartStrategy", "FailureRateRestartStrategy",
           "ExponentialDelayRestartStrategy", "NoRestartStrategy", "millis"]


def millis(value, name: str) -> float:
    """A restart delay or interval in milliseconds: a number, a ``timedelta``, a ``Duration``, a ``Time`` or a
    duration string (PyFlink takes the first two), 0 or more; parts of a millisecond are kept.

    >>> from datetime import timedelta
    >>> millis(timedelta(seconds=2), "delay"), millis(250, "delay"), millis("1 min", "delay")
    (2000, 250, 60000)
    """
    return parse_duration_ms(value, name, fractional=True)


class RestartStrategy:
    """Base of the restart strategies: ``delay_after(failure_times)`` in ms, or None once the job must fail.
    PyFlink calls it ``RestartStrategyConfiguration``.

    >>> strategy = FixedDelayRestartStrategy(2, 500)
    >>> isinstance(strategy, RestartStrategy), strategy.delay_after((1.0,)), strategy.delay_after((1.0, 2.0, 3.0))
    (True, 500, None)
    """

    def delay_after(self, failure_times: tuple[float, ...]) -> float | None:
        raise NotImplementedError

    def refusal(self, failure_times: tuple[float, ...]) -> str:
        """Why the job is not restarted after these failures (only asked when ``delay_after`` is None)."""
        return f"the restart strategy allows no more restarts ({self})"


@dataclass(frozen=True)
class FixedDelayRestartStrategy(RestartStrategy):
    """Up to ``max_attempts`` restarts, each ``delay_ms`` after its failure.

    >>> s = FixedDelayRestartStrategy(2, 500)
    >>> s.delay_after((0.0,)), s.delay_after((0.0, 1.0)), s.delay_after((0.0, 1.0, 2.0))
    (500, 500, None)
    >>> s.refusal((0.0, 1.0, 2.0))
    'after 2 restart(s); the restart strategy allows 2'
    """

    max_attempts: int
    delay_ms: float

    def __post_init__(self):
        if not isinstance(self.max_attempts, int) or self.max_attempts < 0:
            raise ConfigurationError(f"restart attempts must be an int >= 0, got {self.max_attempts!r}")
        object.__setattr__(self, "delay_ms", millis(self.delay_ms, "restart delay"))

    def delay_after(self, failure_times: tuple[float, ...]) -> float | None:
        return self.delay_ms if len(failure_times) <= self.max_attempts else None

    def refusal(self, failure_times: tuple[float, ...]) -> str:
        used = len(failure_times) - 1
        return "" if used == 0 else f"after {used} restart(s); the restart strategy allows {self.max_attempts}"


class NoRestartStrategy(FixedDelayRestartStrategy):
    """Never restart: the first failure fails the job.

    >>> NoRestartStrategy().delay_after((0.0,)) is None
    True
    """

    def __init__(self):
        super().__init__(0, 0)

    def __repr__(self) -> str:
        return "NoRestartStrategy()"


@dataclass(frozen=True)
class FailureRateRestartStrategy(RestartStrategy):
    """Restart ``delay_ms`` after each failure, unless this failure is the ``max_failures_per_interval``-th within
    ``failure_interval_ms`` (Flink's failure-rate strategy: a job that fails often fails for good, one that fails
    now and then keeps running).

    >>> s = FailureRateRestartStrategy(3, 60_000, 100)
    >>> s.delay_after((0.0, 10.0)), s.delay_after((0.0, 10.0, 20.0)), s.delay_after((0.0, 70.0, 80.0))
    (100, None, 100)
    """

    max_failures_per_interval: int
    failure_interval_ms: float
    delay_ms: float

    def __post_init__(self):
        if not isinstance(self.max_failures_per_interval, int) or self.max_failures_per_interval < 1:
            raise ConfigurationError("max failures per interval must be an int >= 1, got "
                                     f"{self.max_failures_per_interval!r}")
        object.__setattr__(self, "failure_interval_ms", millis(self.failure_interval_ms, "failure interval"))
        object.__setattr__(self, "delay_ms", millis(self.delay_ms, "restart delay"))

    def delay_after(self, failure_times: tuple[float, ...]) -> float | None:
        recent = failure_times[-self.max_failures_per_interval:]
        if len(recent) == self.max_failures_per_interval and \
                (recent[-1] - recent[0]) * 1000 <= self.failure_interval_ms:
            return None
        return self.delay_ms

    def refusal(self, failure_times: tuple[float, ...]) -> str:
        return (f"{self.max_failures_per_interval} failures within {self.failure_interval_ms:.0f} ms; the restart "
                "strategy allows fewer")


@dataclass(frozen=True)
class ExponentialDelayRestartStrategy(RestartStrategy):
    """Restart after a delay that starts at ``initial_backoff_ms`` and grows by ``backoff_multiplier`` with each
    failure up to ``max_backoff_ms``, back to the start once the job ran ``reset_backoff_threshold_ms`` without
    failing; each delay is moved by up to ``jitter_factor`` of itself at random, so that many jobs failing together
    do not all restart together. Without ``max_attempts`` it restarts for ever (Flink 2's default with checkpoints).

    >>> s = ExponentialDelayRestartStrategy(100, 1_000, 2.0, 10_000, jitter_factor=0.0)
    >>> s.delay_after((0.0, 1.0, 2.0)), s.delay_after((0.0, 1.0, 20.0))   # 18 s without failure: reset
    (400, 100)
    """

    initial_backoff_ms: float = 1_000
    max_backoff_ms: float = 60_000
    backoff_multiplier: float = 1.5
    reset_backoff_threshold_ms: float = 3_600_000
    jitter_factor: float = 0.1
    max_attempts: int | None = None

    def __post_init__(self):
        for name in ("initial_backoff_ms", "max_backoff_ms", "reset_backoff_threshold_ms"):
            object.__setattr__(self, name, millis(getattr(self, name), name))
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise ConfigurationError(f"initial backoff {self.initial_backoff_ms} ms is above the max backoff "
                                     f"{self.max_backoff_ms} ms")
        if not isinstance(self.backoff_multiplier, (int, float)) or self.backoff_multiplier < 1:
            raise ConfigurationError(f"backoff multiplier must be >= 1, got {self.backoff_multiplier!r}")
        if not isinstance(self.jitter_factor, (int, float)) or not 0 <= self.jitter_factor <= 1:
            raise ConfigurationError(f"jitter factor must be in [0, 1], got {self.jitter_factor!r}")

    def delay_after(self, failure_times: tuple[float, ...]) -> float | None:
        if self.max_attempts is not None and len(failure_times) > self.max_attempts:
            return None
        backoff = self.initial_backoff_ms
        for before, after in zip(failure_times, failure_times[1:]):
            if (after - before) * 1000 >= self.reset_backoff_threshold_ms:
                backoff = self.initial_backoff_ms
            else:
                backoff = min(backoff * self.backoff_multiplier, self.max_backoff_ms)
        backoff = round(backoff)
        if self.jitter_factor:
            spread = backoff * self.jitter_factor
            backoff = max(0, round(backoff + random.uniform(-spread, spread)))
        return backoff

    def refusal(self, failure_times: tuple[float, ...]) -> str:
        return f"after {len(failure_times) - 1} restart(s); the restart strategy allows {self.max_attempts}"
