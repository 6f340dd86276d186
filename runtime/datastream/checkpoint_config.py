"""PyFlink's ``pyflink.datastream.checkpoint_config``.

>>> from runtime.datastream.checkpoint_config import CheckpointConfig
>>> CheckpointConfig().set_max_retained_checkpoints(5).get_max_retained_checkpoints()
5
"""

from runtime.checkpoint_config import CheckpointConfig, ExternalizedCheckpointCleanup, ExternalizedCheckpointRetention

__all__ = ["CheckpointConfig", "ExternalizedCheckpointCleanup", "ExternalizedCheckpointRetention"]
