"""Which record an operator was processing when its user function raised, read from the exception's traceback.

The record loops of the operators (``for r in records``, ``[call(r) for r in records]``) name the record ``r``; the
innermost frame of Chandy's operator code that has an ``r`` is the one that called the user's function. Reading it
from the traceback costs nothing while records flow (no per-record bookkeeping), and only once a batch failed.

>>> from operators.builtins import MapOperator
>>> operator = MapOperator("parse", int, int)
>>> try:
...     operator.process_batch(["1", "2", "x", "4"])
... except ValueError as error:
...     failing_record_repr(error)
"'x'"
"""

from __future__ import annotations

import os

import operators

__all__ = ["failing_record_repr", "MAX_REPR"]

MAX_REPR = 200  # characters of a record's repr that a failure report carries
_OPERATOR_CODE = os.path.dirname(os.path.abspath(operators.__file__)) + os.sep


def failing_record_repr(error: BaseException) -> str | None:
    """The repr (at most :data:`MAX_REPR` characters) of the record whose processing raised ``error``; None when
    the traceback does not show one (the error came from ``open()``, a timer, or the runtime)."""
    record, found = None, False
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.startswith(_OPERATOR_CODE) and "r" in frame.f_locals:
            record, found = frame.f_locals["r"], True
        tb = tb.tb_next
    if not found:
        return None
    try:
        text = repr(record)
    except Exception as exc:  # a record whose repr raises is still that record
        text = f"<{type(record).__qualname__} whose repr raised {type(exc).__name__}>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."
