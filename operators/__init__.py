"""User functions, built-in operators, sources and sinks."""

from operators.file_sink import FileSink
from operators.file_source import FileSource
from operators.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
)
from operators.sinks import CollectSink, DiscardingSink, PrintSink, Sink, SinkWriter
from operators.sources import CollectionSource, SequenceSource, Source, SourceReader
from operators.two_phase_commit import IdempotentSink, TransactionContext, TransactionStatus, TwoPhaseCommitSink
from runtime.errors import MalformedRecordError
from state_backends.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = [
    "Function",
    "RuntimeContext",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "KeySelector",
    "Partitioner",
    "ProcessFunction",
    "KeyedProcessFunction",
    "Source",
    "SourceReader",
    "SequenceSource",
    "CollectionSource",
    "Sink",
    "SinkWriter",
    "CollectSink",
    "DiscardingSink",
    "PrintSink",
    "FileSource",
    "FileSink",
    "MalformedRecordError",
    "TwoPhaseCommitSink",
    "TransactionContext",
    "TransactionStatus",
    "IdempotentSink",
    "AggregateFunction",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
]
