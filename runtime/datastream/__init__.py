"""PyFlink's ``pyflink.datastream``: the environment, streams, user functions and checkpoint settings.

A PyFlink program ports by replacing ``pyflink`` with ``runtime`` in its imports.

>>> from runtime.datastream import StreamExecutionEnvironment, MapFunction
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> env.from_collection([1, 2]).map(lambda x: x + 1).get_name()
'Map'
"""

from operators.async_functions import AsyncFunction, AsyncRetryPredicate, AsyncRetryStrategy
from operators.functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoGroupFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    JoinFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ProcessJoinFunction,
    ReduceFunction,
    RuntimeContext,
    TimeDomain,
    TimerService,
)
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from operators.window import (
    CountWindow,
    GlobalWindow,
    MergingWindowAssigner,
    TimeWindow,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)
from runtime.checkpoint_config import (
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from runtime.datastream.async_data_stream import AsyncDataStream
from runtime.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from runtime.datastream.checkpoint_storage import (
    CheckpointStorage,
    CustomCheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from runtime.datastream.connected_streams import ConnectedStreams
from runtime.datastream.data_stream import CloseableIterator, DataStream, DataStreamSink, KeyedStream
from runtime.datastream.execution_config import ExecutionConfig
from runtime.datastream.execution_mode import RuntimeExecutionMode
from runtime.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend, StateBackend
from runtime.datastream.stream_execution_environment import StreamExecutionEnvironment
from runtime.datastream.windowed_stream import AllWindowedStream, WindowedStream
from runtime.not_provided import absent_names
from runtime.side_outputs import OutputTag
from state_backends.descriptors import AggregateFunction

__all__ = [
    "StreamExecutionEnvironment",
    "RuntimeExecutionMode",
    "ExecutionConfig",
    "DataStream",
    "KeyedStream",
    "ConnectedStreams",
    "BroadcastStream",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "AsyncRetryPredicate",
    "BroadcastConnectedStream",
    "WindowedStream",
    "AllWindowedStream",
    "DataStreamSink",
    "CloseableIterator",
    "CheckpointConfig",
    "CheckpointingMode",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "CheckpointStorage",
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
    "CustomCheckpointStorage",
    "StateBackend",
    "HashMapStateBackend",
    "EmbeddedRocksDBStateBackend",
    "OutputTag",
    "Function",
    "RuntimeContext",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "KeySelector",
    "ProcessFunction",
    "KeyedProcessFunction",
    "TimerService",
    "TimeDomain",
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "ProcessJoinFunction",
    "JoinFunction",
    "CoGroupFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "WindowFunction",
    "AllWindowFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "AggregateFunction",
    "Partitioner",
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "WindowAssigner",
    "MergingWindowAssigner",
    "Trigger",
    "TriggerResult",
]

__getattr__ = absent_names(__name__)  # PredefinedOptions: says why it is missing
