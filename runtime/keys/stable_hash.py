"""A deterministic 32-bit hash of keys, identical in every process and every supported Python version.

Python's built-in ``hash()`` is salted per process for ``str`` and ``bytes``, so two subtasks would route
the same key differently. Here a key is hashed through a canonical encoding instead:

- numbers hash by value, so keys that Python considers equal (``1``, ``1.0``, ``True``) hash equally,
  which keeps routing consistent with dict lookups in keyed state;
- ``str`` as UTF-8, ``bytes`` as themselves (CRC-32, a C-speed stable function);
- tuples (and frozen dataclasses, enums, dates, decimals) combine their parts like Java's ``List.hashCode``.

The result feeds :func:`runtime.keys.key_groups.assign_to_key_group`, which scrambles it with Murmur3's finaliser,
so CRC-32's linearity does not skew key groups.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import struct
import zlib

from runtime.errors import UnsupportedKeyError
from runtime.types import Row

__all__ = ["stable_hash"]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_NONE_HASH = 0x9E3779B9
_DOUBLE = struct.Struct(">d")


def _hash_int(value: int) -> int:
    # Java's Long.hashCode for 64-bit values, CRC of the two's-complement bytes beyond that.
    if -(1 << 63) <= value < (1 << 63):
        unsigned = value & _MASK64
        return (unsigned ^ (unsigned >> 32)) & _MASK32
    length = (value.bit_length() + 8) // 8
    return zlib.crc32(b"i" + value.to_bytes(length, "big", signed=True))


def _hash_float(value: float) -> int:
    if value.is_integer():
        return _hash_int(int(value))
    if value != value:  # every NaN is one key
        return zlib.crc32(b"nan")
    return zlib.crc32(_DOUBLE.pack(value))


def _combine(parts) -> int:
    result = 1
    for part in parts:
        result = (31 * result + stable_hash(part)) & _MASK32
    return result


def stable_hash(key) -> int:
    """Return a deterministic unsigned 32-bit hash of ``key``.

    Supported keys: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, tuples of supported keys,
    frozen dataclasses, enums, ``datetime``/``date``/``time``, ``Decimal``, :class:`~runtime.types.Row`.

    >>> stable_hash("user-42") == stable_hash("user-42")
    True
    >>> stable_hash(1) == stable_hash(1.0) == stable_hash(True)
    True
    """
    kind = type(key)
    if kind is int or kind is bool:
        return _hash_int(int(key))
    if kind is str:
        return zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if kind is tuple:
        return _combine(key)
    if kind is bytes:
        return zlib.crc32(b"b" + key)
    if key is None:
        return _NONE_HASH
    if kind is float:
        return _hash_float(key)
    if isinstance(key, enum.Enum):
        return stable_hash(key.value)
    if isinstance(key, int):  # int subclasses (IntFlag, numpy ints registered as int)
        return _hash_int(int(key))
    if isinstance(key, str):
        return zlib.crc32(str(key).encode("utf-8", "surrogatepass"))
    if isinstance(key, float):  # float subclasses (the canonical NaN key)
        return _hash_float(float(key))
    if isinstance(key, tuple):  # namedtuples
        return _combine(key)
    if kind is Row:  # hashed by its values, as Row.__hash__ does
        return _combine(tuple(key))
    if isinstance(key, (datetime.datetime, datetime.date, datetime.time)):
        return zlib.crc32(b"t" + key.isoformat().encode())
    if isinstance(key, decimal.Decimal):
        if key == key.to_integral_value():
            return _hash_int(int(key))
        return _hash_float(float(key)) if float(key) == key else zlib.crc32(b"d" + str(key.normalize()).encode())
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        params = getattr(type(key), "__dataclass_params__", None)
        if params is not None and params.frozen:
            return _combine(getattr(key, f.name) for f in dataclasses.fields(key))
    if hasattr(key, "item") and hasattr(key, "dtype"):  # numpy scalars
        return stable_hash(key.item())
    raise UnsupportedKeyError(
        f"Cannot use a key of type {kind.__module__}.{kind.__qualname__} ({key!r}): keys must have a "
        "stable hash across processes. Use int, str, bytes, float, bool, None, a tuple of those, an enum, "
        "or a frozen dataclass; return such a value from your key_by selector (a list becomes one as "
        "tuple(...))."
    )
