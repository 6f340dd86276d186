"""PyFlink's ``pyflink.datastream.checkpoint_storage``: where checkpoints are written, as objects for
``env.get_checkpoint_config().set_checkpoint_storage(...)``.

Chandy writes checkpoints to any fsspec URL; these classes name one. ``JobManagerCheckpointStorage`` (Flink
keeps checkpoints in the JobManager's memory) maps to a directory on the driver's local disk: the nearest
equivalent that survives a restart of the job's tasks.

>>> from runtime.checkpoint_config import CheckpointConfig
>>> config = CheckpointConfig().set_checkpoint_storage(FileSystemCheckpointStorage("s3://bucket/checkpoints"))
>>> config.get_checkpoint_storage()
's3://bucket/checkpoints'
"""

from __future__ import annotations

import os

from runtime.errors import ConfigurationError

__all__ = ["CheckpointStorage", "FileSystemCheckpointStorage", "JobManagerCheckpointStorage",
           "CustomCheckpointStorage"]


class CheckpointStorage:
    """Where a job's checkpoints go: ``url``, an fsspec URL.

    >>> CheckpointStorage("file:///tmp/ck").url
    'file:///tmp/ck'
    """

    def __init__(self, url: str):
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"{type(self).__name__} needs a path or URL, got {url!r}")
        self.url = url if "://" in url else "file://" + os.path.abspath(url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints in a file system: a local path or any fsspec URL (``s3://``, ``gs://``, ``hdfs://``, ...).

    ``file_state_size_threshold`` and ``write_buffer_size`` tune Flink's JVM writers; Chandy accepts them and
    writes one Arrow file per operator subtask whatever their values.

    >>> FileSystemCheckpointStorage("s3://bucket/ck", file_state_size_threshold=1024).get_checkpoint_path()
    's3://bucket/ck'
    """

    def __init__(self, checkpoint_path: str, file_state_size_threshold: int | None = None,
                 write_buffer_size: int | None = None):
        super().__init__(checkpoint_path)

    def get_checkpoint_path(self) -> str:
        return self.url


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink's in-memory checkpoints of the JobManager; in Chandy, a directory on the driver's local disk
    (``checkpoint_path``, default ``./chandy-checkpoints``), which the executors reach when Spark runs locally.
    On a cluster use :class:`FileSystemCheckpointStorage` with a shared store.

    >>> JobManagerCheckpointStorage().url.endswith("/chandy-checkpoints")
    True
    """

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None):
        super().__init__(checkpoint_path or "chandy-checkpoints")

    def get_checkpoint_path(self) -> str:
        return self.url


class CustomCheckpointStorage(CheckpointStorage):
    """A JVM ``CheckpointStorage`` class by name: not applicable, Chandy runs no JVM code of its own.

    >>> try:
    ...     CustomCheckpointStorage(object())
    ... except ConfigurationError as e:
    ...     print(str(e)[:64])
    CustomCheckpointStorage wraps a JVM class, and Chandy runs no JV
    """

    def __init__(self, j_custom_checkpoint_storage):
        raise ConfigurationError("CustomCheckpointStorage wraps a JVM class, and Chandy runs no JVM code of its own: "
                                 "use FileSystemCheckpointStorage(url) with any fsspec URL.")
