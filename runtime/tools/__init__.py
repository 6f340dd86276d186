"""Command-line tools: the ``chandy`` CLI, the demo job, checkpoint inspection, packaging for spark-submit.

>>> from runtime.tools.cli import main
>>> main(["checkpoints", "memory://tools-doc/my-job"])
No completed checkpoint in .../my-job
0
"""
