"""One key per value: keys compared the way the stable hash sees them.

Python's ``float("nan") == float("nan")`` is False, so a dict would make every NaN key a key of its own (a
``key_by`` on a float column with NaNs counted each NaN record alone). Java's ``Double.equals`` makes all NaNs
one key, and so does :func:`canonical_key`: every NaN, alone or inside a tuple, becomes :data:`NAN_KEY`, one
object that dicts find by identity and that unpickles to itself, so a restored state keeps one NaN key.
``-0.0`` and ``0.0`` are already one key: they are equal and the stable hash maps them alike.

Canonicalising is off the hot path: callers look a key up first and canonicalise only on a miss.

>>> counts = {}
>>> for key in (float("nan"), float("nan"), (1, float("nan")), (1, float("nan"))):
...     key = canonical_key(key)
...     counts[key] = counts.get(key, 0) + 1
>>> list(counts.values())
[2, 2]
>>> import pickle
>>> pickle.loads(pickle.dumps(NAN_KEY)) is NAN_KEY
True
"""

from __future__ import annotations

__all__ = ["canonical_key", "canonical_keys", "NAN_KEY", "PLAIN_KEY_TYPES"]


class _NaNKey(float):
    """The NaN every NaN key becomes (a float: arithmetic and printing work as on any NaN)."""

    __slots__ = ()

    def __reduce__(self):
        return _nan_key, ()

    def __repr__(self) -> str:
        return "nan"


def _nan_key() -> "_NaNKey":
    return NAN_KEY


NAN_KEY = _NaNKey("nan")


def canonical_key(key):
    """``key``, with every NaN in it replaced by :data:`NAN_KEY`."""
    if isinstance(key, float):
        return NAN_KEY if key != key else key
    if isinstance(key, tuple) and any(isinstance(part, (float, tuple)) for part in key):
        parts = [canonical_key(part) for part in key]
        if all(new is old for new, old in zip(parts, key)):
            return key  # nothing changed: the same object, so callers can tell
        make = getattr(type(key), "_make", None)  # a namedtuple
        return make(parts) if make is not None else tuple(parts)
    return key


PLAIN_KEY_TYPES = frozenset({int, str, bytes, bool, type(None)})  # keys that are their own canonical form


def canonical_keys(keys: list) -> list:
    """``keys`` with every key canonical; the list itself when all are of a plain type (the usual case).

    >>> keys = [1, "a"]
    >>> canonical_keys(keys) is keys, canonical_keys([float("nan"), float("nan")])[1] is NAN_KEY
    (True, True)
    """
    if PLAIN_KEY_TYPES.issuperset(set(map(type, keys))):
        return keys
    return [canonical_key(k) for k in keys]
