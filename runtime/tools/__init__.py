"""Command-line tools: the ``chandy`` CLI, the demo job, checkpoint inspection, packaging for spark-submit."""
