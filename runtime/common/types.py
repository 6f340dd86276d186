"""PyFlink's ``pyflink.common.types``: ``Row`` and ``RowKind``.

>>> from runtime.common.types import Row, RowKind
>>> row = Row(word="spark", n=3)
>>> row.n, row.get_row_kind() is RowKind.INSERT
(3, True)
"""

from runtime.types import Row, RowKind

__all__ = ["Row", "RowKind"]
