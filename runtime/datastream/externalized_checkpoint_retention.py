"""PyFlink's ``pyflink.datastream.externalized_checkpoint_retention``.

>>> ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION.name
'RETAIN_ON_CANCELLATION'
"""

from runtime.checkpoint_config import ExternalizedCheckpointRetention

__all__ = ["ExternalizedCheckpointRetention"]
