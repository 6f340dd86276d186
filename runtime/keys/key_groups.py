"""Key groups: the unit in which keyed state is partitioned, routed, snapshotted and rescaled.

Pure functions, the same as Flink's ``KeyGroupRangeAssignment``, so state layouts and routing follow
Flink's rules:

- the number of key groups is the job's ``max_parallelism``, fixed for the life of the job;
- ``key group = murmur(stable_hash(key)) % max_parallelism``;
- ``subtask = key_group * parallelism // max_parallelism``;
- subtask ``i`` owns the contiguous, inclusive range
  ``[ceil(i * maxP / p), floor(((i + 1) * maxP - 1) / p)]``.

Preconditions (checked by the job graph, assumed here): ``1 <= parallelism <= max_parallelism <= 32768``.

>>> key_group_range(128, parallelism=2, subtask=0), key_group_range(128, parallelism=2, subtask=1)
(KeyGroupRange(start=0, end=63), KeyGroupRange(start=64, end=127))
>>> group = assign_to_key_group("spark", 128)
>>> group, key_group_to_subtask(group, 128, 2), group in key_group_range(128, 2, 0)
(24, 0, True)
"""

from __future__ import annotations

from typing import NamedTuple

from runtime.keys.stable_hash import stable_hash

__all__ = [
    "MIN_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "default_max_parallelism",
    "murmur_scramble",
    "assign_to_key_group",
    "key_group_to_subtask",
    "key_group_range",
    "subtask_for_key",
]

MIN_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_M32 = 0xFFFFFFFF


class KeyGroupRange(NamedTuple):
    """The inclusive range ``start..end`` of key groups one subtask owns.

    >>> owned = KeyGroupRange(43, 85)
    >>> len(owned), 85 in owned, 86 in owned, list(owned)[:3]
    (43, True, False, [43, 44, 45])
    """

    start: int
    end: int

    def __contains__(self, key_group: object) -> bool:  # type: ignore[override]
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __iter__(self):
        return iter(range(self.start, self.end + 1))


def default_max_parallelism(parallelism: int) -> int:
    """Flink's default: ``roundUpToPowerOfTwo(p + p / 2)`` clamped to ``[128, 32768]``.

    >>> default_max_parallelism(4), default_max_parallelism(200)
    (128, 512)
    """
    wanted = parallelism + parallelism // 2
    power = 1 << max(0, (wanted - 1).bit_length())
    return min(max(power, MIN_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def _rotl32(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _M32


def murmur_scramble(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: Murmur3's mixing of one 32-bit block, made non-negative."""
    code = (code * 0xCC9E2D51) & _M32
    code = _rotl32(code, 15)
    code = (code * 0x1B873593) & _M32
    code = _rotl32(code, 13)
    code = (code * 5 + 0xE6546B64) & _M32
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _M32
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _M32
    code ^= code >> 16
    if code & 0x80000000:  # negative as a Java int: Flink returns its absolute value
        code = (-(code - (1 << 32))) if code != 0x80000000 else 0
    return code


def assign_to_key_group(key, max_parallelism: int) -> int:
    """The key group of ``key``: ``murmur(stable_hash(key)) % max_parallelism``."""
    return murmur_scramble(stable_hash(key)) % max_parallelism


def key_group_to_subtask(key_group: int, max_parallelism: int, parallelism: int) -> int:
    """The subtask index that owns ``key_group`` at ``parallelism``."""
    return key_group * parallelism // max_parallelism


def subtask_for_key(key, max_parallelism: int, parallelism: int) -> int:
    """The subtask index that owns ``key`` at ``parallelism``."""
    return assign_to_key_group(key, max_parallelism) * parallelism // max_parallelism


def key_group_range(max_parallelism: int, parallelism: int, subtask: int) -> KeyGroupRange:
    """The contiguous range of key groups owned by ``subtask`` of ``parallelism``."""
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)
