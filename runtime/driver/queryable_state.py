"""Queryable state on the driver: which states the running attempt declared queryable, and routing each lookup to
the subtask that owns the key.

Slots say which states their functions declared queryable (:class:`~runtime.protocol.messages.
QueryableStateRegistered`); a lookup of a name goes to the slot whose subtask owns the key's key group (the stable
hash the records are routed by), which answers between two batches
(:mod:`runtime.executor.queryable_state`). A new attempt declares its states again; lookups pending when an
attempt ends fail at once rather than waiting for their timeout.

>>> parse_key('42'), parse_key('"42"'), parse_key('["eu", 7]'), parse_key('alice')
(42, '42', ('eu', 7), 'alice')
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import logging
import threading
import time
from typing import Any, Callable

from runtime.errors import QueryableStateError
from runtime.keys.canonical import canonical_key
from runtime.keys.key_groups import subtask_for_key
from runtime.protocol.messages import QueryableStateRegistered, QueryState, StateAnswer

__all__ = ["QueryableStateRouter", "parse_key", "LOOKUP_TIMEOUT_S"]

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT_S = 10.0  # a subtask answers between two batches: only a stalled one takes this long


def parse_key(text: str) -> Any:
    """The key a lookup names: JSON (``42``, ``"42"``, ``["eu", 7]``, with lists as tuples, as ``key_by``
    returns them), else the text itself (``alice``)."""
    try:
        key = json.loads(text)
    except ValueError:
        return text
    return _hashable(key)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        raise QueryableStateError(f"a key is a JSON value, list or text, not an object: {value!r}")
    return value


class QueryableStateRouter:
    """The queryable states of one job and its lookups in flight. ``parallelism_of``: operator uid -> its
    parallelism; ``max_parallelism``: the job's key groups."""

    def __init__(self, parallelism_of: dict[str, int], max_parallelism: int):
        self.parallelism_of = parallelism_of
        self.max_parallelism = max_parallelism
        self._lock = threading.Lock()
        self._declared: dict[str, QueryableStateRegistered] = {}
        self._conflicts: dict[str, set[str]] = {}  # a name declared by two operators: their uids
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._requests = itertools.count(1)
        self._attempt: int | None = None
        self._send_to: Callable[[int, Any], None] | None = None
        self._declared_before: set[str] = set()  # an earlier attempt's names: a restarted one declares them again
        self._running = False  # every slot of the attempt runs: the states functions take in open() are declared
        self._ended: str | None = None

    # -- attempts ---------------------------------------------------------------------------------------

    def attach(self, attempt: int, send_to: Callable[[int, Any], None]) -> None:
        """Attempt ``attempt`` runs; ``send_to(slot, message)`` reaches its slots. Its states are declared anew."""
        with self._lock:
            self._fail_pending("the job restarted")
            self._attempt, self._send_to, self._running = attempt, send_to, False
            self._declared_before.update(self._declared)
            self._declared.clear()
            self._conflicts.clear()

    def detach(self, why: str) -> None:
        """The attempt ended (``why``): lookups fail until the next one runs."""
        with self._lock:
            self._fail_pending(why)
            self._attempt = self._send_to = None

    def running(self, attempt: int) -> None:
        """Every slot of ``attempt`` runs (their functions are open): a name none declared by now is unknown."""
        with self._lock:
            if attempt == self._attempt:
                self._running = True

    def end(self, why: str) -> None:
        """The job has ended for good (``why``): lookups are refused with 410 from now on, not asked again."""
        with self._lock:
            self._fail_pending(why)
            self._attempt = self._send_to = None
            self._ended = self._ended or why

    def _fail_pending(self, why: str) -> None:
        for future in self._pending.values():
            future.set_exception(QueryableStateError(f"The lookup was not answered: {why}.", 503))
        self._pending.clear()

    # -- messages from slots (their serving threads) ----------------------------------------------------

    def on_message(self, message) -> None:
        with self._lock:
            if message.attempt != self._attempt:
                return
            if isinstance(message, QueryableStateRegistered):
                known = self._declared.setdefault(message.name, message)
                if known.uid != message.uid and message.uid not in self._conflicts.get(message.name, ()):
                    self._conflicts.setdefault(message.name, {known.uid}).add(message.uid)
                    log.warning("Queryable state name '%s' is declared by operators %s: lookups of it are refused "
                                "until each uses a name of its own", message.name,
                                sorted(self._conflicts[message.name]))
            elif isinstance(message, StateAnswer):
                future = self._pending.pop(message.request, None)
                if future is not None:
                    future.set_result(message)

    # -- lookups (REST threads) -------------------------------------------------------------------------

    def states(self) -> dict[str, dict]:
        """Every queryable state declared so far: name -> operator uid, state name and kind."""
        with self._lock:
            return {name: {"operator": m.uid, "state": m.state, "kind": m.kind}
                    for name, m in sorted(self._declared.items())}

    def lookup(self, name: str, key: Any, timeout_s: float = LOOKUP_TIMEOUT_S) -> str:
        """The value of queryable state ``name`` for ``key`` as JSON text (``null``: none). Raises
        QueryableStateError (with the HTTP status to answer) when it cannot be answered."""
        return self.timed_lookup(name, key, timeout_s)[0]

    def timed_lookup(self, name: str, key: Any, timeout_s: float = LOOKUP_TIMEOUT_S) -> tuple[str, dict[str, float]]:
        """:meth:`lookup`, with where its time went in milliseconds: ``slot`` from sending the query to the answer
        (the connection both ways and the slot's part), of which ``subtask-wait`` from the slot reading the query
        to the subtask taking it up between two batches, and ``state-read`` reading the value."""
        request = next(self._requests)
        with self._lock:
            if self._ended is not None:
                raise QueryableStateError(f"The job is not running: {self._ended}. Its last state is in its last "
                                          "checkpoint or savepoint: read it with runtime.state_api.SavepointReader.",
                                          410)
            if self._attempt is None:
                raise QueryableStateError("The job is not running (it is starting or restarting): ask again once it "
                                          "runs.", 503)
            declared = self._declared.get(name)
            if declared is None and name in self._declared_before:
                raise QueryableStateError(f"Queryable state '{name}' is being restored: its function declares it "
                                          "again when it takes it after the restart. Ask again.", 503)
            if declared is None and not (self._running and self._declared):
                # Functions declare a state when they first take it, in open() once every slot runs: until one
                # has, an unknown name may be one still to come.
                raise QueryableStateError(f"No queryable state '{name}' yet: the job is starting, and its functions "
                                          "have declared none so far (they do as they take their states). Ask "
                                          "again.", 503)
            if declared is None:
                known = ", ".join(sorted(self._declared))
                raise QueryableStateError(f"No queryable state '{name}': the job's are {known}. A state is "
                                          "queryable when its descriptor has set_queryable(name).", 404)
            if name in self._conflicts:
                raise QueryableStateError(f"Queryable state name '{name}' is declared by operators "
                                          f"{sorted(self._conflicts[name])}: give each its own name.", 409)
            try:
                canonical = canonical_key(key)
                subtask = subtask_for_key(canonical, self.max_parallelism, self.parallelism_of[declared.uid])
            except TypeError as exc:
                raise QueryableStateError(f"{key!r} cannot be a key: {exc}", 400) from None
            future: concurrent.futures.Future = concurrent.futures.Future()
            self._pending[request] = future
            send_to = self._send_to
        sent = time.monotonic()
        try:
            send_to(subtask, QueryState(declared.attempt, request, declared.uid, name, canonical))
            answer = future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            raise QueryableStateError(f"Subtask {subtask} of operator '{declared.uid}' did not answer within "
                                      f"{timeout_s:.0f} s (it is stalled, or its slot is gone).", 504) from None
        except OSError as exc:  # its slot's connection closed: the attempt is ending (the job finished or failed)
            raise QueryableStateError(f"The lookup was not answered: subtask {subtask} of operator '{declared.uid}' "
                                      f"is not connected ({exc}); ask again once the job runs.", 503) from None
        finally:
            with self._lock:
                self._pending.pop(request, None)
        if answer.error is not None:
            raise QueryableStateError(f"Subtask {subtask} of operator '{declared.uid}': {answer.error}",
                                      503 if answer.not_yet else 500)
        timings = {"slot": (time.monotonic() - sent) * 1000.0, "subtask-wait": answer.waited_ms,
                   "state-read": answer.read_ms}
        return answer.value_json, timings
