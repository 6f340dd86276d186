"""The PyFlink modules and names Chandy deliberately lacks, each with why and what to use instead.

Porting a PyFlink program means replacing ``pyflink`` with ``runtime`` in its imports. Where Chandy has no
counterpart (a Pulsar connector, a JVM-only feature), the import still fails, as it must, but with a
:class:`NotProvidedError` (an ``ImportError``) that says what is missing, why, and what to use instead, so the
porter is never left guessing whether a name was forgotten.

Every such message is built here, from one catalogue: a module that mirrors a missing PyFlink module is one
line, ``refuse_import(__name__)``, and a module that lacks a few of PyFlink's names sets
``__getattr__ = absent_names(__name__)``.

>>> from runtime.not_provided import NotProvidedError
>>> try:
...     from runtime.datastream.connectors.pulsar import PulsarSource
... except ImportError as error:
...     print(type(error).__name__, "-", error)
NotProvidedError - Chandy does not provide runtime.datastream.connectors.pulsar (PyFlink's Pulsar connector:
PulsarSource, PulsarSink). Why: ... Instead: ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from runtime.errors import ChandyError

__all__ = ["NotProvidedError", "Absence", "MISSING_MODULES", "MISSING_NAMES", "refuse_import", "absent_names"]


class NotProvidedError(ChandyError, ImportError):
    """A PyFlink module or name that Chandy deliberately does not provide; the message says why and what to use.

    It is an ``ImportError``, so ``try: import ... except ImportError`` in a ported program behaves as it would
    for any missing optional dependency.

    >>> issubclass(NotProvidedError, ImportError), NotProvidedError.retryable
    (True, False)
    """

    retryable = False


@dataclass(frozen=True)
class Absence:
    """What is missing (in PyFlink's words), why Chandy lacks it, and what to use instead.

    >>> absence = Absence("PyFlink's X connector (XSource)", "it is a JVM connector", "a Source of your own")
    >>> print(absence.message("runtime.datastream.connectors.x"))
    Chandy does not provide runtime.datastream.connectors.x (PyFlink's X connector (XSource)). Why: it is a JVM
    connector. Instead: a Source of your own.
    """

    what: str
    why: str
    instead: str

    def message(self, missing: str) -> str:
        return f"Chandy does not provide {missing} ({self.what}). Why: {self.why}. Instead: {self.instead}."

    def error(self, missing: str, module: str | None = None) -> NotProvidedError:
        return NotProvidedError(self.message(missing), name=module)


# -- the catalogue ---------------------------------------------------------------------------------------

_JVM_CONNECTOR = ("it is Flink's Java connector driven through py4j, and Chandy runs no JVM code of a job: its "
                  "operators are Python on Spark executors")
_OWN_SOURCE = ("read it with a Source of your own (subclass operators.sources.Source and SourceReader, over the "
               "system's Python client; return its offsets from snapshot_state() for exactly-once) and "
               "env.from_source(source, watermark_strategy, name)")
_OWN_SINK = ("write with a sink of your own and stream.sink_to(sink): operators.IdempotentSink for upserts by key, "
             "or operators.TwoPhaseCommitSink where the system has transactions (exactly-once)")
_FILES = "for files, FileSource and FileSink from runtime.datastream.connectors.file_system"


def _connector(name: str, names: str, instead: str) -> Absence:
    return Absence(f"PyFlink's {name} connector: {names}", _JVM_CONNECTOR, f"{instead}; {_FILES}")


_PULSAR = _connector("Pulsar", "PulsarSource, PulsarSink", f"{_OWN_SOURCE}; {_OWN_SINK}")
_RABBITMQ = _connector("RabbitMQ", "RMQSource, RMQSink, RMQConnectionConfig", f"{_OWN_SOURCE}; {_OWN_SINK}")

_PACKAGE = "runtime.datastream.connectors"

# module -> why it is missing; each of these modules is the one line refuse_import(__name__)
MISSING_MODULES: dict[str, Absence] = {
    f"{_PACKAGE}.dynamic_kafka": _connector("dynamic Kafka", "DynamicKafkaSource, KafkaMetadataService",
                                            "KafkaSource from runtime.datastream.connectors.kafka, one per cluster, "
                                            "and union() of their streams"),
    f"{_PACKAGE}.kinesis": _connector("Kinesis", "FlinkKinesisConsumer, KinesisStreamsSink, KinesisFirehoseSink",
                                      f"{_OWN_SOURCE}; {_OWN_SINK}"),
    f"{_PACKAGE}.pulsar": _PULSAR,
    f"{_PACKAGE}.pubsub": _connector("Google Cloud Pub/Sub", "PubSubSource, PubSubSink",
                                     f"{_OWN_SOURCE}; {_OWN_SINK}"),
    f"{_PACKAGE}.rabbitmq": _RABBITMQ,
    f"{_PACKAGE}.elasticsearch": _connector("Elasticsearch", "Elasticsearch6SinkBuilder, Elasticsearch7SinkBuilder",
                                            "write with an operators.IdempotentSink that indexes each record under "
                                            "a document id derived from it (so a replay overwrites), and "
                                            "stream.sink_to(sink)"),
    f"{_PACKAGE}.cassandra": _connector("Cassandra", "CassandraSink", "write with an operators.IdempotentSink "
                                        "(Cassandra writes are upserts by primary key), and stream.sink_to(sink)"),
    f"{_PACKAGE}.hybrid_source": Absence(
        "PyFlink's HybridSource", "it chains Flink's Java split enumerators, which Chandy does not run; a Python "
        "version over Chandy's Source is not written yet",
        "a Source of your own whose reader reads the first source's splits, then the next's (its snapshot_state() "
        "says which source it is in), or env.from_source(a).union(env.from_source(b)) when order does not matter"),
}

# module -> {name: why it is missing}, for modules that exist but lack a few of PyFlink's names
_ROCKSDB = Absence("PyFlink's PredefinedOptions (RocksDB tuning presets for Flink's JVM RocksDB)",
                   "Chandy sizes RocksDB itself: one block cache and write-buffer budget per worker process",
                   "EmbeddedRocksDBStateBackend(block_cache_bytes=..., write_buffer_bytes=...)")

MISSING_NAMES: dict[str, dict[str, Absence]] = {
    "runtime.datastream": {"PredefinedOptions": _ROCKSDB},
    "runtime.datastream.state_backend": {"PredefinedOptions": _ROCKSDB},
    _PACKAGE: {
        **dict.fromkeys(["DynamicKafkaSource", "DynamicKafkaSourceBuilder", "KafkaMetadataService",
                         "KafkaRecordDeserializationSchema", "KafkaStreamSetSubscriber", "KafkaStreamSubscriber",
                         "StreamPatternSubscriber", "SingleClusterTopicMetadataService"],
                        MISSING_MODULES[f"{_PACKAGE}.dynamic_kafka"]),
        **dict.fromkeys(["PulsarSource", "PulsarSourceBuilder", "StartCursor", "StopCursor"], _PULSAR),
        **dict.fromkeys(["RMQSource", "RMQSink", "RMQConnectionConfig"], _RABBITMQ),
    },
    f"{_PACKAGE}.file_system": {
        **dict.fromkeys(["FileCompactStrategy", "FileCompactor"], Absence(
            "PyFlink's file compaction (FileCompactStrategy, FileCompactor)",
            "Chandy's FileSink does not merge small part files yet",
            "fewer, larger parts: RollingPolicy.on_checkpoint_rolling_policy() and a longer checkpoint interval, "
            "or merge the committed files after the job")),
    },
    "runtime.table": dict.fromkeys(
        ["TableEnvironment", "StreamTableEnvironment", "EnvironmentSettings", "TableConfig", "Table",
         "TableDescriptor", "Schema"],
        Absence("PyFlink's Table API and SQL", "Chandy is a DataStream engine; of pyflink.table it has DataTypes "
                "only, for the row types of the file formats",
                "the DataStream API (runtime.datastream), and Spark SQL for tables on a Spark cluster")),
}


def refuse_import(module: str) -> None:
    """Raise the :class:`NotProvidedError` of a module that mirrors a PyFlink module Chandy lacks.

    >>> try:
    ...     refuse_import("runtime.datastream.connectors.rabbitmq")
    ... except NotProvidedError as error:
    ...     print(error)
    Chandy does not provide runtime.datastream.connectors.rabbitmq (PyFlink's RabbitMQ connector: RMQSource, ...).
    Why: it is Flink's Java connector ... Instead: read it with a Source of your own ...
    """
    raise MISSING_MODULES[module].error(module, module)


def absent_names(module: str) -> Callable[[str], object]:
    """A module ``__getattr__`` that refuses the names :data:`MISSING_NAMES` lists for ``module``, saying why.

    Other unknown names raise the usual ``AttributeError``; so ``from module import Name`` of a listed name
    raises :class:`NotProvidedError`, with its message.

    >>> getattr_ = absent_names("runtime.table")
    >>> try:
    ...     getattr_("StreamTableEnvironment")
    ... except ImportError as error:
    ...     print(error)
    Chandy does not provide runtime.table.StreamTableEnvironment (PyFlink's Table API and SQL). Why: ... Instead: ...
    >>> getattr_("Nonsense")
    Traceback (most recent call last):
    ...
    AttributeError: module 'runtime.table' has no attribute 'Nonsense'
    """
    missing = MISSING_NAMES[module]

    def __getattr__(name: str):
        absence = missing.get(name)
        if absence is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        raise absence.error(f"{module}.{name}", module)

    return __getattr__
