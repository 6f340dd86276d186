"""The heap backend: keyed state in Python dicts, one table per (state name, key group)."""

from state_backends.heap.backend import HashMapStateBackend, HeapKeyedStateBackend

__all__ = ["HashMapStateBackend", "HeapKeyedStateBackend"]
