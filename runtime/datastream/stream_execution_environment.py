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
from runtime.datastream.data_stream import DataStream, _check_parallelism
from runtime.errors import JobGraphError
from runtime.checkpoint_config import CheckpointConfig, CheckpointingMode, RestartStrategies, RestartStrategy
from runtime.driver.coordinator import CheckpointCoordinator
from runtime.graph.compile import compile_job_graph
from runtime.graph.job_graph import CheckpointSettings
from runtime.graph.transformation import Transformation
from runtime.keys.key_groups import UPPER_BOUND_MAX_PARALLELISM
from runtime.driver.launcher import obtain_spark_session, require_slots
from runtime.driver.restore_plan import check_compatible
from runtime.driver.restore_plan import RESTORE_CONF, resolve_restore
from runtime.driver.result import JobClient, JobResult
from runtime.types import TypeInformation
from state_backends.storage import CheckpointStorage

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
        self._checkpoint_config = CheckpointConfig()
        self._restart_strategy: RestartStrategy | None = None

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

    def enable_checkpointing(self, interval: float,
                             mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE) -> "StreamExecutionEnvironment":
        """Take a checkpoint every ``interval`` ms; configure the rest via :meth:`get_checkpoint_config`."""
        self._checkpoint_config.set_checkpoint_interval(interval).set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_checkpoint_interval(self) -> float | None:
        return self._checkpoint_config.get_checkpoint_interval()

    def set_restart_strategy(self, strategy: RestartStrategy) -> "StreamExecutionEnvironment":
        """How a failed job restarts. Default: 3 attempts 1 s apart with checkpointing, else none."""
        if not isinstance(strategy, RestartStrategy):
            raise TypeError("set_restart_strategy() expects RestartStrategies.fixed_delay_restart(...) or "
                            "RestartStrategies.no_restart()")
        self._restart_strategy = strategy
        return self

    def get_restart_strategy(self) -> RestartStrategy:
        if self._restart_strategy is not None:
            return self._restart_strategy
        if self._checkpoint_config.is_checkpointing_enabled():
            return RestartStrategies.fixed_delay_restart(3, 1000)
        return RestartStrategies.no_restart()

    # -- sources --------------------------------------------------------------------------------------

    def _add(self, transformation: Transformation) -> None:
        self._transformations.append(transformation)

    def from_source(self, source: Source, source_name: str = "Custom Source",
                    type_info: TypeInformation | None = None) -> DataStream:
        """A stream read from ``source`` (see :class:`operators.sources.Source`)."""
        if not isinstance(source, Source):
            raise TypeError(f"from_source() expects a Source, got {type(source).__name__}")
        t = Transformation("source", source_name, [], lambda n: SourceReaderOperator(n, source),
                           output_type=type_info, non_parallel=not source.parallel, environment=self,
                           schema=source.schema)
        self._add(t)
        return DataStream(self, t)

    def from_collection(self, collection: Iterable, type_info: TypeInformation | None = None) -> DataStream:
        """A bounded stream of the given elements, read by one subtask, in order."""
        return self.from_source(CollectionSource(list(collection)), "Collection Source", type_info)

    def from_sequence(self, start: int, end: int, columnar: bool = False) -> DataStream:
        """The integers ``start..end`` inclusive, read in parallel.

        ``columnar=True`` makes a columnar stream: Arrow batches with one ``int64`` column, ``value``.
        """
        from runtime.types import Types

        return self.from_source(SequenceSource(start, end, columnar=columnar), "Sequence Source",
                                None if columnar else Types.LONG())

    # -- running --------------------------------------------------------------------------------------

    def get_job_graph(self, job_name: str = "chandy job"):
        """Compile (and validate) the declared job without running it."""
        return compile_job_graph(self._transformations, job_name, self._parallelism, self._max_parallelism,
                                 self._buffer_timeout_ms, self._batch_size)

    def execute_async(self, job_name: str | None = None, restore_from: int | str | None = None) -> JobClient:
        """Launch the declared job and return at once with a :class:`JobClient`.

        ``restore_from``: a checkpoint id of this job, ``"latest"``, or the path or URL of a ``chk-<n>``
        directory (another job's too). Without it, the Spark conf ``spark.chandy.restoreFrom`` is used.
        """
        from runtime.driver.job import JobRun

        job_name = job_name or "chandy job"
        config = self._checkpoint_config
        graph = self.get_job_graph(job_name)  # validate before anything starts: bad graphs fail fast
        # The SparkSession is needed first: under spark-submit, it carries spark.chandy.restoreFrom.
        spark = self._spark or obtain_spark_session(graph.slots)
        if restore_from is None:
            restore_from = spark.conf.get(RESTORE_CONF, None)
        storage = CheckpointStorage(config.get_checkpoint_storage(), job_name, config.filesystem)
        if config.is_checkpointing_enabled():
            storage.check_writable()
        restore = resolve_restore(storage, restore_from) if restore_from not in (None, "") else None
        max_parallelism = self._max_parallelism
        if max_parallelism is None and restore is not None:
            max_parallelism = restore[1]["max_parallelism"]  # the checkpoint's key groups, as Flink does
        if max_parallelism != graph.max_parallelism and max_parallelism is not None:
            graph = compile_job_graph(self._transformations, job_name, self._parallelism, max_parallelism,
                                      self._buffer_timeout_ms, self._batch_size)
        if restore is not None:
            check_compatible(restore[1], graph)
        coordinator = None
        if config.is_checkpointing_enabled():
            graph.checkpointing = CheckpointSettings(config.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE,
                                                     storage)
            coordinator = CheckpointCoordinator(config, storage, graph)
        self._transformations = []
        require_slots(spark, graph.slots)
        sinks = {node.uid: node.operator.sink for node in graph.operators
                 if isinstance(node.operator, SinkWriterOperator)}
        for node in graph.operators:  # sources and sinks check their paths now, not an hour into the job
            validate = getattr(getattr(node.operator, "sink", None) or getattr(node.operator, "source", None),
                               "validate", None)
            if callable(validate):
                validate()
        names = [s.name for s in sinks.values() if isinstance(s, CollectSink)]
        if len(names) != len(set(names)):
            raise JobGraphError(f"Two CollectSinks share a name ({sorted(n for n in names if names.count(n) > 1)}): "
                                "results are looked up by name, so give each its own.")
        run = JobRun(graph, spark, sinks, self.get_restart_strategy(), coordinator, restore)
        run.start()
        return JobClient(run)

    def execute(self, job_name: str | None = None, restore_from: int | str | None = None) -> JobResult:
        """Run the declared job to its end; returns a :class:`JobResult` or raises why it failed.

        ``restore_from`` starts from a checkpoint instead of from scratch (see :meth:`execute_async`).
        """
        return self.execute_async(job_name, restore_from).get_job_execution_result()
