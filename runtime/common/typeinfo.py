"""PyFlink's ``pyflink.common.typeinfo``.

>>> from runtime.common.typeinfo import Types
>>> Types.TUPLE([Types.STRING(), Types.INT()])
TUPLE([STRING, INT])
"""

from runtime.types import TypeInformation, Types

__all__ = ["Types", "TypeInformation"]
