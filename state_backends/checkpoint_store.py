"""The narrow interface checkpoints are stored through: read, write, create-if-absent, list, delete.

Every operation either succeeds or raises. A missing path raises ``FileNotFoundError`` (absence is a fact the
caller may act on); every other failure (no permission, a network or authentication error, a path below a
regular file) raises :class:`~runtime.errors.StorageUnreachableError`, so that "cannot reach the storage"
never reads as "there are no checkpoints". Nothing asks ``exists()`` to decide whether a checkpoint is valid.

>>> import fsspec
>>> store = CheckpointStore(fsspec.filesystem("memory"), "memory://doc-store")
>>> store.write("/doc-store/job/a", b"x")
>>> store.create_if_absent("/doc-store/job/a", b"y"), store.read("/doc-store/job/a")
(False, b'x')
>>> store.list("/doc-store/job"), store.list("/doc-store/none")
(['a'], [])
>>> store.delete("/doc-store/job"); store.list("/doc-store/job")
[]
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import uuid
from typing import Callable, Iterator, TypeVar

import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from runtime.errors import StorageUnreachableError
from runtime.filesystems import is_object_store

__all__ = ["CheckpointStore"]

_WRITE_BUFFER = 1 << 20
T = TypeVar("T")


class CheckpointStore:
    """Files of one fsspec filesystem, addressed by the filesystem's own paths; ``url`` names it in errors."""

    def __init__(self, fs, url: str):
        self.fs = fs
        self.url = url

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def _call(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except FileNotFoundError:
            raise
        except Exception as exc:  # anything but absence: the storage cannot be used right now
            raise StorageUnreachableError(self.url, exc) from exc

    # -- reading ---------------------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        def read() -> bytes:
            with self.fs.open(path, "rb") as f:
                return f.read()
        return self._call(read)

    def size(self, path: str) -> int:
        return self._call(lambda: int(self.fs.size(path)))

    def list(self, directory: str) -> list[str]:
        """Names of the entries of ``directory``, sorted; ``[]`` when it does not exist."""
        def listing() -> list[str]:
            entries = self.fs.ls(directory, detail=True)
            names = []
            for entry in entries:
                name = entry["name"].rstrip("/")
                if name == directory.rstrip("/") and entry.get("type") == "file":
                    raise NotADirectoryError(f"{directory} is a file, not a directory")
                names.append(posixpath.basename(name))
            return sorted(names)
        # fsspec may cache listings (s3fs does unless told not to, and then answers size() from them): a cached
        # one would hide what other processes wrote since, so the store neither uses nor leaves one.
        self.fs.invalidate_cache(directory)
        try:
            return self._call(listing)
        except FileNotFoundError:
            return []
        finally:
            self.fs.invalidate_cache(directory)

    @contextlib.contextmanager
    def open_input(self, path: str) -> Iterator:
        handle = self._call(lambda: self.fs.open(path, "rb"))
        with handle:
            yield handle

    # -- writing ---------------------------------------------------------------------------------------

    def makedirs(self, directory: str) -> None:
        if is_object_store(self.fs):  # no directories to make; s3fs would create a missing bucket
            return
        self._call(lambda: self.fs.makedirs(directory, exist_ok=True))

    @contextlib.contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        """An Arrow output stream replacing ``path``. A local file is written by Arrow itself, without the GIL
        (Arrow's writer calls a Python file once per buffer, each call waiting for the GIL the subtask's
        thread holds up to 5 ms at a time: most of a checkpoint's time at 1 GB); any other file through a buffer."""
        self.makedirs(posixpath.dirname(path))
        if type(self.fs) is LocalFileSystem:
            sink = self._call(lambda: pa.OSFile(path, "wb"))
            with sink:
                yield sink
        else:
            handle = self._call(lambda: self.fs.open(path, "wb"))
            with handle, pa.output_stream(handle, buffer_size=_WRITE_BUFFER) as sink:
                yield sink

    def write(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data``; readers see the old content or the new, never half of it (a rename
        on local disks; one PUT on object stores)."""
        self.makedirs(posixpath.dirname(path))
        if self.is_local:
            temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
            self._call(lambda: self._write_local(temporary, data))
            self._call(lambda: os.replace(temporary, path))
        else:
            self._call(lambda: self._write_remote(path, data, "wb"))

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Write ``data`` to ``path`` unless something is there already. True when ``path`` now holds ``data``
        (written now, or already there: a retried write whose first try landed); False when it holds
        something else, which is kept.

        Local disks: a hard link of a finished temporary file (atomic and exclusive); where the filesystem has
        no hard links (some FUSE and SMB mounts), an exclusive create. Elsewhere: a look, then an exclusive
        create (mode ``xb``) where the filesystem supports one, else a plain write. Not every fsspec
        filesystem enforces ``xb``, so the look comes first whatever the mode promises."""
        self.makedirs(posixpath.dirname(path))
        existing = self._read_if_present(path)
        if existing is not None:
            return existing == data
        try:
            if self.is_local:
                self._create_local(path, data)
            else:
                self._create_remote(path, data)
            return True
        except FileExistsError:  # someone else created it meanwhile
            return self._read_if_present(path) == data

    def _read_if_present(self, path: str) -> bytes | None:
        try:
            return self.read(path)
        except FileNotFoundError:
            return None

    def _create_local(self, path: str, data: bytes) -> None:
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.inprogress"
        self._call(lambda: self._write_local(temporary, data))
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links on this filesystem: an exclusive create, visible while it is written
            try:
                self._write_local(path, data, mode="xb")
            except FileExistsError:
                raise
            except OSError as exc:
                raise StorageUnreachableError(self.url, exc) from exc
        finally:
            with contextlib.suppress(OSError):
                os.remove(temporary)

    def _create_remote(self, path: str, data: bytes) -> None:
        try:
            self._write_remote(path, data, "xb")
        except FileExistsError:
            raise
        except (ValueError, NotImplementedError):  # no exclusive mode: the look before was the check
            self._call(lambda: self._write_remote(path, data, "wb"))
        except Exception as exc:  # anything but absence: the storage cannot be used right now
            raise StorageUnreachableError(self.url, exc) from exc

    @staticmethod
    def _write_local(path: str, data: bytes, mode: str = "wb") -> None:
        with open(path, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def _write_remote(self, path: str, data: bytes, mode: str) -> None:
        with self.fs.open(path, mode) as f:
            f.write(data)

    def delete(self, path: str) -> None:
        """Remove ``path`` (a directory with everything below it); nothing happens when it is absent."""
        try:
            self._call(lambda: self.fs.rm(path, recursive=True))
        except FileNotFoundError:
            pass
