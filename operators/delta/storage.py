"""The storage options deltalake is given: the user's, plus what the environment implies.

deltalake (Rust's object_store) reads ``AWS_ENDPOINT_URL`` and the credentials from the environment as s3fs does,
but refuses a plain ``http://`` endpoint (a local S3-compatible server: MinIO, moto) unless told
``AWS_ALLOW_HTTP``; a user who pointed both libraries at such a server has said so already.

>>> delta_storage_options({}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
{'AWS_ALLOW_HTTP': 'true'}
>>> delta_storage_options({"AWS_ALLOW_HTTP": "false"}, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
{'AWS_ALLOW_HTTP': 'false'}
>>> delta_storage_options({}, {}) is None
True
"""

from __future__ import annotations

import os

__all__ = ["delta_storage_options", "fsspec_storage_options"]

_S3FS_NAMES = {"AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token",
               "AWS_ENDPOINT_URL": "endpoint_url"}


def delta_storage_options(options: dict, environ=os.environ) -> dict | None:
    merged = dict(options)
    endpoint = (merged.get("AWS_ENDPOINT_URL") or merged.get("aws_endpoint_url") or environ.get("AWS_ENDPOINT_URL_S3")
                or environ.get("AWS_ENDPOINT_URL") or "")
    if endpoint.startswith("http://") and not any(k.upper() == "AWS_ALLOW_HTTP" for k in merged):
        merged["AWS_ALLOW_HTTP"] = "true"
    return merged or None


def fsspec_storage_options(path: str, options: dict) -> dict:
    """The same options for fsspec, which the writers write files with: s3fs's names for deltalake's AWS keys.

    >>> fsspec_storage_options("s3://bucket/t", {"AWS_ACCESS_KEY_ID": "k", "AWS_REGION": "eu-west-1"})
    {'key': 'k', 'client_kwargs': {'region_name': 'eu-west-1'}}
    >>> fsspec_storage_options("/data/t", {"AWS_ACCESS_KEY_ID": "k"})
    {}
    """
    if not path.startswith(("s3://", "s3a://")):
        return {}
    converted: dict = {}
    for name, value in options.items():
        upper = name.upper()
        if upper in _S3FS_NAMES:
            converted[_S3FS_NAMES[upper]] = value
        elif upper == "AWS_REGION":
            converted.setdefault("client_kwargs", {})["region_name"] = value
    return converted
