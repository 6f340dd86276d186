"""Which checkpoint a user asked to restore: an id, ``"latest"``, or a ``chk-<n>`` path, made concrete.

Every answer is a checkpoint whose ``_metadata`` reads and whose state files are all present; anything
else raises an error that names the problem and lists the usable checkpoints.
"""

from __future__ import annotations

import os
import re

from runtime.errors import CheckpointNotFoundError, CorruptCheckpointError
from state_backends.storage import CheckpointStorage

__all__ = ["RESTORE_CONF", "resolve_restore"]

RESTORE_CONF = "spark.chandy.restoreFrom"
_CHK_PATH = re.compile(r"^(?P<parent>.*)/chk-(?P<id>\d+)/?(_metadata)?$")


def resolve_restore(storage: CheckpointStorage, restore_from) -> tuple[CheckpointStorage, dict]:
    """``(storage to read from, validated metadata)`` for ``restore_from``."""
    if isinstance(restore_from, bool):
        raise TypeError(f"restore_from must be a checkpoint id, 'latest' or a path, not {restore_from!r}")
    if isinstance(restore_from, int) or (isinstance(restore_from, str) and restore_from.strip().isdigit()):
        return storage, storage.validated_metadata(int(restore_from))
    if isinstance(restore_from, str) and restore_from.strip().lower() == "latest":
        for metadata in reversed(storage.completed()):
            if not storage.problems(metadata):
                return storage, metadata
        raise CheckpointNotFoundError(f"restore_from='latest': job directory {storage.job_dir} holds no usable "
                                      "checkpoint.")
    if isinstance(restore_from, str):
        text = restore_from.strip()
        if "://" not in text:
            text = "file://" + os.path.abspath(text)
        match = _CHK_PATH.match(text.rstrip("/"))
        if match:
            other = CheckpointStorage.for_job_directory(match.group("parent"))
            return other, other.validated_metadata(int(match.group("id")))
        raise CorruptCheckpointError(f"restore_from={restore_from!r} is neither a checkpoint id, 'latest', nor the "
                                     f"path of a chk-<n> directory. {storage.usable_hint()}")
    raise TypeError(f"restore_from must be a checkpoint id, 'latest' or a path, not {type(restore_from).__name__}")
