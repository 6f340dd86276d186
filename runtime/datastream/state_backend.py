"""PyFlink's ``pyflink.datastream.state_backend``: how a job keeps its keyed state, and the backend a setting
names (Flink's ``state.backend.type``, or the Spark conf ``spark.chandy.stateBackend`` that chooses it without
editing the job).

>>> from runtime.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
>>> HashMapStateBackend(), EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
(HashMapStateBackend(), EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True))
>>> state_backend_named("rocksdb", incremental=True, local_dir="/mnt/fast", what=STATE_BACKEND_CONF)
EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True, db_storage_path='/mnt/fast')
"""

from runtime.not_provided import absent_names
from runtime.settings.options import STATE_BACKENDS, option_named
from state_backends.base import StateBackend
from state_backends.heap import HashMapStateBackend
from state_backends.rocksdb import EmbeddedRocksDBStateBackend

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend", "state_backend_named",
           "STATE_BACKEND_CONF", "INCREMENTAL_CONF", "ROCKSDB_LOCAL_DIR_CONF", "LOCAL_RECOVERY_CONF"]

# The Spark conf keys that choose the backend without editing the job (declared in runtime.settings.options).
STATE_BACKEND_CONF = option_named("state_backend").spark_key
INCREMENTAL_CONF = option_named("incremental_checkpoints").spark_key
ROCKSDB_LOCAL_DIR_CONF = option_named("rocksdb_local_dir").spark_key
LOCAL_RECOVERY_CONF = option_named("local_recovery").spark_key

__getattr__ = absent_names(__name__)  # PredefinedOptions: says why it is missing


def state_backend_named(kind: str, incremental: bool | None = None, local_dir: str | None = None,
                        what: str = "state.backend.type", local_recovery: bool = True) -> StateBackend:
    """The state backend a setting names (``what``: the key it came from, for the error)."""
    if STATE_BACKENDS(kind, what) == "hashmap":
        return HashMapStateBackend(bool(incremental))
    return EmbeddedRocksDBStateBackend(incremental, local_dir or None, local_recovery=local_recovery)
