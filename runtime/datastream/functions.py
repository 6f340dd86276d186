"""PyFlink's ``pyflink.datastream.functions``: the user-function base classes (defined in :mod:`operators.functions`).

>>> from runtime.datastream.functions import MapFunction
>>> class Double(MapFunction):
...     def map(self, value):
...         return 2 * value
>>> Double().map(21)
42
"""

from operators import functions as _functions
from operators.async_functions import AsyncFunction, AsyncRetryPredicate, AsyncRetryStrategy
from operators.functions import *  # noqa: F403 (the names of operators.functions.__all__)
from operators.window import functions as _window_functions
from operators.window.functions import *  # noqa: F403 (the window functions)
from state_backends.descriptors import AggregateFunction

# operators.functions' names, less the engine's helper that turns a function into a callable; the rest of
# operators.async_functions is PyFlink's async_retry_strategies and async_retry_predicates
__all__ = [
    *(name for name in _functions.__all__ if name != "as_callable"),
    *_window_functions.__all__,
    "AsyncFunction",
    "AsyncRetryStrategy",
    "AsyncRetryPredicate",
    "AggregateFunction",
]
