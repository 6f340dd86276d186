"""Zipping Chandy's own packages for ``spark-submit --py-files``, so executors can import them."""

from __future__ import annotations

import os
import zipfile

__all__ = ["PACKAGES", "build_pyfiles_zip"]

PACKAGES = ("runtime", "operators", "state_backends")


def build_pyfiles_zip(destination: str) -> str:
    """Write the packages' ``.py`` files to the zip at ``destination``; returns its path.

    >>> import os, tempfile, zipfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with zipfile.ZipFile(build_pyfiles_zip(os.path.join(folder, "chandy.zip"))) as archive:
    ...         names = archive.namelist()
    >>> "runtime/__init__.py" in names, "state_backends/heap/backend.py" in names, any("tests/" in n for n in names)
    (True, True, False)
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for folder, dirs, files in os.walk(os.path.join(root, package)):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in sorted(files):
                    if name.endswith(".py"):
                        path = os.path.join(folder, name)
                        archive.write(path, os.path.relpath(path, root))
    return destination
