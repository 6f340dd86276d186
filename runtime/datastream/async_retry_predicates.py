"""PyFlink's ``pyflink.datastream.async_retry_predicates``: when an async call is retried.

>>> empty_result_predicate([])
True
"""

from operators.async_functions import empty_result_predicate, exception_type_predicate, has_exception_predicate

__all__ = ["empty_result_predicate", "has_exception_predicate", "exception_type_predicate"]
