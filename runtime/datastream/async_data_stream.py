"""PyFlink's ``pyflink.datastream.async_data_stream``: :class:`AsyncDataStream` applies an
:class:`~operators.async_functions.AsyncFunction` to a stream, many calls in flight at once (see
:mod:`operators.async_io` for how it runs and what a checkpoint keeps).

>>> import asyncio
>>> from operators.async_functions import AsyncFunction
>>> from runtime import StreamExecutionEnvironment, Time
>>> class Greet(AsyncFunction):
...     async def async_invoke(self, value):
...         await asyncio.sleep(0.01)   # e.g. a request to a remote service
...         return [f"hello {value}"]
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> greetings = AsyncDataStream.ordered_wait(env.from_collection(["ada", "bob"]), Greet(), Time.seconds(5))
>>> greetings.get_name()
'async wait operator'
"""

from __future__ import annotations

import inspect

from operators.async_functions import NO_RETRY_STRATEGY, AsyncFunction, AsyncRetryStrategy
from operators.async_io import AsyncWaitOperator
from runtime.datastream.data_stream import DataStream, positive_int
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.settings.durations import Duration, Time
from runtime.settings.parsers import parse_duration_ms
from runtime.types import TypeInformation

__all__ = ["AsyncDataStream"]

OPERATOR_NAME = "async wait operator"  # PyFlink's (and Flink's) name for it


class AsyncDataStream:
    """Applies an :class:`~operators.async_functions.AsyncFunction` to a stream (PyFlink's ``AsyncDataStream``).

    ``timeout`` (a ``Time``, a ``Duration`` or milliseconds) bounds each record's call, retries included; when it
    passes, the function's ``timeout(value)`` gives the records to emit (by default it raises and the job fails).
    Without retries, a timeout of 0 or less means none. ``capacity`` is the most records in the operator at
    once; when it is full the operator stops taking input (backpressure).

    >>> import asyncio
    >>> from operators.async_functions import AsyncFunction, AsyncRetryStrategy, async_retry_predicates
    >>> from runtime import StreamExecutionEnvironment, Time, Types
    >>> class Lookup(AsyncFunction):
    ...     async def async_invoke(self, value):
    ...         await asyncio.sleep(0.01)
    ...         return [(value, len(value))]
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> retry = AsyncRetryStrategy.fixed_delay(3, 100, async_retry_predicates.empty_result_predicate,
    ...                                        async_retry_predicates.has_exception_predicate)
    >>> found = AsyncDataStream.unordered_wait_with_retry(env.from_collection(["a", "bb"]), Lookup(),
    ...                                                   Time.seconds(10), retry, capacity=50)
    >>> _ = found.print()
    >>> [node.parallelism for node in env.get_job_graph("lookup").operators if node.name == "async wait operator"]
    [1]

    ``async_invoke`` must be a coroutine function:

    >>> class Blocking(AsyncFunction):
    ...     def async_invoke(self, value):
    ...         return [value]
    >>> try:
    ...     AsyncDataStream.unordered_wait(env.from_collection(["a"]), Blocking(), Time.seconds(1))
    ... except ApiUsageError as error:
    ...     print(error)
    Blocking.async_invoke must be declared 'async def'...
    """

    @staticmethod
    def unordered_wait(data_stream: DataStream, async_function: AsyncFunction, timeout: Time | Duration | int,
                       capacity: int = 100, output_type: TypeInformation | None = None) -> DataStream:
        """Each record's results as soon as its call finishes; never across a watermark: all results of the
        records before a watermark come before it."""
        return AsyncDataStream.unordered_wait_with_retry(data_stream, async_function, timeout, NO_RETRY_STRATEGY,
                                                         capacity, output_type)

    @staticmethod
    def unordered_wait_with_retry(data_stream: DataStream, async_function: AsyncFunction,
                                  timeout: Time | Duration | int, async_retry_strategy: AsyncRetryStrategy,
                                  capacity: int = 100, output_type: TypeInformation | None = None) -> DataStream:
        """:meth:`unordered_wait`, calls retried as ``async_retry_strategy`` says (within ``timeout``)."""
        return _wait(data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, False)

    @staticmethod
    def ordered_wait(data_stream: DataStream, async_function: AsyncFunction, timeout: Time | Duration | int,
                     capacity: int = 100, output_type: TypeInformation | None = None) -> DataStream:
        """Each record's results in input order: a slow call holds back the results of the records after it."""
        return AsyncDataStream.ordered_wait_with_retry(data_stream, async_function, timeout, NO_RETRY_STRATEGY,
                                                       capacity, output_type)

    @staticmethod
    def ordered_wait_with_retry(data_stream: DataStream, async_function: AsyncFunction,
                                timeout: Time | Duration | int, async_retry_strategy: AsyncRetryStrategy,
                                capacity: int = 100, output_type: TypeInformation | None = None) -> DataStream:
        """:meth:`ordered_wait`, calls retried as ``async_retry_strategy`` says (within ``timeout``)."""
        return _wait(data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, True)


def _wait(data_stream, async_function, timeout, strategy, capacity, output_type, ordered: bool) -> DataStream:
    api = "AsyncDataStream." + ("ordered" if ordered else "unordered") + "_wait"
    if not isinstance(data_stream, DataStream):
        raise ApiUsageError(f"{api}() takes the DataStream to apply the function to first, got "
                            f"{type(data_stream).__name__}")
    data_stream._require_records(api)
    _check_function(async_function)
    timeout_ms = parse_duration_ms(timeout, f"{api}(timeout)")
    _check_strategy(strategy, timeout_ms, api)
    capacity = positive_int(capacity, f"{api}(capacity=...)")
    t = data_stream._then("operator", OPERATOR_NAME,
                          lambda name: AsyncWaitOperator(name, async_function, timeout_ms, capacity, strategy, ordered),
                          output_type)
    return DataStream(data_stream.get_execution_environment(), t)


def _check_function(function) -> None:
    invoke = getattr(function, "async_invoke", None)
    name = type(function).__name__
    if invoke is None:
        raise ApiUsageError(f"AsyncDataStream expects an AsyncFunction (an object with 'async def async_invoke(self, "
                            f"value)'), got {name}")
    if getattr(type(function), "async_invoke", None) is AsyncFunction.async_invoke:
        raise ApiUsageError(f"{name} does not define async_invoke: write 'async def async_invoke(self, value)' "
                            "returning the list of output records for value")
    if not inspect.iscoroutinefunction(invoke):
        raise ApiUsageError(
            f"{name}.async_invoke must be declared 'async def': AsyncDataStream runs many calls at once on an asyncio "
            "event loop. Write 'async def async_invoke(self, value): ... return [result]'; to call blocking client "
            "code from it, 'await asyncio.to_thread(call, value)'.")


def _check_strategy(strategy, timeout_ms: int, api: str) -> None:
    if strategy is None:
        raise ApiUsageError(f"{api}_with_retry(): the retry strategy is None; use AsyncRetryStrategy.no_restart() "
                            f"(or {api}() without retries)")
    if not isinstance(strategy, AsyncRetryStrategy):
        raise ApiUsageError(f"{api}_with_retry() expects an AsyncRetryStrategy, got {type(strategy).__name__}: "
                            "e.g. AsyncRetryStrategy.fixed_delay(3, 100, None, has_exception_predicate)")
    predicate = strategy.get_retry_predicate()
    if predicate is None:
        raise ApiUsageError(f"The retry predicate of {type(strategy).__name__} is None: get_retry_predicate() must "
                            "return an AsyncRetryPredicate (e.g. RetryPredicate(None, has_exception_predicate))")
    retries = predicate.result_predicate() is not None or predicate.exception_predicate() is not None
    if retries and timeout_ms <= 0:
        raise ConfigurationError(f"{api}_with_retry() needs a timeout: it bounds each record's call with its retries "
                                 f"(got {timeout_ms} ms). Give one, e.g. Time.seconds(30).")
