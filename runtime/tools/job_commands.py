"""``chandy savepoint`` and ``chandy stop``: find a running job through its checkpoint storage and ask its
driver (:mod:`runtime.driver.job_control`).

>>> control_job("memory://job-commands-doc/orders", "savepoint")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
runtime.errors.JobControlError: No job of /job-commands-doc/orders is running with checkpointing: ...
"""

from __future__ import annotations

import os

from runtime.driver.job_control import request
from runtime.errors import CheckpointNotFoundError, JobControlError
from state_backends.storage import CheckpointStorage

__all__ = ["control_job"]


def control_job(directory: str, action: str, path: str | None = None, drain: bool = False) -> str:
    """Ask the job running with job directory ``directory`` for ``action`` (``savepoint`` or ``stop``); returns
    the savepoint's URL. Raises JobControlError naming what went wrong."""
    storage = CheckpointStorage.for_job_directory(directory if "://" in directory else directory.rstrip("/"))
    try:
        endpoint = storage.read_job_control()
    except CheckpointNotFoundError as exc:
        raise JobControlError(str(exc)) from None
    if path is not None and "://" not in path:  # the driver resolves paths in its own working directory
        path = os.path.abspath(path)
    arguments = {"path": path}
    if action == "stop":
        arguments["drain"] = drain
    answer = request((endpoint["host"], endpoint["port"]), endpoint["token"], action,
                     certificate=endpoint.get("certificate"), **arguments)
    if not answer.get("ok"):
        raise JobControlError(f"Job '{endpoint.get('job_name')}' ({endpoint.get('job_id', '?')[:8]}): "
                              f"{answer.get('error')}")
    return answer["path"]
