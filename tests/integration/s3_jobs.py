"""What the chaos tests need to run on the session's S3 server (tests/s3_server.py): their inputs uploaded, and a
checkpoint storage on S3 that can kill its writer halfway through a state file.

Executors reach the server through the environment the session set before Spark started (``AWS_ENDPOINT_URL``
and the dummy credentials), as a user's executors would; everything here is picklable and importable there.
"""

from __future__ import annotations

import s3fs

from tests.integration import chaos

__all__ = ["ChaosUploadS3FileSystem", "upload"]


class ChaosUploadS3FileSystem(chaos.KillsMidUpload, s3fs.S3FileSystem):
    """S3 checkpoint storage that SIGKILLs the writer halfway through a state file, when ``kill-during-upload`` is
    planned (as :class:`tests.integration.chaos.ChaosUploadFileSystem` does on a local disk)."""


def upload(s3_server, local_directory: str, bucket: str, prefix: str) -> str:
    """The files of ``local_directory`` copied to ``s3://bucket/prefix/``: that URL."""
    s3_server.filesystem().put(local_directory.rstrip("/") + "/", f"{bucket}/{prefix}/", recursive=True)
    return f"s3://{bucket}/{prefix}"
