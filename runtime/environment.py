"""``StreamExecutionEnvironment``: where a job is declared, configured and launched.

>>> from runtime import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> env.set_parallelism(2).get_parallelism()
2
"""

from __future__ import annotations

from typing import Iterable

from operators.sinks import CollectSink, SinkWriterOperator
from operators.sources import CollectionSource, SequenceSource, Source, SourceReaderOperator
from runtime.datastream import DataStream, _check_parallelism
from runtime.errors import JobGraphError
from runtime.graph import Transformation, compile_job_graph
from runtime.key_groups import UPPER_BOUND_MAX_PARALLELISM
from runtime.launcher import obtain_spark_session, require_slots
from runtime.result import JobClient, JobResult
from runtime.types import TypeInformation

__all__ = ["StreamExecutionEnvironment"]

DEFAULT_BUFFER_TIMEOUT_MS = 5.0
DEFAULT_BATCH_SIZE = 4096


class StreamExecutionEnvironment:
    """Declares sources, holds job-wide settings, and runs jobs on Spark.

    The SparkSession is taken when the job launches: the active one if there is one (so ``spark-submit``
    settings apply), else a new ``local[N]`` session sized to the job.
    """

    def __init__(self, spark=None):
        self._spark = spark
        self._parallelism = 1
        self._max_parallelism: int | None = None
        self._buffer_timeout_ms = DEFAULT_BUFFER_TIMEOUT_MS
        self._batch_size = DEFAULT_BATCH_SIZE
        self._transformations: list[Transformation] = []

    @staticmethod
    def get_execution_environment(spark=None) -> "StreamExecutionEnvironment":
        """A new environment; ``spark`` pins the SparkSession to use (default: active or new local one)."""
        return StreamExecutionEnvironment(spark)

    # -- settings -------------------------------------------------------------------------------------

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        """Default number of subtasks of every operator (each needs a Spark task slot)."""
        self._parallelism = _check_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        """Number of key groups: the upper limit of rescaling, fixed for the life of a job's state."""
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(f"max parallelism must be an int in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                             f"got {max_parallelism!r}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int | None:
        return self._max_parallelism

    def set_buffer_timeout(self, timeout_millis: float) -> "StreamExecutionEnvironment":
        """Longest time a record waits in an output buffer before being sent (latency vs throughput)."""
        if timeout_millis < 0:
            raise ValueError("buffer timeout must be >= 0 ms")
        self._buffer_timeout_ms = float(timeout_millis)
        return self

    def get_buffer_timeout(self) -> float:
        return self._buffer_timeout_ms

    def set_batch_size(self, records: int) -> "StreamExecutionEnvironment":
        """Records per network batch (a batch is sent when full, or at the buffer timeout)."""
        self._batch_size = _check_parallelism(records)
        return self

    # -- sources --------------------------------------------------------------------------------------

    def _add(self, transformation: Transformation) -> None:
        self._transformations.append(transformation)

    def from_source(self, source: Source, source_name: str = "Custom Source",
                    type_info: TypeInformation | None = None) -> DataStream:
        """A stream read from ``source`` (see :class:`operators.sources.Source`)."""
        if not isinstance(source, Source):
            raise TypeError(f"from_source() expects a Source, got {type(source).__name__}")
        t = Transformation("source", source_name, [], lambda n: SourceReaderOperator(n, source),
                           output_type=type_info, non_parallel=not source.parallel, environment=self)
        self._add(t)
        return DataStream(self, t)

    def from_collection(self, collection: Iterable, type_info: TypeInformation | None = None) -> DataStream:
        """A bounded stream of the given elements, read by one subtask, in order."""
        return self.from_source(CollectionSource(list(collection)), "Collection Source", type_info)

    def from_sequence(self, start: int, end: int) -> DataStream:
        """The integers ``start..end`` inclusive, read in parallel."""
        from runtime.types import Types

        return self.from_source(SequenceSource(start, end), "Sequence Source", Types.LONG())

    # -- running --------------------------------------------------------------------------------------

    def get_job_graph(self, job_name: str = "chandy job"):
        """Compile (and validate) the declared job without running it."""
        return compile_job_graph(self._transformations, job_name, self._parallelism, self._max_parallelism,
                                 self._buffer_timeout_ms, self._batch_size)

    def execute_async(self, job_name: str | None = None) -> JobClient:
        """Launch the declared job and return at once with a :class:`JobClient`."""
        from runtime.job_run import JobRun

        graph = self.get_job_graph(job_name or "chandy job")
        self._transformations = []
        spark = self._spark or obtain_spark_session(graph.slots)
        require_slots(spark, graph.slots)
        sinks = {node.uid: node.operator.sink for node in graph.operators
                 if isinstance(node.operator, SinkWriterOperator)}
        names = [s.name for s in sinks.values() if isinstance(s, CollectSink)]
        if len(names) != len(set(names)):
            raise JobGraphError(f"Two CollectSinks share a name ({sorted(n for n in names if names.count(n) > 1)}): "
                                "results are looked up by name, so give each its own.")
        run = JobRun(graph, spark, sinks)
        run.start()
        return JobClient(run)

    def execute(self, job_name: str | None = None) -> JobResult:
        """Run the declared job to its end; returns a :class:`JobResult` or raises why it failed."""
        return self.execute_async(job_name).get_job_execution_result()
