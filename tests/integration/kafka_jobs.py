"""Pieces of the Kafka tests' jobs that must be importable on the executors (tests/ is on their path)."""

from __future__ import annotations

import os
import time

from operators.kafka.sink import KafkaSink, _Committer
from runtime.datastream.functions import ProcessWindowFunction


class PausingCommitter(_Committer):
    """Stops between producing a transaction's records and committing it, once (the first process that consumes
    the token file), after saying so with a file named by its pid: the test SIGKILLs it there from outside."""

    def __init__(self, sink: "PausingKafkaSink"):
        super().__init__(sink)
        self.directory = sink.pause_directory

    def commit_transaction(self, producer) -> None:
        try:
            os.remove(os.path.join(self.directory, "pause"))
        except FileNotFoundError:
            return super().commit_transaction(producer)
        open(os.path.join(self.directory, f"paused-{os.getpid()}"), "w").close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the test kills this process meanwhile
            time.sleep(0.05)
        raise RuntimeError("nobody killed the paused commit")


class PausingKafkaSink(KafkaSink):
    """A KafkaSink whose first commit pauses before its Kafka transaction commits (see PausingCommitter)."""

    pause_directory: str = ""

    def _committer(self):
        if self._clients is None:
            self._clients = PausingCommitter(self)
        return self._clients


class CountWindow(ProcessWindowFunction):
    """Counts a window's records: ``"<key>@<window number>=<count>"`` (windows of 10 s)."""

    def process(self, key, context, elements):
        yield f"{key}@{context.window().start // 10_000}={sum(1 for _ in elements)}"


class LinesInFile:
    """A sink writing each record as a line to ``<directory>/<subtask>`` at once (at least once): a test reads
    what an unbounded job has written while it runs."""

    def __new__(cls, directory: str):
        from operators.sinks import Sink, SinkWriter

        class _Writer(SinkWriter):
            def __init__(self, path):
                self.path = path

            def write_batch(self, records):
                with open(self.path, "a") as f:
                    f.writelines(f"{record}\n" for record in records)

        class _Sink(Sink):
            def create_writer(self, subtask_index, parallelism):
                os.makedirs(directory, exist_ok=True)
                return _Writer(os.path.join(directory, str(subtask_index)))

        return _Sink()


class IntegerSchema:
    """Bytes of a decimal number to an int (and fails on anything else)."""

    def deserialize(self, message):
        return int(message)
