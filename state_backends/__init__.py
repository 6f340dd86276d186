"""Keyed state: descriptors and their time-to-live (``ttl``), the backend interfaces (``base``), their
implementations (``heap``) and checkpoint storage (``storage`` over ``checkpoint_store``)."""

from state_backends import descriptors as _descriptors
from state_backends import heap as _heap
from state_backends.base import KeyedStateBackend, StateBackend
from state_backends.descriptors import *  # noqa: F403 (the state descriptors)
from state_backends.heap import *  # noqa: F403 (the heap backend)
from state_backends.ttl import StateTtlConfig

# The descriptors (less the helpers that check a declaration, which the backends and operators use), their
# time-to-live, the backend interfaces and the heap backend.
_HELPERS = ("check_same_declaration", "declared_or_class", "refuse_ttl")
__all__ = [
    *(name for name in _descriptors.__all__ if name not in _HELPERS),
    "StateTtlConfig",
    "StateBackend",
    "KeyedStateBackend",
    *_heap.__all__,
]
