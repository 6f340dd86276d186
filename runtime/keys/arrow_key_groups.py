"""Key groups of a whole Arrow column at once: the columnar path's routing, identical to the record path's.

A key lands in the same key group whichever path computes it, so state written by one path restores and
rescales like state written by the other. Integer columns are hashed in Arrow kernels (Java's
``Long.hashCode`` then Flink's Murmur scramble, the same arithmetic as :mod:`runtime.keys.key_groups`, in
``uint64`` lanes masked to 32 bits). Other key types go through the record path's :func:`stable_hash` once
per distinct value in the batch, which is cheap while keys repeat.

>>> import pyarrow as pa
>>> from runtime.keys.key_groups import assign_to_key_group
>>> column_key_groups(pa.array([7, -3], pa.int64()), 128).to_pylist() == [
...     assign_to_key_group(7, 128), assign_to_key_group(-3, 128)]
True
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from runtime.errors import InvalidRecordError
from runtime.keys.key_groups import assign_to_key_group

__all__ = ["column_key_groups", "column_subtasks"]

_U64 = pa.uint64()


def _u(value: int) -> pa.Scalar:
    return pa.scalar(value, _U64)


_M32 = _u(0xFFFFFFFF)


def _mask(values: pa.Array) -> pa.Array:
    return pc.bit_wise_and(values, _M32)


def _rotl32(values: pa.Array, shift: int) -> pa.Array:
    return _mask(pc.bit_wise_or(pc.shift_left(values, _u(shift)), pc.shift_right(values, _u(32 - shift))))


def _murmur_scramble(code: pa.Array) -> pa.Array:
    """:func:`runtime.keys.key_groups.murmur_scramble` over a ``uint64`` array of 32-bit values."""
    code = _mask(pc.multiply(code, _u(0xCC9E2D51)))
    code = _rotl32(code, 15)
    code = _mask(pc.multiply(code, _u(0x1B873593)))
    code = _rotl32(code, 13)
    code = _mask(pc.add(pc.multiply(code, _u(5)), _u(0xE6546B64)))
    code = pc.bit_wise_xor(code, _u(4))
    code = pc.bit_wise_xor(code, pc.shift_right(code, _u(16)))
    code = _mask(pc.multiply(code, _u(0x85EBCA6B)))
    code = pc.bit_wise_xor(code, pc.shift_right(code, _u(13)))
    code = _mask(pc.multiply(code, _u(0xC2B2AE35)))
    code = pc.bit_wise_xor(code, pc.shift_right(code, _u(16)))
    # Negative as a Java int: Flink takes the absolute value, and maps Integer.MIN_VALUE to 0.
    negative = pc.greater_equal(code, _u(0x80000000))
    code = pc.if_else(negative, pc.subtract(_u(1 << 32), code), code)
    return pc.if_else(pc.equal(code, _u(1 << 31)), _u(0), code)


def _integer_key_groups(column: pa.Array, max_parallelism: int) -> pa.Array:
    values = pc.cast(column, pa.int64()) if column.type != pa.int64() else column
    unsigned = pc.cast(values, _U64, safe=False)  # two's complement, as Java's long
    java_hash = _mask(pc.bit_wise_xor(unsigned, pc.shift_right(unsigned, _u(32))))
    scrambled = _murmur_scramble(java_hash)
    m = _u(max_parallelism)
    return pc.cast(pc.subtract(scrambled, pc.multiply(pc.divide(scrambled, m), m)), pa.int64())


def _generic_key_groups(column: pa.Array, max_parallelism: int) -> pa.Array:
    encoded = pc.dictionary_encode(column)
    groups = [assign_to_key_group(value, max_parallelism) for value in encoded.dictionary.to_pylist()]
    return pa.array(groups, pa.int64()).take(encoded.indices)


def column_key_groups(column: pa.Array | pa.ChunkedArray, max_parallelism: int) -> pa.Array:
    """The key group of every value of ``column`` (``int64``), as :func:`assign_to_key_group` computes it."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise InvalidRecordError("a key column must not contain nulls: filter them out or fill them first")
    kind = column.type
    if pa.types.is_integer(kind) and not (pa.types.is_uint64(kind)):
        return _integer_key_groups(column, max_parallelism)
    return _generic_key_groups(column, max_parallelism)


def column_subtasks(column: pa.Array | pa.ChunkedArray, max_parallelism: int, parallelism: int) -> pa.Array:
    """The consumer subtask of every value of ``column``: ``key_group * parallelism // max_parallelism``."""
    groups = column_key_groups(column, max_parallelism)
    return pc.divide(pc.multiply(groups, parallelism), max_parallelism)
