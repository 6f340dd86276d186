"""PyFlink's ``pyflink.datastream.checkpointing_mode``.

>>> from runtime.datastream.checkpointing_mode import CheckpointingMode
>>> CheckpointingMode.EXACTLY_ONCE.name
'EXACTLY_ONCE'
"""

from runtime.checkpoint_config import CheckpointingMode

__all__ = ["CheckpointingMode"]
