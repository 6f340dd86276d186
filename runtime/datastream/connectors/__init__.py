"""PyFlink's ``pyflink.datastream.connectors``: sources and sinks to read and write the world.

Chandy provides Kafka (:mod:`.kafka`), JDBC to PostgreSQL (:mod:`.jdbc`), change data capture from PostgreSQL with
Flink CDC's builder (:mod:`.postgres`), the file connectors (:mod:`.file_system`) and :class:`NumberSequenceSource`; PyFlink's other connectors (Kinesis, Pulsar, Elasticsearch, Cassandra, RabbitMQ,
HybridSource ...) are Flink's Java connectors, which Chandy does not run: importing one raises an ``ImportError``
that says what to use instead (usually a ``Source`` or sink of your own).

>>> from runtime.datastream.connectors import FileSource, NumberSequenceSource, StreamFormat
>>> FileSource.for_record_stream_format(StreamFormat.text_line_format(), "logs/").build().format
'text'
>>> try:
...     from runtime.datastream.connectors import PulsarSource
... except ImportError as error:
...     print(error)
Chandy does not provide runtime.datastream.connectors.PulsarSource (PyFlink's Pulsar connector: ...).
Why: it is Flink's Java connector driven through py4j, and Chandy runs no JVM code of a job: ... Instead: read it
with a Source of your own ...
"""

from runtime.datastream.connectors.base import DeliveryGuarantee, Sink, Source
from runtime.datastream.connectors.file_system import (
    BucketAssigner,
    FileEnumeratorProvider,
    FileSink,
    FileSource,
    FileSourceBuilder,
    FileSplitAssignerProvider,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
    StreamingFileSink,
)
from runtime.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExecutionOptions, JdbcSink
from runtime.datastream.connectors.kafka import FlinkKafkaConsumer, FlinkKafkaProducer, KafkaSource, Semantic
from runtime.datastream.connectors.number_seq import NumberSequenceSource
from runtime.not_provided import absent_names

# PyFlink's __all__ here is Source, Sink and DeliveryGuarantee; it sets the others as attributes (for backward
# compatibility), which the explicit imports above do too.
__all__ = [
    "Source",
    "Sink",
    "DeliveryGuarantee",
    "NumberSequenceSource",
    "BucketAssigner",
    "FileEnumeratorProvider",
    "FileSink",
    "FileSplitAssignerProvider",
    "FileSource",
    "FileSourceBuilder",
    "OutputFileConfig",
    "RollingPolicy",
    "StreamFormat",
    "StreamingFileSink",
    "KafkaSource",
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "Semantic",
    "JdbcSink",
    "JdbcConnectionOptions",
    "JdbcExecutionOptions",
]

__getattr__ = absent_names(__name__)  # PulsarSource, RMQSource ...: say why they are missing
