"""Sinks whose subtasks write files and whose one committer makes them visible, one commit per checkpoint.

Flink's sink topology (``SinkWriter`` -> ``Committer``, with a global committer where a table takes one commit
per checkpoint, as Delta Lake and Iceberg do) in two operators of the job graph:

- the **writer** (the sink's parallelism) writes each subtask's files; ahead of each barrier it closes them
  (durable, invisible) and sends their descriptions downstream as a :class:`Committable`;
- the **committer** (parallelism 1) keeps committables in its checkpointed state and, when checkpoint n
  completes, commits every checkpoint up to n whose files are all in, as one commit of the table, recording the
  checkpoint id in it. Before committing it asks the table for the highest checkpoint this sink committed, so
  a commit repeated after a restore is recognised and skipped (and a restore of a checkpoint older than the
  table's newest commit of this sink, which would write rows twice, is refused).

A subclass implements :meth:`GlobalCommitSink.create_file_writer`, :meth:`GlobalCommitSink.committed_checkpoint`
and :meth:`GlobalCommitSink.commit`; ``sink_to`` builds the two operators.

>>> class ListTable(GlobalCommitSink):   # a "table" that is a list of commits
...     commits = []
...     def create_file_writer(self, subtask, parallelism):
...         return ListWriter()
...     def committed_checkpoint(self):
...         return max((c for c, _ in self.commits if c is not None), default=None)
...     def commit(self, files, checkpoint_id):
...         self.commits.append((checkpoint_id, files))
...         return True
>>> class ListWriter(FileWriter):
...     def __init__(self): self.rows = []
...     def write(self, records): self.rows.extend(records)
...     def prepare_commit(self):
...         files, self.rows = tuple(self.rows), []
...         return files
>>> committer = ListTable().create_writer(subtask_index=0, parallelism=1); committer.open(None)
>>> committer.write_batch([Committable(1, 0, 1, ("a", "b"))]); committer.notify_checkpoint_complete(1)
>>> ListTable.commits
[(1, ('a', 'b'))]
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pyarrow as pa

from operators.committing.committables import Committable, CommittableCollector
from operators.operator import OneInputOperator
from operators.sinks import Sink, SinkWriter
from runtime.errors import ApiUsageError, CheckpointError

__all__ = ["GlobalCommitSink", "FileWriter", "CommittableWriterOperator", "Committable"]

log = logging.getLogger(__name__)


class FileWriter:
    """One writer subtask's files: written by :meth:`write`, closed and described by :meth:`prepare_commit`."""

    def write(self, records: list) -> None:
        raise NotImplementedError

    def prepare_commit(self) -> tuple:
        """Close the files written since the last call (durable from now on, not visible) and describe them: the
        descriptions travel to the committer and into checkpoints, so they must be small and picklable."""
        raise NotImplementedError

    def abort(self) -> None:
        """The subtask ends without handing over what it wrote since the last :meth:`prepare_commit`: delete it
        where that is cheap (a table never references it either way)."""


class GlobalCommitSink(Sink):
    """Base class of sinks with one committer; see the module's documentation.

    ``app_id`` names this sink in the table's commits: the job's name, the committer's uid and the execution, set
    on the driver before launch, and kept in checkpoints so that a restored job keeps it whatever its name.
    :meth:`commit` must skip a commit whose checkpoint the table holds already for ``app_id`` (a committer of a
    failed attempt may still be finishing one), and say so by returning False."""

    app_id: str | None = None
    stream_schema: pa.Schema | None = None

    def create_file_writer(self, subtask: int, parallelism: int) -> FileWriter:
        raise NotImplementedError

    def committed_checkpoint(self) -> int | None:
        """The highest checkpoint id this sink (``self.app_id``) committed to the table, None when none."""
        raise NotImplementedError

    def commit(self, files: tuple, checkpoint_id: int | None) -> bool:
        """Make ``files`` visible in one commit recording ``checkpoint_id`` for ``self.app_id`` (None: a job without
        checkpoints, nothing to record); False when the table holds ``checkpoint_id`` of this sink already."""
        raise NotImplementedError

    def record_schema(self, record_type) -> "pa.Schema":
        """The Arrow schema a stream of records is written with: the sink's own ``schema`` if it was given one,
        else the records' declared row type (``output_type=Types.ROW_NAMED(...)``)."""
        schema = getattr(self, "schema", None)
        if schema is not None:
            return schema
        if record_type is not None and record_type.field_names:
            return pa.schema([pa.field(name, field.to_arrow())
                              for name, field in zip(record_type.field_names, record_type.fields)])
        raise ApiUsageError(
            f"{_describe(self)} writes columns, and the stream's records have no declared row type. Declare one on "
            "the operator before the sink (output_type=Types.ROW_NAMED([...], [...])), give the sink a schema, or "
            "write a columnar stream (to_columnar(schema)).")

    def expect_schema(self, schema: "pa.Schema") -> None:
        """Driver, as the job is declared: the Arrow schema of the batches the writers will get (checked against
        the table's in ``validate``)."""
        self.stream_schema = schema

    def declare_in(self, environment_id: int) -> None:
        """Driver, as ``sink_to`` declares the sink: one sink object serves one ``sink_to`` of a job, since its app id
        and schema are its own."""
        if getattr(self, "_environment_id", None) == environment_id:
            raise ApiUsageError(f"{_describe(self)}: this sink object is written to by another sink_to() of the job "
                                "already. Give each sink_to() its own sink object (each has its own committer and "
                                "records its own commits), or union() the streams first.")
        self._environment_id = environment_id

    def bind(self, job_name: str, uid: str) -> None:
        """Driver, before launch: the app id this sink records in its commits: the job, the committer and this
        execution (a job started afresh must not take the commits of an earlier run of the same job for its own;
        a restored one keeps the id of the run it restores, from the checkpoint)."""
        self.app_id = f"chandy:{job_name}:{uid}:{uuid.uuid4().hex[:8]}"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        """The committer's writer (the sink's ``SinkWriterOperator`` is the committer)."""
        return _GlobalCommitter(self)

    def merge_results(self, results: list) -> int:
        """Driver, end of a bounded job without checkpoints: commit what no checkpoint did. Returns how many files."""
        files = tuple(f for part in results if part for f in part)
        if files:
            self.commit(files, None)
        return len(files)


_COMMITTABLES = "committables"
_APP = "app"
_SNAPSHOT = "snapshot"


class _GlobalCommitter(SinkWriter):
    """The committer: collects committables, commits on checkpoint completion (see the module)."""

    def __init__(self, sink: GlobalCommitSink):
        self.sink = sink
        self.collector = CommittableCollector()
        self.restored_checkpoint: int | None = None
        self.completed = 0  # the newest checkpoint known to be complete
        self.table_checkpoint: int | None = None  # the highest checkpoint id of this sink the table holds

    def restore_state(self, state) -> None:
        state = state if isinstance(state, dict) else {}
        self.collector = CommittableCollector.from_state(list(state.get(_COMMITTABLES, [])))
        apps = state.get(_APP, [])
        if apps:
            self.sink.app_id = apps[0]
        snapshots = state.get(_SNAPSHOT, [])
        self.restored_checkpoint = snapshots[0] if snapshots else None

    def open(self, runtime_context) -> None:
        self.table_checkpoint = self.sink.committed_checkpoint()
        restored = self.restored_checkpoint
        if restored is None:
            return
        if self.table_checkpoint is not None and self.table_checkpoint > restored:
            raise CheckpointError(
                f"{_describe(self.sink)} holds the commit of checkpoint {self.table_checkpoint} of this sink (app id "
                f"{self.sink.app_id!r}), newer than checkpoint {restored} being restored: the rows written after "
                f"checkpoint {restored} are in the table already and would be written twice. Restore checkpoint "
                f"{self.table_checkpoint} (or a later one) instead. For an upgrade, stop the job with a savepoint "
                "(chandy stop, or JobClient.stop_with_savepoint): nothing is committed after it.")
        self.completed = restored  # the restored checkpoint completed: what it holds is due
        self._commit_due()

    def write_batch(self, records: list) -> None:
        for committable in records:
            self.collector.add(committable)
        if self.completed:  # a committable that was in flight when its checkpoint completed (unaligned)
            self._commit_due()

    def snapshot_state(self, checkpoint_id: int):
        return {_COMMITTABLES: self.collector.to_state(), _APP: [self.sink.app_id], _SNAPSHOT: [checkpoint_id]}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.completed = max(self.completed, checkpoint_id)
        self._commit_due()

    def _commit_due(self) -> None:
        if self.table_checkpoint is not None:
            self.collector.drop_through(self.table_checkpoint)
        checkpoint_id, files = self.collector.take_ready(self.completed)
        if checkpoint_id is None or not files:
            return
        self.sink.commit(files, checkpoint_id)
        self.table_checkpoint = checkpoint_id

    def result(self) -> Any:
        """Files no checkpoint committed (a job without checkpoints): the driver commits them."""
        newest = self.collector.newest()
        return list(self.collector.take_ready(newest)[1]) if newest is not None else []


def _describe(sink: GlobalCommitSink) -> str:
    return getattr(sink, "description", None) or type(sink).__name__


class CommittableWriterOperator(OneInputOperator):
    """A :class:`GlobalCommitSink`'s writer subtask. It keeps no state: what it wrote since the last barrier is
    handed over ahead of the next one, and what it wrote after a checkpoint is written again after a restore (the
    files of the failed run are never committed). Its committables name the checkpoint its run restored (their
    epoch), and the one it sends at the end of input names a checkpoint after that one."""

    output_follows_input = False  # one committable per barrier, whatever it wrote

    def __init__(self, name: str, sink: GlobalCommitSink):
        super().__init__(name)
        self.files_sink = sink  # not ``sink``: the job graph takes an operator with a ``sink`` for the sink itself
        self.writer: FileWriter | None = None
        self.last_checkpoint_id = 0

    def open(self) -> None:
        self.last_checkpoint_id = max(self.last_checkpoint_id, self.info.restored_checkpoint_id)
        self.writer = self.files_sink.create_file_writer(self.info.subtask_index, self.info.parallelism)

    def process_batch(self, records: list) -> list:
        self.writer.write(records)
        return []

    def _committable(self, checkpoint_id: int, final: bool = False) -> list:
        info = self.info
        return [Committable(checkpoint_id, info.subtask_index, info.parallelism, tuple(self.writer.prepare_commit()),
                            final, epoch=info.restored_checkpoint_id)]

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> list:
        self.last_checkpoint_id = checkpoint_id
        return self._committable(checkpoint_id)

    def finish(self) -> list:
        return self._committable(self.last_checkpoint_id + 1, final=True)

    def prepare_stop(self, checkpoint_id: int) -> list:
        """Stopped with a savepoint: this writer's last committable, final as at the end of input. The writers
        stop between different barriers (one may have taken a checkpoint another never saw), so this one names
        its own next checkpoint, a later id than a writer that stopped earlier will ever pass: not final, it would
        hold back that checkpoint's commit, and every later one, for good (in the savepoint's committer too)."""
        self.last_checkpoint_id = checkpoint_id
        return self._committable(checkpoint_id, final=True)

    def close(self) -> None:
        if self.writer is not None:
            try:
                self.writer.abort()
            except Exception:  # nothing references these files: a failed delete leaves litter, not wrong data
                log.warning("%s: could not delete the files of an ended subtask", self.name, exc_info=True)
