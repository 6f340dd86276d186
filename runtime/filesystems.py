"""Opening the fsspec filesystem of a URL a user configured, with errors that name the setting and the fix.

fsspec says ``Protocol not known: foo`` or ``Install s3fs to access S3``; a user needs to know which of the
job's settings holds the URL and what to install, and before the SparkSession starts rather than after.

>>> fs, path = filesystem_for("memory://bucket/data", "FileSource path")
>>> path
'/bucket/data'
>>> filesystem_for("foo://bucket/data", "checkpoint storage")
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: checkpoint storage 'foo://bucket/data': unknown protocol 'foo'. Use a local path, file://, or a protocol fsspec knows (s3://, gs://, abfs://, hdfs://, memory:// ...).
"""

from __future__ import annotations

import fsspec

from runtime.errors import ConfigurationError

__all__ = ["filesystem_for"]

_EXTRAS = {"s3": "pip install 'chandy[s3]' (or s3fs)", "s3a": "pip install 'chandy[s3]' (or s3fs)"}


def filesystem_for(url: str, setting: str):
    """``(filesystem, path)`` for ``url``; ConfigurationError naming ``setting`` when it cannot be used."""
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:
        install = _EXTRAS.get(protocol, "install the package named above")
        raise ConfigurationError(
            f"{setting} {url!r}: the {protocol}:// protocol needs a package that is not installed ({exc}). "
            f"Fix: {install}, on the driver and on every executor.") from exc
    except ValueError as exc:
        if "Protocol not known" not in str(exc):
            raise
        raise ConfigurationError(
            f"{setting} {url!r}: unknown protocol '{protocol}'. Use a local path, file://, or a protocol fsspec "
            "knows (s3://, gs://, abfs://, hdfs://, memory:// ...).") from exc
