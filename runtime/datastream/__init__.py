"""PyFlink's ``pyflink.datastream``: the environment, streams, user functions and checkpoint settings.

A PyFlink program ports by replacing ``pyflink`` with ``runtime`` in its imports.

>>> from runtime.datastream import StreamExecutionEnvironment, MapFunction
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> env.from_collection([1, 2]).map(lambda x: x + 1).get_name()
'Map'
"""

from runtime.datastream import (
    async_data_stream as _async_data_stream,
    broadcast_stream as _broadcast_stream,
    checkpoint_config as _checkpoint_config,
    checkpoint_storage as _checkpoint_storage,
    checkpointing_mode as _checkpointing_mode,
    connected_streams as _connected_streams,
    data_stream as _data_stream,
    execution_config as _execution_config,
    execution_mode as _execution_mode,
    functions as _functions,
    output_tag as _output_tag,
    stream_execution_environment as _stream_execution_environment,
    windowed_stream as _windowed_stream,
)
from runtime.datastream.async_data_stream import *  # noqa: F403
from runtime.datastream.broadcast_stream import *  # noqa: F403
from runtime.datastream.checkpoint_config import *  # noqa: F403
from runtime.datastream.checkpoint_storage import *  # noqa: F403
from runtime.datastream.checkpointing_mode import *  # noqa: F403
from runtime.datastream.connected_streams import *  # noqa: F403
from runtime.datastream.data_stream import *  # noqa: F403
from runtime.datastream.execution_config import *  # noqa: F403
from runtime.datastream.execution_mode import *  # noqa: F403
from runtime.datastream.functions import *  # noqa: F403
from runtime.datastream.output_tag import *  # noqa: F403
from runtime.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend, StateBackend
from runtime.datastream.stream_execution_environment import *  # noqa: F403
from runtime.datastream.window import (
    CountWindow,
    GlobalWindow,
    MergingWindowAssigner,
    TimeWindow,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)
from runtime.datastream.windowed_stream import *  # noqa: F403
from runtime.not_provided import absent_names

# Each module's names, a few of the state backends' and windows' (those PyFlink's module names too), and the
# functions less their base of the two broadcast functions (PyFlink keeps that in its functions module alone).
__all__ = [
    *_stream_execution_environment.__all__,
    *_execution_mode.__all__,
    *_execution_config.__all__,
    *_data_stream.__all__,
    *_connected_streams.__all__,
    *_broadcast_stream.__all__,
    *_async_data_stream.__all__,
    *_windowed_stream.__all__,
    *_checkpoint_config.__all__,
    *_checkpointing_mode.__all__,
    *_checkpoint_storage.__all__,
    *_output_tag.__all__,
    *(name for name in _functions.__all__ if name != "BaseBroadcastProcessFunction"),
    "StateBackend",
    "HashMapStateBackend",
    "EmbeddedRocksDBStateBackend",
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
