"""Key groups of a whole Arrow column at once: the columnar path's routing, identical to the record path's.

A key lands in the same key group whichever path computes it, so state written by one path restores and
rescales like state written by the other. Integer columns are hashed in NumPy (Java's ``Long.hashCode`` then
Flink's Murmur scramble, the same arithmetic as :mod:`runtime.keys.key_groups`, in ``uint32`` lanes, whose
multiplications wrap as Java's ints do). NumPy, not Arrow's compute kernels: the scramble is some thirty
operations, and a kernel call costs ~8 us before its first value, which made routing a 4,096-row batch take
~275 us, about half of what the columnar reference job may spend on a row; in NumPy it takes ~40 us. Other key
types go through the record path's :func:`stable_hash` once per distinct value in the batch, which is cheap while
keys repeat.

>>> import pyarrow as pa
>>> from runtime.keys.key_groups import assign_to_key_group
>>> column_key_groups(pa.array([7, -3], pa.int64()), 128).to_pylist() == [
...     assign_to_key_group(7, 128), assign_to_key_group(-3, 128)]
True
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.errors import InvalidRecordError
from runtime.keys.key_groups import assign_to_key_group

__all__ = ["column_key_groups", "column_subtasks"]


def _murmur_scramble(code: np.ndarray) -> np.ndarray:
    """:func:`runtime.keys.key_groups.murmur_scramble` over a ``uint32`` array (changed in place), as ``int64``."""
    code *= np.uint32(0xCC9E2D51)
    code = (code << np.uint32(15)) | (code >> np.uint32(17))
    code *= np.uint32(0x1B873593)
    code = (code << np.uint32(13)) | (code >> np.uint32(19))
    code = code * np.uint32(5) + np.uint32(0xE6546B64)
    code ^= np.uint32(4)
    code ^= code >> np.uint32(16)
    code *= np.uint32(0x85EBCA6B)
    code ^= code >> np.uint32(13)
    code *= np.uint32(0xC2B2AE35)
    code ^= code >> np.uint32(16)
    # Negative as a Java int: Flink takes the absolute value, and maps Integer.MIN_VALUE to 0.
    scrambled = np.abs(code.view(np.int32).astype(np.int64))
    scrambled[scrambled == 1 << 31] = 0
    return scrambled


def _integer_key_groups(column: pa.Array, max_parallelism: int) -> np.ndarray:
    values = column.to_numpy(zero_copy_only=False)  # no nulls: the caller checked
    if values.dtype != np.int64:
        values = values.astype(np.int64)
    unsigned = values.view(np.uint64)  # two's complement, as Java's long
    java_hash = (unsigned ^ (unsigned >> np.uint64(32))).astype(np.uint32)
    return _murmur_scramble(java_hash) % max_parallelism


def _generic_key_groups(column: pa.Array, max_parallelism: int) -> np.ndarray:
    encoded = pc.dictionary_encode(column)
    groups = np.array([assign_to_key_group(value, max_parallelism) for value in encoded.dictionary.to_pylist()],
                      np.int64)
    return groups[encoded.indices.to_numpy(zero_copy_only=False)]


def _key_groups(column: pa.Array | pa.ChunkedArray, max_parallelism: int) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise InvalidRecordError("a key column must not contain nulls: filter them out or fill them first")
    kind = column.type
    if pa.types.is_integer(kind) and not (pa.types.is_uint64(kind)):
        return _integer_key_groups(column, max_parallelism)
    return _generic_key_groups(column, max_parallelism)


def column_key_groups(column: pa.Array | pa.ChunkedArray, max_parallelism: int) -> pa.Array:
    """The key group of every value of ``column`` (``int64``), as :func:`assign_to_key_group` computes it."""
    return pa.array(_key_groups(column, max_parallelism))


def column_subtasks(column: pa.Array | pa.ChunkedArray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """The consumer subtask of every value of ``column``: ``key_group * parallelism // max_parallelism``, as a
    NumPy array (its comparisons make the masks that split a batch without another Arrow call each)."""
    return _key_groups(column, max_parallelism) * parallelism // max_parallelism
