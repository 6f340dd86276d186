"""PyFlink's ``pyflink.common.types``.

>>> from runtime.common.types import Row
>>> Row.of(["word", "n"], ["spark", 3]).n
3
"""

from runtime.types import Row

__all__ = ["Row"]
