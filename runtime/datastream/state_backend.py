"""PyFlink's ``pyflink.datastream.state_backend``: how a job keeps its keyed state, and the Spark conf keys that
choose it without editing the job.

>>> from runtime.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
>>> HashMapStateBackend(), EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
(HashMapStateBackend(), EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True))
>>> state_backend_named("rocksdb", incremental=True, local_dir="/mnt/fast", what=STATE_BACKEND_CONF)
EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True, db_storage_path='/mnt/fast')
"""

from runtime.errors import ConfigurationError
from runtime.not_provided import absent_names
from state_backends.base import StateBackend
from state_backends.heap import HashMapStateBackend
from state_backends.rocksdb import EmbeddedRocksDBStateBackend

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend", "state_backend_named",
           "STATE_BACKEND_CONF", "INCREMENTAL_CONF", "ROCKSDB_LOCAL_DIR_CONF", "LOCAL_RECOVERY_CONF"]

STATE_BACKEND_CONF = "spark.chandy.stateBackend"  # hashmap | rocksdb: overrides the job's set_state_backend
INCREMENTAL_CONF = "spark.chandy.incrementalCheckpoints"  # true | false, for either backend
ROCKSDB_LOCAL_DIR_CONF = "spark.chandy.rocksdb.localDir"  # the workers' directory for RocksDB files
LOCAL_RECOVERY_CONF = "spark.chandy.localRecovery"  # true (default) | false, for rocksdb

__getattr__ = absent_names(__name__)  # PredefinedOptions: says why it is missing


def state_backend_named(kind: str, incremental: bool | None = None, local_dir: str | None = None,
                        what: str = STATE_BACKEND_CONF, local_recovery: bool = True) -> StateBackend:
    """The state backend a configuration names (``what``: the key it came from, for the error)."""
    name = str(kind).strip().lower()
    if name in ("hashmap", "heap", "filesystem", "jobmanager"):
        return HashMapStateBackend(bool(incremental))
    if name in ("rocksdb", "embeddedrocksdb"):
        return EmbeddedRocksDBStateBackend(incremental, local_dir or None, local_recovery=local_recovery)
    raise ConfigurationError(f"{what} = {kind!r}: Chandy has 'hashmap' (keyed state in the workers' memory, the "
                             "fastest) and 'rocksdb' (keyed state on the workers' local disks: larger than memory).")
