"""PyFlink's async I/O functions: :class:`AsyncFunction`, :class:`AsyncRetryStrategy` and its strategies,
:class:`AsyncRetryPredicate`, and the helpers PyFlink keeps in its modules ``async_retry_strategies`` and
``async_retry_predicates`` (here also namespaces of those names).

An AsyncFunction's ``async_invoke`` is a coroutine that returns the list of output records for one input record;
:class:`~runtime.datastream.async_data_stream.AsyncDataStream` runs many of them at once on an asyncio event loop
(see :mod:`operators.async_io`). A retry strategy says whether, and after how long, a call is made again when its
result or its exception matches the strategy's predicates:

>>> strategy = AsyncRetryStrategy.fixed_delay(max_attempts=2, backoff_time_millis=100,
...                                           result_predicate=async_retry_predicates.empty_result_predicate,
...                                           exception_predicate=None)
>>> strategy.get_retry_predicate().result_predicate()([]), strategy.can_retry(2), strategy.can_retry(3)
(True, True, False)
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Generic, List, Optional, TypeVar

from operators.functions import Function
from runtime.errors import ConfigurationError

__all__ = [
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "RetryPredicate",
    "NoRetryStrategy",
    "FixedDelayRetryStrategy",
    "ExponentialBackoffDelayRetryStrategy",
    "NO_RETRY_STRATEGY",
    "empty_result_predicate",
    "has_exception_predicate",
    "exception_type_predicate",
    "async_retry_strategies",
    "async_retry_predicates",
]

# PyFlink's type parameters: ``AsyncFunction[IN, OUT]``, and ``OUT`` of the retry strategies and predicates.
IN = TypeVar("IN")
OUT = TypeVar("OUT")

ResultPredicate = Optional[Callable[[List], bool]]
ExceptionPredicate = Optional[Callable[[Exception], bool]]


class AsyncFunction(Function, Generic[IN, OUT]):
    """A function that answers each input record with a coroutine (PyFlink's ``AsyncFunction``): typically a
    request to a remote service, many of them in flight at once.

    ``async_invoke(value)`` returns the list of output records for ``value`` (``[]`` for none). ``timeout(value)``
    is called instead when the call (with its retries) takes longer than the timeout given to AsyncDataStream: it
    returns fallback records, or raises, which fails the job (the default).

    >>> import asyncio
    >>> class Length(AsyncFunction):
    ...     async def async_invoke(self, value):
    ...         await asyncio.sleep(0)   # e.g. an HTTP request
    ...         return [(value, len(value))]
    >>> asyncio.run(Length().async_invoke("abc"))
    [('abc', 3)]
    >>> try:
    ...     Length().timeout("abc")
    ... except TimeoutError as error:
    ...     print(error)
    Async function call has timed out for input: abc
    """

    async def async_invoke(self, value) -> list:
        """The output records for ``value``, as a list. Raise to fail the job (or to be retried, when the retry
        strategy's exception predicate says so)."""
        raise NotImplementedError

    def timeout(self, value) -> list:
        """``async_invoke(value)`` timed out: the records to emit instead. By default, fail the job."""
        raise TimeoutError("Async function call has timed out for input: " + str(value))


class AsyncRetryPredicate(Generic[OUT]):
    """When a call is retried (PyFlink's ``AsyncRetryPredicate``): ``result_predicate()`` is a test on a call's
    list of results, ``exception_predicate()`` one on its exception; None is a test that never asks for a retry.

    >>> predicate = RetryPredicate(empty_result_predicate, None)
    >>> isinstance(predicate, AsyncRetryPredicate), predicate.result_predicate()([]), predicate.exception_predicate()
    (True, True, None)
    """

    def result_predicate(self) -> ResultPredicate:
        raise NotImplementedError

    def exception_predicate(self) -> ExceptionPredicate:
        raise NotImplementedError


class AsyncRetryStrategy(Generic[OUT]):
    """Whether a call is made again and after how long (PyFlink's ``AsyncRetryStrategy``).

    ``can_retry(current_attempts)`` is asked after attempt ``current_attempts`` (1 for the first call) matched the
    retry predicate; ``get_backoff_time_millis(current_attempts)`` is the pause before the next attempt. So
    ``max_attempts`` counts retries: at most ``max_attempts + 1`` calls, as in Flink. All retries of a record
    happen within the one timeout given to AsyncDataStream.

    >>> strategy = AsyncRetryStrategy.exponential_backoff(max_attempts=4, initial_delay=100, max_retry_delay=500,
    ...                                                   multiplier=2.0, result_predicate=None,
    ...                                                   exception_predicate=has_exception_predicate)
    >>> [strategy.get_backoff_time_millis(n) for n in range(1, 5)]
    [100, 200, 400, 500]
    >>> AsyncRetryStrategy.no_restart() is NO_RETRY_STRATEGY
    True
    """

    def can_retry(self, current_attempts: int) -> bool:
        raise NotImplementedError

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        raise NotImplementedError

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        raise NotImplementedError

    @staticmethod
    def no_restart() -> "AsyncRetryStrategy":
        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(max_attempts: int, backoff_time_millis: int, result_predicate: ResultPredicate = None,
                    exception_predicate: ExceptionPredicate = None) -> "FixedDelayRetryStrategy":
        return FixedDelayRetryStrategy(max_attempts, backoff_time_millis, result_predicate, exception_predicate)

    @staticmethod
    def exponential_backoff(max_attempts: int, initial_delay: int, max_retry_delay: int, multiplier: float,
                            result_predicate: ResultPredicate = None,
                            exception_predicate: ExceptionPredicate = None) -> "ExponentialBackoffDelayRetryStrategy":
        return ExponentialBackoffDelayRetryStrategy(max_attempts, initial_delay, max_retry_delay, multiplier,
                                                    result_predicate, exception_predicate)


class RetryPredicate(AsyncRetryPredicate[OUT]):
    """An :class:`AsyncRetryPredicate` of two optional callables.

    >>> RetryPredicate(None, has_exception_predicate).exception_predicate()(ValueError("no"))
    True
    """

    def __init__(self, result_predicate: ResultPredicate, exception_predicate: ExceptionPredicate):
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultPredicate:
        return self._result_predicate

    def exception_predicate(self) -> ExceptionPredicate:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy[OUT]):
    """Never retry (``NO_RETRY_STRATEGY``, what ``unordered_wait`` / ``ordered_wait`` use).

    >>> NO_RETRY_STRATEGY.can_retry(1), NO_RETRY_STRATEGY.get_retry_predicate().result_predicate()
    (False, None)
    """

    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(None, None)


def _positive(value, name: str, strategy: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigurationError(f"{strategy}: {name} must be a positive number, got {value!r}")
    return value


class FixedDelayRetryStrategy(AsyncRetryStrategy[OUT]):
    """Up to ``max_attempts`` retries, each ``backoff_time_millis`` after the failed attempt.

    >>> strategy = FixedDelayRetryStrategy(3, 50, None, has_exception_predicate)
    >>> [strategy.can_retry(n) for n in range(1, 5)], strategy.get_backoff_time_millis(2)
    ([True, True, True, False], 50)
    >>> FixedDelayRetryStrategy(0, 50, None, None)
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: FixedDelayRetryStrategy: max_attempts must be a positive number, got 0
    """

    def __init__(self, max_attempts: int, backoff_time_millis: int, result_predicate: ResultPredicate,
                 exception_predicate: ExceptionPredicate):
        self._max_attempts = _positive(max_attempts, "max_attempts", type(self).__name__)
        self._backoff_time_millis = _positive(backoff_time_millis, "backoff_time_millis", type(self).__name__)
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy[OUT]):
    """Up to ``max_attempts`` retries, the first ``initial_delay`` ms after the failed attempt, each next pause
    ``multiplier`` times longer, up to ``max_retry_delay`` ms.

    The pause is computed from ``current_attempts`` alone, not kept in the strategy (PyFlink keeps the last one,
    which mixes up the records whose calls are retried at the same time: the strategy is shared by all of them).

    >>> strategy = ExponentialBackoffDelayRetryStrategy(5, 10, 1_000, 3.0, None, has_exception_predicate)
    >>> [strategy.get_backoff_time_millis(n) for n in range(1, 6)]
    [10, 30, 90, 270, 810]
    """

    def __init__(self, max_attempts: int, initial_delay: int, max_retry_delay: int, multiplier: float,
                 result_predicate: ResultPredicate, exception_predicate: ExceptionPredicate):
        name = type(self).__name__
        self._max_attempts = _positive(max_attempts, "max_attempts", name)
        self._initial_delay = _positive(initial_delay, "initial_delay", name)
        self._max_retry_delay = _positive(max_retry_delay, "max_retry_delay", name)
        self._multiplier = _positive(multiplier, "multiplier", name)
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        delay = self._initial_delay
        for _ in range(1, current_attempts):  # a loop, not **: a float power of a large attempt number overflows
            delay = min(delay * self._multiplier, self._max_retry_delay)
            if delay == self._max_retry_delay:
                break
        return int(delay)

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


NO_RETRY_STRATEGY: AsyncRetryStrategy = NoRetryStrategy()


def empty_result_predicate(result: list) -> bool:
    """Retry a call that returned no records.

    >>> empty_result_predicate([]), empty_result_predicate(None), empty_result_predicate(["found"])
    (True, True, False)
    """
    return result is None or len(result) == 0


def has_exception_predicate(error) -> bool:
    """Retry a call that raised anything.

    >>> has_exception_predicate(ConnectionError("reset")), has_exception_predicate(None)
    (True, False)
    """
    return error is not None


def exception_type_predicate(error, expected_error_type) -> bool:
    """Retry a call that raised an ``expected_error_type``: bind the type first, e.g. with ``functools.partial``.

    >>> from functools import partial
    >>> retry_timeouts = partial(exception_type_predicate, expected_error_type=TimeoutError)
    >>> retry_timeouts(TimeoutError()), retry_timeouts(KeyError("x"))
    (True, False)
    """
    return isinstance(error, expected_error_type)


# PyFlink has these as modules of pyflink.datastream; namespaces (not module objects) pickle by value, so a
# function that refers to them ships to the executors.
async_retry_strategies = SimpleNamespace(
    RetryPredicate=RetryPredicate,
    NoRetryStrategy=NoRetryStrategy,
    FixedDelayRetryStrategy=FixedDelayRetryStrategy,
    ExponentialBackoffDelayRetryStrategy=ExponentialBackoffDelayRetryStrategy,
    NO_RETRY_STRATEGY=NO_RETRY_STRATEGY,
)
async_retry_predicates = SimpleNamespace(
    empty_result_predicate=empty_result_predicate,
    has_exception_predicate=has_exception_predicate,
    exception_type_predicate=exception_type_predicate,
)
