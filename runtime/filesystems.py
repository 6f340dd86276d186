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

``storage_options`` are fsspec's keyword arguments for the protocol (for s3://: ``endpoint_url``, ``key``,
``secret``, ``client_kwargs`` ...); without them the protocol's own environment variables apply (for s3://, botocore's
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``), and fsspec's
``FSSPEC_<PROTOCOL>_<OPTION>`` variables. Object stores are opened without fsspec's listings cache: another process
(an executor, a restarted attempt) may have written since a listing, and a cached one would hide that.
"""

from __future__ import annotations

import fsspec

from runtime.errors import ConfigurationError

__all__ = ["filesystem_for", "is_object_store", "failing_fast"]

_EXTRAS = {"s3": "pip install 'chandy[s3]' (or s3fs)", "s3a": "pip install 'chandy[s3]' (or s3fs)"}
# Filesystems whose ``ls`` results fsspec caches (and whose ``exists``/``info`` then trust the cache), and where
# ``makedirs`` creates the bucket: Chandy turns the cache off and never asks them for directories.
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs"}
_PROBE_ATTEMPTS = 2  # a launch probe's tries: one refused connection is not worth botocore's backoff loop
_PROBE_CONNECT_TIMEOUT_S = 5


def filesystem_for(url: str, setting: str, storage_options: dict | None = None):
    """``(filesystem, path)`` for ``url``; ConfigurationError naming ``setting`` when it cannot be used."""
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    options = dict(storage_options or {})
    if protocol in _OBJECT_STORES:
        options.setdefault("use_listings_cache", False)
    try:
        return fsspec.core.url_to_fs(url, **options)
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


def is_object_store(fs) -> bool:
    """True for filesystems without real directories (S3, GCS): nothing waits for ``makedirs`` there, and on
    them it would create a missing bucket instead of reporting it.

    >>> import fsspec
    >>> is_object_store(fsspec.filesystem("memory")), is_object_store(fsspec.filesystem("file"))
    (False, False)
    """
    return bool(_OBJECT_STORES.intersection(_protocols(fs)))


def _protocols(fs) -> tuple:
    return tuple(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)


def failing_fast(fs):
    """``fs`` for a probe at launch: an S3 filesystem (s3fs) made anew with few retries and a short connect
    timeout, so that a refused connection fails the launch in seconds rather than after botocore's retry loop
    (the running job keeps its patient retries). Any other filesystem as it is.

    >>> import fsspec
    >>> memory = fsspec.filesystem("memory")
    >>> failing_fast(memory) is memory
    True
    """
    if "s3" not in _protocols(fs):
        return fs
    options = dict(fs.storage_options)
    config = dict(options.get("config_kwargs") or {})
    config["retries"] = {"max_attempts": _PROBE_ATTEMPTS, "mode": "standard"}
    config["connect_timeout"] = _PROBE_CONNECT_TIMEOUT_S
    options.update(config_kwargs=config, skip_instance_cache=True, use_listings_cache=False)
    probe = type(fs)(*fs.storage_args, **options)
    probe.retries = _PROBE_ATTEMPTS  # s3fs's own loop around botocore's, for errors it deems transient
    return probe
