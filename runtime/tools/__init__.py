"""Command-line tools: the ``chandy`` CLI, the demo job, checkpoint inspection, packaging for spark-submit.

>>> import fsspec
>>> from runtime.tools.cli import main
>>> fsspec.filesystem("memory").makedirs("/tools-doc/my-job", exist_ok=True)  # a job with no checkpoint yet
>>> main(["checkpoints", "memory://tools-doc/my-job"])
No completed checkpoint in .../my-job
0
"""
