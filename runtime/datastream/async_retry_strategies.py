"""PyFlink's ``pyflink.datastream.async_retry_strategies``: how often and how far apart async calls are retried.

>>> NO_RETRY_STRATEGY.can_retry(1)
False
"""

from operators.async_functions import (
    NO_RETRY_STRATEGY,
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
    NoRetryStrategy,
    RetryPredicate,
)

__all__ = ["RetryPredicate", "NoRetryStrategy", "FixedDelayRetryStrategy", "ExponentialBackoffDelayRetryStrategy",
           "NO_RETRY_STRATEGY"]
