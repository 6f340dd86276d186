"""``StreamExecutionEnvironment``: where a job is declared, configured and launched.

>>> from runtime import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> env.set_parallelism(2).get_parallelism()
2
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from typing import Iterable

from operators.committing.sink import GlobalCommitSink
from operators.sinks import CollectSink, SinkWriterOperator
from operators.sources import CollectionSource, SequenceSource, Source, SourceReaderOperator
from operators.two_phase_commit import TwoPhaseCommitSink
from operators.watermark_strategy import WatermarkStrategy
from runtime.checkpoint_config import (
    CheckpointConfig,
    CheckpointingMode,
    FallbackRestartStrategy,
    RestartStrategies,
    RestartStrategy,
)
from runtime.datastream.data_stream import DataStream, positive_int
from runtime.datastream.execution_config import ExecutionConfig
from runtime.datastream.execution_mode import RuntimeExecutionMode
from runtime.datastream.flink_options import apply_configuration
from runtime.datastream.state_backend import STATE_BACKEND_CONF, state_backend_named
from runtime.driver.coordinator import CheckpointCoordinator
from runtime.driver.launcher import obtain_spark_session, require_slots, spark_conf_of
from runtime.driver.restore_plan import RESTORE_ENV, RESTORE_JOB_ENV, check_compatible, resolve_restore
from runtime.driver.result import JobClient, JobResult
from runtime.driver.security_settings import resolve_encryption
from runtime.driver.terminal import resume_hint, show_chandy_logs
from runtime.driver.web import SPARK_ACLS_CONF, DashboardSettings
from runtime.errors import ApiUsageError, ConfigurationError, JobGraphError
from runtime.graph.compile import compile_job_graph
from runtime.graph.job_graph import CheckpointSettings
from runtime.graph.transformation import Transformation, with_upstream
from runtime.keys.key_groups import UPPER_BOUND_MAX_PARALLELISM
from runtime.network.tls import TlsMaterial
from runtime.protocol import startup as startup_marks
from runtime.restart_strategies import ExponentialDelayRestartStrategy
from runtime.settings.configuration import Configuration
from runtime.settings.options import option_named
from runtime.settings.parsers import parse_duration_ms
from runtime.settings.resolve import Settings, resolve
from runtime.types import TypeInformation
from state_backends.base import StateBackend
from state_backends.heap import HashMapStateBackend
from state_backends.storage import CheckpointStorage

__all__ = ["StreamExecutionEnvironment"]

log = logging.getLogger(__name__)

DEFAULT_BUFFER_TIMEOUT_MS = 5.0
DEFAULT_BATCH_SIZE = 4096


_UNBOUNDED_IN_BATCH = ("Source '{}' is unbounded, and BATCH mode needs every source to end: run the job in "
                       "STREAMING mode (set_runtime_mode(RuntimeExecutionMode.STREAMING)), or give the source an end.")


def _interactive() -> bool:
    """Whether the program is a REPL or a notebook (a script's Ctrl-C ends it; theirs must not)."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules


def _refuse_concurrent_unaligned(config) -> None:
    if config.get_max_concurrent_checkpoints() > 1:
        raise ConfigurationError(
            f"Unaligned checkpoints cannot overlap (Flink's rule too: a newer barrier overtaking an older one's "
            f"records in flight would mix two checkpoints), but max concurrent checkpoints is "
            f"{config.get_max_concurrent_checkpoints()}: set_max_concurrent_checkpoints(1), or disable unaligned "
            "checkpoints.")


def _check_sources_and_sinks(graph, checkpoint_interval_ms: float | None = None) -> None:
    """Paths of sources and sinks are checked now, not an hour into the job; a sink whose settings must suit the
    checkpoint interval (``check_checkpoint_interval(interval_ms or None)``) hears it."""
    for node in graph.operators:
        connector = getattr(node.operator, "sink", None) or getattr(node.operator, "source", None)
        validate = getattr(connector, "validate", None)
        if callable(validate):
            validate()
        check_interval = getattr(connector, "check_checkpoint_interval", None)
        if callable(check_interval):
            check_interval(checkpoint_interval_ms)
        if isinstance(getattr(node.operator, "sink", None), GlobalCommitSink):
            node.operator.sink.bind(graph.job_name, node.uid)
    names = [node.operator.sink.name for node in graph.operators
             if isinstance(node.operator, SinkWriterOperator) and isinstance(node.operator.sink, CollectSink)]
    if len(names) != len(set(names)):
        raise JobGraphError(f"Two CollectSinks share a name ({sorted(n for n in names if names.count(n) > 1)}): "
                            "results are looked up by name, so give each its own.")


def _warn_about_sinks_that_commit_on_checkpoints(graph) -> None:
    for node in graph.operators:
        sink = getattr(node.operator, "sink", None)
        if isinstance(sink, GlobalCommitSink) or (isinstance(sink, TwoPhaseCommitSink) and sink.commits_on_checkpoints):
            log.warning("%s '%s' commits its output when a checkpoint completes, and checkpointing is off: its "
                        "output appears only when a bounded job ends, and never for an unbounded one. Call "
                        "env.enable_checkpointing(interval_ms) to commit as the job runs.",
                        type(sink).__name__, node.name)


class StreamExecutionEnvironment:
    """Declares sources, holds job-wide settings, and runs jobs on Spark.

    The SparkSession is taken when the job launches: the active one if there is one (so ``spark-submit``
    settings apply), else a new ``local[N]`` session sized to the job.

    >>> env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    >>> _ = env.from_sequence(1, 100).map(lambda x: x % 10).key_by(lambda k: k).reduce(max).print()
    >>> [node.name for node in env.get_job_graph("job").operators]
    ['Sequence Source', 'Map', 'Keyed Reduce', 'Print to Std. Out']
    >>> env.execute("job")  # doctest: +SKIP
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
        self._state_backend: StateBackend | None = None
        self._chaining = True
        self._python_files: list[str] = []
        self._execution_config = ExecutionConfig(self)
        self._runtime_mode = RuntimeExecutionMode.STREAMING
        self._executed: list[str] = []  # names of the jobs execute() launched; their transformations are consumed
        # The Flink keys given to configure(): those read at launch are resolved from here with the Spark conf.
        self._configuration = Configuration()
        # Buffer debloating's target in ms (0: off) over whatever the settings say; the benchmarks set it.
        self._debloat_target_ms: float | None = None

    @staticmethod
    def get_execution_environment(configuration=None) -> "StreamExecutionEnvironment":
        """A new environment. ``configuration``: a :class:`~runtime.configuration.Configuration` with Flink's
        option keys (PyFlink's argument), or a SparkSession to run on (default: the active one, or a new local
        one).

        >>> from runtime.configuration import Configuration
        >>> env = StreamExecutionEnvironment.get_execution_environment(
        ...     Configuration().set_integer("parallelism.default", 3))
        >>> env.get_parallelism()
        3
        """
        if isinstance(configuration, Configuration):
            return StreamExecutionEnvironment().configure(configuration)
        return StreamExecutionEnvironment(configuration)

    def configure(self, configuration: Configuration) -> "StreamExecutionEnvironment":
        """Apply Flink's option keys in ``configuration``: parallelism, checkpointing, restart strategy, state
        backend, buffer timeout (see :mod:`runtime.datastream.flink_options`).

        >>> from runtime.configuration import Configuration
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.configure(Configuration().set_string("execution.checkpointing.interval", "1 min"))
        ... # doctest: +ELLIPSIS
        <runtime.datastream.stream_execution_environment.StreamExecutionEnvironment object at ...>
        >>> env.get_checkpoint_interval()
        60000
        """
        apply_configuration(self, configuration)
        return self

    # -- settings -------------------------------------------------------------------------------------

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        """Default number of subtasks of every operator (each needs a Spark task slot).

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_parallelism(4).get_parallelism()
        4
        """
        self._parallelism = positive_int(parallelism, "parallelism")
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        """Number of key groups: the upper limit of rescaling, fixed for the life of a job's state.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.get_max_parallelism() is None, env.set_max_parallelism(256).get_max_parallelism()
        (True, 256)
        """
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ConfigurationError(f"max parallelism must be an int in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                             f"got {max_parallelism!r}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int | None:
        return self._max_parallelism

    def set_buffer_timeout(self, timeout_millis: float) -> "StreamExecutionEnvironment":
        """Longest time a record waits in an output buffer before being sent (latency vs throughput): ms, a
        ``Duration``, a ``timedelta`` or a duration string.

        >>> StreamExecutionEnvironment.get_execution_environment().set_buffer_timeout("20 ms").get_buffer_timeout()
        20.0
        """
        self._buffer_timeout_ms = float(parse_duration_ms(timeout_millis, "buffer timeout", fractional=True))
        return self

    def get_buffer_timeout(self) -> float:
        return self._buffer_timeout_ms

    def set_batch_size(self, records: int) -> "StreamExecutionEnvironment":
        """Records per network batch (a batch is sent when full, or at the buffer timeout)."""
        self._batch_size = positive_int(records, "batch size (records)")
        return self

    def enable_checkpointing(self, interval: float,
                             mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE) -> "StreamExecutionEnvironment":
        """Take a checkpoint every ``interval`` ms; configure the rest via :meth:`get_checkpoint_config`.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.enable_checkpointing(1000).get_checkpoint_interval()
        1000
        >>> env.get_checkpoint_config().set_checkpoint_storage("s3://bucket/checkpoints").get_checkpointing_mode()
        <CheckpointingMode.EXACTLY_ONCE: 'EXACTLY_ONCE'>
        """
        self._checkpoint_config.set_checkpoint_interval(interval).set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def set_default_savepoint_directory(self, url: str) -> "StreamExecutionEnvironment":
        """Where savepoints go when ``trigger_savepoint()`` or ``stop_with_savepoint()`` names no path (Flink's
        ``setDefaultSavepointDirectory``); see :meth:`CheckpointConfig.set_default_savepoint_directory`.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_default_savepoint_directory("s3://bucket/savepoints").get_default_savepoint_directory()
        's3://bucket/savepoints'
        """
        self._checkpoint_config.set_default_savepoint_directory(url)
        return self

    def get_default_savepoint_directory(self) -> str | None:
        return self._checkpoint_config.get_default_savepoint_directory()

    def get_checkpoint_interval(self) -> float | None:
        return self._checkpoint_config.get_checkpoint_interval()

    def get_config(self) -> ExecutionConfig:
        """The execution settings that are not about checkpoints: auto-watermark interval, global job
        parameters, parallelism (see :class:`~runtime.datastream.execution_config.ExecutionConfig`).

        >>> from runtime.configuration import Configuration
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> params = env.get_config().set_global_job_parameters(Configuration().set_string("region", "eu"))
        >>> env.get_config().get_global_job_parameters().get_string("region")
        'eu'
        """
        return self._execution_config

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        """``STREAMING`` (the default), ``BATCH`` or ``AUTOMATIC`` (batch when every source is bounded).

        In ``BATCH`` mode (every source must be bounded) a keyed operator sees each key's records together once
        its input is complete, event-time timers and windows fire once at the end, a ``reduce`` emits only each
        key's final value, no checkpoints are taken, and a failure runs the job again from the start. The
        final result is the streaming job's, reached with less work.

        >>> from runtime.datastream.execution_mode import RuntimeExecutionMode
        >>> from operators.sources import SequenceSource
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_runtime_mode(RuntimeExecutionMode.BATCH).get_runtime_mode()
        <RuntimeExecutionMode.BATCH: 'BATCH'>
        >>> try:
        ...     env.from_source(SequenceSource(0), "forever")
        ... except Exception as e:
        ...     print(e)
        Source 'forever' is unbounded, and BATCH mode needs every source to end: run the job in STREAMING mode (set_runtime_mode(RuntimeExecutionMode.STREAMING)), or give the source an end.
        """
        if not isinstance(execution_mode, RuntimeExecutionMode):
            raise ConfigurationError(f"set_runtime_mode() expects a RuntimeExecutionMode, got {execution_mode!r}")
        if execution_mode is RuntimeExecutionMode.BATCH:
            for t in self._transformations:
                if t.kind == "source" and not t.bounded:
                    raise ConfigurationError(_UNBOUNDED_IN_BATCH.format(t.name))
        self._runtime_mode = execution_mode
        return self

    def _batch(self) -> bool:
        """Whether the declared job runs in batch mode (BATCH, or AUTOMATIC with every source bounded)."""
        mode = self._runtime_mode
        if mode is RuntimeExecutionMode.AUTOMATIC:
            return all(t.bounded for t in with_upstream(self._transformations) if t.kind == "source")
        return mode is RuntimeExecutionMode.BATCH

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        return self._runtime_mode

    def disable_operator_chaining(self) -> "StreamExecutionEnvironment":
        """Run every operator on a thread of its own (records then cross threads between every two operators:
        slower, but each operator's time shows on its own).

        >>> env = StreamExecutionEnvironment.get_execution_environment().disable_operator_chaining()
        >>> _ = env.from_sequence(1, 10).map(str).print()
        >>> len(env.get_job_graph("job").chains), env.is_chaining_enabled()
        (3, False)
        """
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return self._chaining

    def set_restart_strategy(self, strategy: RestartStrategy) -> "StreamExecutionEnvironment":
        """How a failed job restarts: ``RestartStrategies.fixed_delay_restart``, ``failure_rate_restart``,
        ``exponential_delay_restart``, ``no_restart`` or ``fall_back_restart``. Default, as in Flink 2: exponential
        delay (1 s growing by 1.5x up to 1 min, reset after an hour without failure) with checkpointing, else none.
        A failure that would repeat (a bad record, an error in the job's code) fails the job at once whatever the
        strategy.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.get_restart_strategy()
        NoRestartStrategy()
        >>> env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 2000)).get_restart_strategy()
        FixedDelayRestartStrategy(max_attempts=5, delay_ms=2000)
        >>> env.set_restart_strategy(RestartStrategies.fall_back_restart()).enable_checkpointing(1000)
        ... # doctest: +ELLIPSIS
        <...StreamExecutionEnvironment object at ...>
        >>> env.get_restart_strategy()
        ExponentialDelayRestartStrategy(initial_backoff_ms=1000, max_backoff_ms=60000, backoff_multiplier=1.5, ...)
        """
        if not isinstance(strategy, RestartStrategy):
            raise ApiUsageError("set_restart_strategy() expects one of RestartStrategies' strategies "
                                "(fixed_delay_restart, failure_rate_restart, exponential_delay_restart, no_restart)")
        self._restart_strategy = strategy
        return self

    def get_restart_strategy(self) -> RestartStrategy:
        if self._restart_strategy is not None and not isinstance(self._restart_strategy, FallbackRestartStrategy):
            return self._restart_strategy
        if self._checkpoint_config.is_checkpointing_enabled():
            return ExponentialDelayRestartStrategy()
        return RestartStrategies.no_restart()

    def set_state_backend(self, state_backend: StateBackend) -> "StreamExecutionEnvironment":
        """How keyed state is kept (PyFlink's name). Default: :class:`~state_backends.heap.HashMapStateBackend`.

        >>> from state_backends import HashMapStateBackend
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.set_state_backend(HashMapStateBackend()).get_state_backend()
        HashMapStateBackend()
        """
        if not isinstance(state_backend, StateBackend):
            raise ApiUsageError(f"set_state_backend() expects a StateBackend such as HashMapStateBackend(), got "
                                f"{type(state_backend).__name__}")
        self._state_backend = state_backend
        return self

    def get_state_backend(self) -> StateBackend:
        return self._state_backend if self._state_backend is not None else HashMapStateBackend()

    # -- sources --------------------------------------------------------------------------------------

    def _add(self, transformation: Transformation) -> None:
        self._transformations.append(transformation)

    def from_source(self, source: Source, watermark_strategy: WatermarkStrategy | str | None = None,
                    source_name: str | None = None, type_info: TypeInformation | None = None) -> DataStream:
        """A stream read from ``source`` (see :class:`operators.sources.Source`).

        PyFlink's form ``from_source(source, watermark_strategy, source_name)`` gives the records event time
        right at the source; ``from_source(source, source_name)`` reads them without.

        >>> from operators.sources import SequenceSource
        >>> from operators.watermark_strategy import WatermarkStrategy
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_source(SequenceSource(0, 99), "numbers").get_name()
        'numbers'
        >>> env.from_source(SequenceSource(0, 99), "numbers").get_type()  # the source's produced_type
        LONG
        >>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: n)
        >>> env.from_source(SequenceSource(0, 99), strategy, "numbers").get_name()
        'numbers: Timestamps/Watermarks'
        """
        if not isinstance(source, Source):
            raise ApiUsageError(f"from_source() expects a Source, got {type(source).__name__}")
        strategy = None
        if isinstance(watermark_strategy, str):  # Chandy's short form: from_source(source, name)
            if source_name is not None and type_info is None and isinstance(source_name, TypeInformation):
                type_info = source_name
            source_name = watermark_strategy
        elif watermark_strategy is not None:
            if not isinstance(watermark_strategy, WatermarkStrategy):
                raise ApiUsageError(f"from_source(source, watermark_strategy, source_name): expected a "
                                    f"WatermarkStrategy, got {type(watermark_strategy).__name__}")
            strategy = watermark_strategy
        source_name = source_name or "Custom Source"
        if type_info is None:
            type_info = source.produced_type
        bounded = bool(getattr(source, "bounded", True))
        if not bounded and self._runtime_mode is RuntimeExecutionMode.BATCH:
            raise ConfigurationError(_UNBOUNDED_IN_BATCH.format(source_name))
        t = Transformation("source", source_name, [], lambda n: SourceReaderOperator(n, source),
                           output_type=type_info, non_parallel=not source.parallel, environment=self,
                           schema=source.schema, bounded=bounded)
        self._add(t)
        stream = DataStream(self, t)
        if strategy is not None and not strategy.assigns_nothing():
            stream = stream._assign_watermarks(strategy, f"{source_name}: Timestamps/Watermarks")
        return stream

    def add_source(self, source_func: Source, source_name: str = "Custom Source",
                   type_info: TypeInformation | None = None) -> DataStream:
        """PyFlink's older name for :meth:`from_source` (its ``SourceFunction`` is a Chandy :class:`Source`).

        >>> from operators.sources import SequenceSource
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.add_source(SequenceSource(0, 9), "numbers").get_name()
        'numbers'
        """
        return self.from_source(source_func, source_name, type_info)

    def add_python_file(self, file_path: str) -> "StreamExecutionEnvironment":
        """Ship a Python file (``.py``, ``.zip``, ``.egg``) to the executors, importable by the job's functions
        there (``SparkContext.addPyFile`` when the job is launched).

        >>> env = StreamExecutionEnvironment.get_execution_environment().add_python_file("helpers.py")
        >>> env.get_python_files()
        ['helpers.py']
        """
        self._python_files.append(str(file_path))
        return self

    def get_python_files(self) -> list[str]:
        return list(self._python_files)

    def add_jars(self, *jars_path: str) -> "StreamExecutionEnvironment":
        """Accepted for PyFlink programs, and ignored with a warning: Chandy runs no JVM code of the job, so
        it needs no jars (a JVM connector's jar has no Chandy counterpart to load).

        >>> env = StreamExecutionEnvironment.get_execution_environment().add_jars("file:///opt/kafka.jar")
        """
        log.warning("add_jars(%s) ignored: Chandy runs no JVM code of the job, so it needs no jars.",
                    ", ".join(jars_path))
        return self

    add_classpaths = add_jars

    def from_collection(self, collection: Iterable, type_info: TypeInformation | None = None) -> DataStream:
        """A bounded stream of the given elements, read by one subtask, in order.

        >>> from runtime import Types
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> words = env.from_collection(["a", "b"], type_info=Types.STRING())
        >>> words.get_name(), words.get_type()
        ('Collection Source', STRING)
        """
        return self.from_source(CollectionSource(list(collection)), "Collection Source", type_info)

    def create_input(self, input_format, type_info: TypeInformation | None = None) -> DataStream:
        """A bounded stream of what ``input_format`` reads (PyFlink's): ``AvroInputFormat(path, schema)`` of
        ``runtime.datastream.formats.avro`` reads Avro data files as dicts, exactly once across failures.
        ``type_info`` defaults to the format's produced type.

        >>> from runtime.datastream.formats.avro import AvroInputFormat, AvroSchema
        >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> users = env.create_input(AvroInputFormat("users/", schema))
        >>> users.get_name(), users.get_type()
        ('Custom Source', GenericRecordAvroTypeInfo('User'))
        """
        as_source = getattr(input_format, "as_source", None)
        if not callable(as_source):
            raise ApiUsageError(f"create_input() expects an input format Chandy provides: AvroInputFormat(path, "
                                f"schema) (runtime.datastream.formats.avro); got {type(input_format).__name__}. Read "
                                "other files with env.from_source(FileSource...build(), watermark_strategy, name).")
        if type_info is None:
            type_info = input_format.get_produced_type()
        return self.from_source(as_source(), "Custom Source", type_info)

    def from_sequence(self, start: int, end: int, columnar: bool = False) -> DataStream:
        """The integers ``start..end`` inclusive, read in parallel.

        ``columnar=True`` makes a columnar stream: Arrow batches with one ``int64`` column, ``value``.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> env.from_sequence(1, 10).get_type(), env.from_sequence(1, 10, columnar=True).get_schema().names
        (LONG, ['value'])
        """
        return self.from_source(SequenceSource(start, end, columnar=columnar), "Sequence Source")  # its type: LONG

    # -- running --------------------------------------------------------------------------------------

    def get_job_graph(self, job_name: str = "chandy job"):
        """Compile (and validate) the declared job without running it.

        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_collection([1, 2]).map(str).print()
        >>> graph = env.get_job_graph("job")
        >>> graph.job_name, [node.name for node in graph.operators]
        ('job', ['Collection Source', 'Map', 'Print to Std. Out'])
        """
        return self._compile(job_name, self._max_parallelism)

    def _compile(self, job_name: str, max_parallelism: int | None, checkpointing: CheckpointSettings | None = None,
                 state_backend: StateBackend | None = None):
        if not self._transformations and self._executed:
            raise JobGraphError(
                f"This environment already launched job '{self._executed[-1]}', and nothing was declared since: a "
                "job is the sinks declared since the last execute() and what they read (as in Flink). Add a sink "
                "(sink_to, print, execute_and_collect) to a stream, old or new, before calling execute() again.")
        return compile_job_graph(self._transformations, job_name, self._parallelism, max_parallelism,
                                 self._buffer_timeout_ms, self._batch_size, checkpointing,
                                 state_backend or self._state_backend,
                                 self._chaining, self._execution_config.get_global_job_parameters().to_dict(),
                                 self._execution_config.get_auto_watermark_interval(), self._batch())

    def execute_async(self, job_name: str | None = None, restore_from: int | str | None = None,
                      allow_non_restored_state: bool | None = None) -> JobClient:
        """Launch the declared job and return at once with a :class:`JobClient`.

        ``restore_from``: a checkpoint id of this job, ``"latest"``, the path or URL of a ``chk-<n>``
        directory (another job's too), or a savepoint's directory. Without it, Flink's key
        ``execution.savepoint.path`` is used, else the Spark conf ``spark.chandy.restoreFrom``, else the
        environment variable ``CHANDY_RESTORE_FROM`` (only for the job that ``CHANDY_RESTORE_JOB`` names, when
        that is set): what Ctrl-C prints to resume a ``python job.py``.

        ``allow_non_restored_state``: drop the state of operators the job no longer has (Flink's
        ``--allowNonRestoredState``, key ``execution.savepoint.ignore-unclaimed-state``, Spark conf
        ``spark.chandy.allowNonRestoredState``); without it such a restore fails naming their uids.
        """
        from runtime.driver.job import JobMaster

        called = time.time()  # start-up marks (runtime.protocol.startup): from here to the first record at a sink
        job_name = job_name or "chandy job"
        config = self._checkpoint_config
        # Everything that can be checked without Spark is checked before a SparkSession is created.
        graph = self._compile(job_name, self._max_parallelism)
        batch = self._batch()
        checkpointed = config.is_checkpointing_enabled() and not batch
        storage = CheckpointStorage(config.get_checkpoint_storage(), job_name, config.filesystem)
        self._check_before_spark(graph, storage, checkpointed, batch, restore_from)
        if restore_from is None and not batch:
            # Flink's execution.savepoint.path, read now so that a wrong checkpoint the program names is refused
            # before Spark starts (the Spark conf's spark.chandy.restoreFrom is known only once it has).
            named = option_named("restore_from").read(self._configuration.to_dict())
            restore_from = named[1] if named else None
        restore = resolve_restore(storage, restore_from) if restore_from not in (None, "") else None
        spark = self._spark or obtain_spark_session(graph.slots)
        settings = resolve(self._configuration, spark_conf_of(spark))  # a bad value fails here, before any Spark job
        if restore_from is None and not batch:
            restore_from = settings.restore_from
        if allow_non_restored_state is None:
            allow_non_restored_state = settings.allow_non_restored_state
        if restore_from is None and not batch and os.environ.get(RESTORE_JOB_ENV, job_name) == job_name:
            restore_from = os.environ.get(RESTORE_ENV)
        if restore is None and restore_from not in (None, ""):
            restore = resolve_restore(storage, restore_from)
        if restore is not None and allow_non_restored_state:
            restore = dataclasses.replace(restore, allow_non_restored_state=True)
        max_parallelism = self._max_parallelism
        if max_parallelism is None and restore is not None:
            max_parallelism = restore.checkpoint.max_parallelism  # the checkpoint's key groups, as Flink does
        checkpointing = _checkpoint_settings(config, storage, settings) if checkpointed else None
        graph = self._compile(job_name, max_parallelism, checkpointing, _state_backend_from(settings))
        self._tune(graph, settings)
        if restore is not None:
            check_compatible(restore.checkpoint, graph, restore.allow_non_restored_state)
        encryption = resolve_encryption(settings)
        tls = encryption.material(job_name)  # the user's files are read (and checked) here, before the job starts
        coordinator = CheckpointCoordinator(config, storage, graph) if checkpointing is not None else None
        require_slots(spark, graph.slots, wait_ms=settings.slot_wait_ms)
        self._transformations = []  # launched: the streams are consumed (an execute() that failed keeps them)
        self._executed.append(job_name)
        sinks = {node.uid: node.operator.sink for node in graph.operators
                 if isinstance(node.operator, SinkWriterOperator)}
        for path in self._python_files:  # the executors import the job's functions from these
            spark.sparkContext.addPyFile(path)
        show_chandy_logs()
        if encryption.asked:
            what = "authenticated"
            if tls is not None:
                what += (" and encrypted (TLS 1.3, " + (f"certificate {encryption.files[0]}" if encryption.files
                                                         else "a certificate made for this job") + ")")
            log.info("Job '%s': internal connections are %s: %s", job_name, what, encryption.reason)
        master = JobMaster(graph, spark, sinks, self.get_restart_strategy(), coordinator, restore,
                           dashboard=_dashboard_settings(settings, encryption.web_material(tls)),
                           progress=_progress_wanted(settings), tls=tls,
                           restart_chosen=self._restart_strategy is not None
                           and not isinstance(self._restart_strategy, FallbackRestartStrategy),
                           startup={startup_marks.CALLED: called, startup_marks.COMPILED: time.time()})
        master.start()
        return JobClient(master)

    def _check_before_spark(self, graph, storage: CheckpointStorage, checkpointed: bool, batch: bool,
                            restore_from) -> None:
        config = self._checkpoint_config
        if batch and restore_from not in (None, ""):
            raise ConfigurationError(f"restore_from={restore_from!r} in BATCH mode: a batch job reads its input "
                                     "from the start and takes no checkpoints. Restore in STREAMING mode.")
        if batch and config.is_checkpointing_enabled():
            log.info("Job '%s' runs in BATCH mode: no checkpoints; a failure runs it again from the start.",
                     graph.job_name)
        if checkpointed:
            storage.check_writable()
        _check_sources_and_sinks(graph, config.get_checkpoint_interval() if checkpointed else None)
        if checkpointed and config.is_unaligned_checkpoints_enabled() \
                and config.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE:
            _refuse_concurrent_unaligned(config)
        for path in self._python_files:
            if "://" not in path and not os.path.exists(path):
                raise ConfigurationError(f"add_python_file({path!r}): no such file (relative paths are from "
                                         f"{os.getcwd()}).")
        if not config.is_checkpointing_enabled() and not batch:
            _warn_about_sinks_that_commit_on_checkpoints(graph)

    def _tune(self, graph, settings: Settings) -> None:
        """What the slots read from the graph: the heartbeat timeout, buffer debloating, the metrics interval, the GIL
        switch interval and CPU pinning."""
        graph.heartbeat_timeout_ms = settings.heartbeat_timeout_ms
        debloat = settings.buffer_debloat_target_ms if settings.buffer_debloating else 0
        if self._debloat_target_ms is not None:
            debloat = self._debloat_target_ms
        graph.debloat_target_ms = debloat or None
        graph.metrics_interval_ms = settings.metrics_interval_ms
        graph.switch_interval_ms = settings.switch_interval_ms
        graph.cpu_affinity = settings.cpu_affinity

    def execute(self, job_name: str | None = None, restore_from: int | str | None = None,
                allow_non_restored_state: bool | None = None) -> JobResult:
        """Run the declared job to its end; returns a :class:`JobResult` or raises why it failed.

        ``restore_from`` starts from a checkpoint or a savepoint instead of from scratch (see
        :meth:`execute_async`, also for ``allow_non_restored_state``).

        Ctrl-C cancels the job, prints the newest completed checkpoint with the command that resumes from it,
        and exits with status 130 (in a REPL or notebook, the KeyboardInterrupt goes on to it instead).
        """
        client = self.execute_async(job_name, restore_from, allow_non_restored_state)
        try:
            return client.get_job_execution_result()
        except KeyboardInterrupt:
            client.cancel()
            print(resume_hint(job_name or "chandy job", client._run.newest_checkpoint()), file=sys.stderr,
                  flush=True)
            if _interactive():  # a notebook or a REPL goes on: the interrupt is theirs to handle
                raise
            raise SystemExit(130) from None


def _checkpoint_settings(config: CheckpointConfig, storage: CheckpointStorage,
                         settings: Settings) -> CheckpointSettings:
    """The job's checkpointing, with the Spark conf's choice of unaligned checkpoints over the program's."""
    exactly_once = config.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE
    unaligned = config.is_unaligned_checkpoints_enabled()
    if settings.unaligned_checkpoints is not None:
        unaligned = settings.unaligned_checkpoints
    if unaligned and not exactly_once:
        log.warning("Unaligned checkpoints need EXACTLY_ONCE mode (Flink's rule too): this AT_LEAST_ONCE "
                    "job's checkpoints stay aligned.")
        unaligned = False
    if unaligned:
        _refuse_concurrent_unaligned(config)
    return CheckpointSettings(exactly_once, storage, unaligned, config.aligned_timeout_ms)


def _dashboard_settings(settings: Settings, tls: TlsMaterial | None = None) -> DashboardSettings:
    """The driver's web server as the job asks for it; ``tls``: HTTPS with this material (the job encrypts)."""
    require_token = settings.ui_require_token
    if not require_token and settings.spark_says(SPARK_ACLS_CONF):
        log.info("%s=true: Chandy's REST API cannot check spark.modify.acls / spark.ui.view.acls (it has no user "
                 "identities: Spark's come from servlet filters it does not run), so it asks for its token for "
                 "reads as well as actions.", SPARK_ACLS_CONF)
        require_token = True
    return DashboardSettings(settings.ui_enabled, settings.ui_port, settings.ui_bind_address, settings.ui_token,
                             require_token, tls)


def _progress_wanted(settings: Settings) -> bool:
    """The live status line: on when stdout is a terminal, unless ``spark.chandy.progress=false``."""
    if not settings.progress:
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced by something without a terminal, or closed
        return False


def _state_backend_from(settings: Settings) -> StateBackend | None:
    """The state backend the Spark conf chooses (``spark.chandy.stateBackend``), overriding the job's; None when
    it chooses none."""
    if settings.state_backend is None:
        ignored = [settings.source(name) for name in ("incremental_checkpoints", "rocksdb_local_dir", "local_recovery")
                   if settings.source(name)]
        if ignored:
            log.warning("%s apply with %s only, which is not set: the job's own state backend runs unchanged. Set "
                        "%s=hashmap or rocksdb as well.", ", ".join(ignored), STATE_BACKEND_CONF, STATE_BACKEND_CONF)
        return None
    local_recovery = True if settings.local_recovery is None else settings.local_recovery
    return state_backend_named(settings.state_backend, bool(settings.incremental_checkpoints),
                               settings.rocksdb_local_dir, STATE_BACKEND_CONF, local_recovery)
