"""Pickling state for checkpoints, with an error that names the state holding an unpicklable value.

>>> import threading
>>> pickle_state({"ok": [1], "bad": [threading.Lock()]}, "keyed state")
Traceback (most recent call last):
...
runtime.errors.UnpicklableStateError: keyed state 'bad' cannot be checkpointed: a value in it cannot be pickled (TypeError: cannot pickle '_thread.lock' object). Keep only picklable values in state (no locks, sockets, clients or open files).
"""

from __future__ import annotations

import pickle
from typing import Any

from runtime.errors import UnpicklableStateError

__all__ = ["pickle_state"]


def pickle_state(named: dict[str, Any], kind: str) -> bytes:
    """``named`` (state name -> content) pickled; ``kind`` says what the names are, for the error."""
    try:
        return pickle.dumps(named, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        # Fatal only when a state holds a value that cannot be pickled (every later checkpoint would fail);
        # anything else (a value changed while it was pickled, no memory) fails this checkpoint only.
        culprit = next((name for name, content in named.items() if not _picklable(content)), None)
        if culprit is None:
            raise
        raise UnpicklableStateError(
            f"{kind} '{culprit}' cannot be checkpointed: a value in it cannot be pickled "
            f"({type(exc).__name__}: {exc}). Keep only picklable values in state (no locks, sockets, clients or "
            "open files).") from exc


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        return True
    except Exception:  # noqa: BLE001 - any failure means: not picklable
        return False
