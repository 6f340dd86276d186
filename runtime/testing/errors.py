"""What a test harness raises when it is driven in a way no subtask drives its operator.

A snapshot that cannot be restored into a harness raises :class:`~runtime.errors.IncompatibleCheckpointError`,
as a checkpoint that does not fit a job does; everything else a harness refuses is a :class:`HarnessError`.

>>> from runtime.errors import ApiUsageError
>>> issubclass(HarnessError, ApiUsageError), HarnessError.retryable
(True, False)
"""

from __future__ import annotations

from runtime.errors import ApiUsageError

__all__ = ["HarnessError"]


class HarnessError(ApiUsageError):
    """A harness call out of its operator's lifecycle (a record before ``open()``, a restore after it), or an
    argument the harness cannot take (a record whose key another subtask owns, an operator of the other kind).

    >>> raise HarnessError("process_element() before open(): call open() first")
    Traceback (most recent call last):
        ...
    runtime.testing.errors.HarnessError: process_element() before open(): call open() first
    """
