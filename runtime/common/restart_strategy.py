"""PyFlink's ``pyflink.common.restart_strategy``.

>>> from runtime.common.restart_strategy import RestartStrategies
>>> RestartStrategies.fixed_delay_restart(3, 1000).max_attempts
3
"""

from runtime.checkpoint_config import RestartStrategies, RestartStrategy
from runtime.restart_strategies import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
)

RestartStrategyConfiguration = RestartStrategy  # PyFlink's name for what RestartStrategies makes

__all__ = ["RestartStrategies", "RestartStrategy", "RestartStrategyConfiguration", "FixedDelayRestartStrategy", "FailureRateRestartStrategy",
           "ExponentialDelayRestartStrategy", "NoRestartStrategy"]
