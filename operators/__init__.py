"""User functions, built-in operators, sources and sinks."""

from operators import functions as _functions
from operators import window as _window
from operators.file_sink import FileSink
from operators.file_source import FileSource
from operators.functions import *  # noqa: F403 (the user functions)
from operators.sinks import CollectSink, DiscardingSink, PrintSink, Sink, SinkWriter
from operators.sources import CollectionSource, SequenceSource, Source, SourceReader
from operators.two_phase_commit import IdempotentSink, TransactionContext, TransactionStatus, TwoPhaseCommitSink
from operators.watermark_strategy import TimestampAssigner, WatermarkGenerator, WatermarkStrategy
from operators.window import *  # noqa: F403 (windows, assigners, triggers, evictors and window functions)
from runtime.errors import MalformedRecordError
from state_backends.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

# What operators.functions and operators.window export that a job does not subclass or use: the engine's helpers
# (a function as a callable, the parts of a count window, the merging of session windows), a trigger context for
# tests, and the base of the two broadcast functions.
_NOT_FOR_JOBS = ("as_callable", "BaseBroadcastProcessFunction", "count_window_parts", "MergingWindowSet",
                 "InMemoryTriggerContext")

__all__ = [
    *(name for name in [*_functions.__all__, *_window.__all__] if name not in _NOT_FOR_JOBS),
    "WatermarkStrategy",
    "TimestampAssigner",
    "WatermarkGenerator",
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
