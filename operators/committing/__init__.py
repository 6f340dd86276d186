"""Sinks with one committer: subtasks write files, one commit per checkpoint makes them visible (Delta Lake, Iceberg)."""

from operators.committing.committables import Committable, CommittableCollector
from operators.committing.sink import CommittableWriterOperator, FileWriter, GlobalCommitSink

__all__ = ["Committable", "CommittableCollector", "CommittableWriterOperator", "FileWriter", "GlobalCommitSink"]
