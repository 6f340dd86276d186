"""PyFlink's ``pyflink.datastream.state_backend``: how a job keeps its keyed state.

>>> from runtime.datastream.state_backend import HashMapStateBackend
>>> HashMapStateBackend()
HashMapStateBackend()
"""

from runtime.not_provided import absent_names
from state_backends.base import StateBackend
from state_backends.heap import HashMapStateBackend

__all__ = ["StateBackend", "HashMapStateBackend"]

__getattr__ = absent_names(__name__)  # EmbeddedRocksDBStateBackend: says why it is missing
