"""Checksums of checkpoint files, written as ``<algorithm>:<hex>``: XXH3 (64 bits) for every file this version
writes, CRC-32 still checked in the files of earlier versions.

Every byte of state a checkpoint stores is checksummed once when written and once when restored, so the
algorithm's speed is part of a checkpoint's CPU cost: measured here, zlib's CRC-32 takes ~0.6 s per GB and XXH3
~0.08 s (the ``xxhash`` package, C; the machine's two cores busy with other work). Damage detection is what both
give: neither is a cryptographic hash, nor needs to be (a checkpoint's storage is trusted not to forge files; it
is not trusted to keep every bit).

>>> rows = RowsChecksum()
>>> rows.add(3, b"state"); rows.add(-1, b"operator")
>>> rows.text()
'xxh3:97e240cc0c18c277'
>>> of_bytes(b"state")
'xxh3:6ddef6a542f52cb4'
>>> of_bytes(b"state", like="crc32:00000000")      # as an earlier version's file was checked
'crc32:a393d2fb'
>>> RowsChecksum.like("crc32:2b17a761").text()
'crc32:00000000'
"""

from __future__ import annotations

import struct
import zlib

import xxhash

from runtime.errors import CorruptCheckpointError

__all__ = ["RowsChecksum", "of_bytes", "WRITTEN"]

WRITTEN = "xxh3"  # the algorithm of what this version writes
_GROUP = struct.Struct("<i")


def _algorithm(text: str | None) -> str:
    algorithm = WRITTEN if text is None else text.partition(":")[0]
    if algorithm not in ("xxh3", "crc32"):
        raise CorruptCheckpointError(f"checksum {text!r} is of an algorithm this version does not know (it knows "
                                     "xxh3 and crc32): restore with the version that took the checkpoint")
    return algorithm


class RowsChecksum:
    """The checksum of a state file's ``(key group, payload)`` rows, in file order: each row's key group (4 bytes,
    little-endian, signed) then its payload. Computed over the rows as they are written, not the file's bytes:
    see :func:`state_backends.storage.checksum`."""

    def __init__(self, algorithm: str = WRITTEN):
        self.algorithm = algorithm
        self._crc = 0
        self._hash = xxhash.xxh3_64() if algorithm == "xxh3" else None

    @classmethod
    def like(cls, text: str | None) -> "RowsChecksum":
        """A checksum to compare with ``text``: of the same algorithm (this version's when None)."""
        return cls(_algorithm(text))

    def add(self, group: int, payload) -> None:
        if self._hash is not None:
            self._hash.update(_GROUP.pack(group))
            self._hash.update(payload)
        else:
            self._crc = zlib.crc32(payload, zlib.crc32(_GROUP.pack(group), self._crc))

    def text(self) -> str:
        if self._hash is not None:
            return f"xxh3:{self._hash.intdigest():016x}"
        return f"crc32:{self._crc:08x}"


def of_bytes(data, like: str | None = None) -> str:
    """The checksum of a whole file's bytes (a RocksDB file, a state table), in the algorithm of ``like`` (this
    version's when None)."""
    if _algorithm(like) == "xxh3":
        return f"xxh3:{xxhash.xxh3_64_intdigest(data):016x}"
    return f"crc32:{zlib.crc32(data):08x}"
