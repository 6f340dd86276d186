"""Keys and values as RocksDB bytes: one byte string per key, so that equal keys find one row.

A row's key is its key group (2 bytes, big-endian: a key-group range is a contiguous key range), the length of
the encoded key (4 bytes) and the encoded key; a map state's row appends the encoded map key. The length makes
one key's rows a prefix no other key's rows share (``"a"`` and ``"ab"`` are both strings).

Pickle alone would not do for keys: it writes a back-reference where an object repeats, so two equal tuples
pickle differently when one holds the same string twice by identity. Strings, integers, floats, bytes, None,
booleans and tuples of these are encoded here; anything else is pickled without back-references. Keys Python
finds equal are one key, as in a dict (and on the heap backend): ``1``, ``1.0`` and ``True`` (decoded as ``1``),
``-0.0`` and ``0.0``, and every NaN (:func:`~runtime.keys.canonical.canonical_key`).

>>> encode_key("user-1"), decode_key(encode_key(("a", 2, None)))
(b'suser-1', ('a', 2, None))
>>> row_prefix(5, "ab")[:2], len(row_prefix(5, "ab"))
(b'\\x00\\x05', 9)
>>> decode_key(encode_key(float("nan"))) is decode_key(encode_key(float("-nan")))
True
"""

from __future__ import annotations

import io
import pickle
import struct

from runtime.keys.canonical import NAN_KEY

__all__ = ["encode_key", "decode_key", "row_prefix", "split_row", "group_bound", "GROUP_BYTES"]

GROUP_BYTES = 2
_LENGTH = struct.Struct(">I")
_FLOAT = struct.Struct(">d")
_HEADER = GROUP_BYTES + _LENGTH.size


def _pickled(value) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.fast = True  # no memo: equal values pickle alike whatever their identities
    pickler.dump(value)
    return buffer.getvalue()


def encode_key(key) -> bytes:
    """``key`` as bytes: equal keys of one type give equal bytes."""
    kind = type(key)
    if kind is str:
        return b"s" + key.encode("utf-8", "surrogatepass")
    if kind is int:
        return b"i" + str(key).encode()
    if kind is tuple:
        parts = [encode_key(part) for part in key]
        return b"t" + b"".join(_LENGTH.pack(len(part)) + part for part in parts)
    if kind is bytes:
        return b"b" + key
    if key is None:
        return b"n"
    if kind is bool:  # True == 1 and 1.0 == 1 in Python: one key, as on the heap (decoded as the int)
        return b"i1" if key else b"i0"
    if kind is float or key is NAN_KEY:
        if key != key:
            return b"N"
        if key.is_integer():
            return b"i" + str(int(key)).encode()
        return b"f" + _FLOAT.pack(key)
    return b"p" + _pickled(key)


def decode_key(data: bytes):
    """The key :func:`encode_key` encoded."""
    tag = data[:1]
    if tag == b"s":
        return data[1:].decode("utf-8", "surrogatepass")
    if tag == b"i":
        return int(data[1:])
    if tag == b"t":
        parts, at = [], 1
        while at < len(data):
            (size,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            parts.append(decode_key(data[at:at + size]))
            at += size
        return tuple(parts)
    if tag == b"b":
        return bytes(data[1:])
    if tag == b"n":
        return None
    if tag == b"N":
        return NAN_KEY
    if tag == b"f":
        return _FLOAT.unpack_from(data, 1)[0]
    if tag == b"p":
        return pickle.loads(data[1:])
    raise ValueError(f"not an encoded key: {bytes(data[:16])!r}")


def row_prefix(group: int, key) -> bytes:
    """What every row of ``key`` (in key group ``group``) starts with."""
    encoded = encode_key(key)
    return group.to_bytes(GROUP_BYTES, "big") + _LENGTH.pack(len(encoded)) + encoded


def split_row(row: bytes) -> tuple[int, bytes, bytes]:
    """``(key group, encoded key, the rest)`` of a row's key (the rest: a map state's encoded map key)."""
    (size,) = _LENGTH.unpack_from(row, GROUP_BYTES)
    return int.from_bytes(row[:GROUP_BYTES], "big"), row[_HEADER:_HEADER + size], row[_HEADER + size:]


def group_bound(group: int) -> bytes:
    """The first possible row of key group ``group`` (and the end, exclusive, of group ``group - 1``)."""
    return group.to_bytes(GROUP_BYTES, "big") if group < (1 << 8 * GROUP_BYTES) else b"\xff" * (GROUP_BYTES + 1)
