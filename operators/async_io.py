"""The async wait operator behind :class:`~runtime.datastream.async_data_stream.AsyncDataStream` (Flink's
``AsyncWaitOperator``): many calls of an :class:`~operators.async_functions.AsyncFunction` in flight at once.

Threads. Every method of the operator runs on the subtask's thread. The user's coroutines run on one asyncio event
loop, on one thread per operator subtask, started in ``open`` and stopped in ``close``. The two threads meet in
two places, each crossed once per batch rather than once per record: a batch of new requests goes to the loop
with one ``call_soon_threadsafe``; the calls that finished during one turn of the loop come back together in a
:class:`_Handoff` (a list behind a lock, and an event the subtask waits on when it must).

Emission. ``ordered`` emits each record's results in input order; otherwise in the order the calls finish. Either
way every result of a record that came before a watermark is emitted before that watermark: the subtask forwards
a watermark as soon as ``process_watermark`` returns and every call in flight is for such a record, so
``process_watermark`` waits for all of them (as ``finish`` does at the end of input). Results keep their input
record's timestamp.

Capacity (Flink's): at most ``capacity`` records are in the operator (called, or finished but not yet emitted: in
ordered mode, results wait behind a slower earlier record). When it is full, ``process_batch`` waits for calls
to finish before it calls more: the subtask stops reading its input, which is backpressure.

Polling. Nothing can wake the subtask's thread while it waits for input, so the operator asks to be polled
(``next_processing_time``): at once when finished calls wait, else 1 ms after the last look, doubling to 4 ms
while nothing finishes. That adds at most a few ms to a result's latency, and costs at most about a thousand
cheap wake-ups a second, and only while calls are in flight.

Exactly once. A checkpoint stores every input record (with its timestamp) whose results were not emitted yet,
in input order, whether its call is in flight or finished; ``open`` after a restore calls them again, in that
order, before any new input (as Flink does: results already emitted are after the barrier, so they are not in
the checkpoint's output either). The calls themselves are at least once: a restored record is requested again.

Errors. When a call raises (after its retries) or times out with the default ``timeout``, the next method the
subtask calls raises :class:`AsyncFunctionError`, chained to the user's exception and its traceback.

>>> import asyncio
>>> from operators.async_functions import NO_RETRY_STRATEGY, AsyncFunction
>>> from operators.context import SubtaskInfo
>>> class Square(AsyncFunction):
...     async def async_invoke(self, value):
...         await asyncio.sleep(0.001 * (3 - value))   # the later records answer sooner
...         return [value * value]
>>> op = AsyncWaitOperator("squares", Square(), timeout_ms=10_000, capacity=10,
...                        retry_strategy=NO_RETRY_STRATEGY, ordered=True)
>>> op.setup(SubtaskInfo("squares", 0, 1, 128, 0)); op.open()
>>> results = list(op.process_batch([1, 2, 3])); results += op.finish(); op.close(); results
[1, 4, 9]
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from functools import partial
from itertools import chain, repeat

from operators.async_functions import AsyncFunction, AsyncRetryStrategy
from operators.operator import OneInputOperator
from runtime.errors import AsyncFunctionError, ChandyError, FunctionContractError
from runtime.protocol.records import TimestampedBatch

__all__ = ["AsyncWaitOperator", "AsyncFunctionError", "call_failed"]

POLL_MIN_MS = 1
POLL_MAX_MS = 4
ALREADY_DUE = 0  # a processing time long past: the subtask calls on_processing_time at once
LIVENESS_CHECK_S = 1.0  # a wait for finished calls looks this often whether the loop's thread still runs
STOP_TIMEOUT_S = 5.0  # close(): how long cancelled calls get to end before the loop stops anyway


def call_failed(function_name: str, method: str, value, attempts: int, cause: BaseException) -> AsyncFunctionError:
    """The error that fails the job when ``function_name.method(value)`` raised ``cause``.

    >>> print(call_failed("Lookup", "async_invoke", 42, 2, KeyError("no such user")))
    Lookup.async_invoke(42) raised KeyError: 'no such user' (after 2 attempts): the job fails. Handle the error in
    async_invoke, or retry it: AsyncDataStream.*_wait_with_retry with an exception_predicate.
    >>> print(call_failed("Lookup", "timeout", 42, 0, TimeoutError("Async function call has timed out for input: 42")))
    Lookup.timeout(42) raised TimeoutError: Async function call has timed out for input: 42: the job fails. Give the
    calls more time (the timeout of AsyncDataStream.*_wait), or override Lookup.timeout(value) to return fallback
    records instead of raising.
    """
    if method == "timeout" and type(cause) is TimeoutError:
        fix = ("Give the calls more time (the timeout of AsyncDataStream.*_wait), or override "
               f"{function_name}.timeout(value) to return fallback records instead of raising.")
    elif method == "timeout":
        fix = f"{function_name}.timeout(value) is called when a call times out: make it return a list of records."
    elif method == "async_invoke":
        fix = ("Handle the error in async_invoke, or retry it: AsyncDataStream.*_wait_with_retry with an "
               "exception_predicate.")
    else:
        fix = "Fix the retry strategy or its predicates: they must not raise."
    where = f"{function_name}.{method}({_short(value)})" if method in ("async_invoke", "timeout") else \
        f"The {method} of {function_name}, for input {_short(value)},"
    tries = f" (after {attempts} attempt{'s' if attempts != 1 else ''})" if method == "async_invoke" else ""
    return AsyncFunctionError(f"{where} raised {type(cause).__name__}: {cause}{tries}: the job fails. {fix}")


def _short(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class _Request:
    """One input record in the operator: ``results`` is None until its call has finished."""

    __slots__ = ("value", "timestamp", "results")

    def __init__(self, value, timestamp):
        self.value = value
        self.timestamp = timestamp
        self.results = None


class _CallFailed(Exception):
    """How a call ended when the user's code raised: in ``method``, on attempt ``attempts``."""

    def __init__(self, cause: BaseException, method: str, attempts: int):
        super().__init__(cause)
        self.cause, self.method, self.attempts = cause, method, attempts


class _Handoff:
    """Finished calls, from the event loop's thread to the subtask's: one lock acquisition per batch each way."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: list = []
        self._arrived = threading.Event()

    def __bool__(self) -> bool:  # read without the lock: a hint, confirmed by take_all
        return bool(self._items)

    def put_all(self, items: list) -> None:
        with self._lock:
            self._items.extend(items)
            self._arrived.set()

    def take_all(self) -> list:
        with self._lock:  # the event is cleared with the list emptied, so no arrival goes unnoticed
            items, self._items = self._items, []
            self._arrived.clear()
        return items

    def wait(self, timeout: float) -> bool:
        return self._arrived.wait(timeout)


class _EventLoopThread:
    """An asyncio event loop running on a thread of its own until ``stop``."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def call_soon(self, callback, *args) -> None:
        self.loop.call_soon_threadsafe(callback, *args)

    def run(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
        elif self._thread.ident is None:  # never started: nothing else will close it
            self.loop.close()


class _Calls:
    """The event loop's side: each request's ``async_invoke``, retried and under the timeout; the outcomes of one
    turn of the loop handed over together."""

    def __init__(self, function, timeout_ms: int, strategy: AsyncRetryStrategy, handoff: _Handoff,
                 loop: asyncio.AbstractEventLoop):
        self._invoke = function.async_invoke
        on_timeout = getattr(function, "timeout", None)
        self._on_timeout = on_timeout if callable(on_timeout) else partial(AsyncFunction.timeout, function)
        self._name = type(function).__name__
        self._timeout_s = timeout_ms / 1000.0 if timeout_ms > 0 else None
        self._strategy = strategy
        predicate = strategy.get_retry_predicate()
        self._retry_result = predicate.result_predicate()
        self._retry_exception = predicate.exception_predicate()
        self._handoff = handoff
        self._loop = loop
        self._tasks: set = set()  # the loop keeps only weak references to its tasks
        self._finished: list = []  # (request, results, error) of this turn of the loop

    def start(self, requests: list) -> None:
        """Loop thread: call ``async_invoke`` for each request."""
        create_task, tasks = self._loop.create_task, self._tasks
        for request in requests:
            task = create_task(self._call(request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)

    async def _call(self, request: _Request) -> None:
        try:
            outcome = (request, await self._with_timeout(request.value), None)
        except (_CallFailed, ChandyError) as error:
            outcome = (request, None, error)
        except Exception as error:  # a retry predicate or strategy raised
            outcome = (request, None, _CallFailed(error, "retry strategy", 0))
        if not self._finished:
            self._loop.call_soon(self._hand_over)  # after the other calls that finish in this turn of the loop
        self._finished.append(outcome)

    def _hand_over(self) -> None:
        finished, self._finished = self._finished, []
        self._handoff.put_all(finished)

    async def _with_timeout(self, value) -> list:
        if self._timeout_s is None:
            return await self._attempts(value)
        try:
            async with asyncio.timeout(self._timeout_s) as deadline:
                return await self._attempts(value)
        except TimeoutError:
            if not deadline.expired():
                raise
        try:
            results = self._on_timeout(value)
        except Exception as error:
            raise _CallFailed(error, "timeout", 0) from error
        return self._as_list(results, "timeout", value)

    async def _attempts(self, value) -> list:
        attempt = 1
        retry_result, retry_exception = self._retry_result, self._retry_exception
        while True:
            try:
                results, error = self._as_list(await self._invoke(value), "async_invoke", value), None
            except ChandyError:
                raise  # a result of the wrong kind: a bug to fix, not a failure to retry
            except Exception as exc:
                results, error = None, exc
            if error is not None:
                retry = retry_exception is not None and retry_exception(error)
            else:
                retry = retry_result is not None and retry_result(results)
            if not retry or not self._strategy.can_retry(attempt):
                if error is not None:
                    raise _CallFailed(error, "async_invoke", attempt) from error
                return results
            await asyncio.sleep(max(0, self._strategy.get_backoff_time_millis(attempt)) / 1000.0)
            attempt += 1

    def _as_list(self, results, method: str, value) -> list:
        if type(results) is list:
            return results
        if results is None or isinstance(results, (tuple, str, bytes, dict)) or not hasattr(results, "__iter__"):
            raise FunctionContractError(
                f"{self._name}.{method}({_short(value)}) returned {type(results).__name__} {_short(results, 60)}: "
                "it must return a list of output records (return [record] for one, [] for none).")
        return list(results)


class AsyncWaitOperator(OneInputOperator):
    """Calls ``function.async_invoke`` for every record, up to ``capacity`` at once, and emits their results in
    input order (``ordered``) or as they finish; see the module docstring. ``timeout_ms <= 0``: no timeout.

    A checkpoint holds the records whose results were not emitted; a new operator restored from it calls them
    again when it opens:

    >>> import asyncio
    >>> from operators.async_functions import NO_RETRY_STRATEGY, AsyncFunction
    >>> from operators.context import SubtaskInfo
    >>> class Echo(AsyncFunction):
    ...     def __init__(self, answer):
    ...         self.answer = answer
    ...     async def async_invoke(self, value):
    ...         if not self.answer:
    ...             await asyncio.Event().wait()   # no answer, ever
    ...         return [value]
    >>> def operator(answer, state=None):
    ...     op = AsyncWaitOperator("echo", Echo(answer), 0, 10, NO_RETRY_STRATEGY, ordered=True)
    ...     op.setup(SubtaskInfo("echo", 0, 1, 128, 0))
    ...     if state is not None:
    ...         op.restore_operator_state(state)
    ...     op.open()
    ...     return op
    >>> silent = operator(answer=False)
    >>> silent.process_batch(TimestampedBatch.of(["a", "b"], [10, 20]))
    []
    >>> state = silent.snapshot_operator_state(1); silent.close(); state
    {'async-wait:pending': [('a', 10), ('b', 20)]}
    >>> restored = operator(answer=True, state=state)
    >>> restored.finish()
    TimestampedBatch(['a', 'b'], timestamps=[10, 20])
    >>> restored.close()
    """

    has_processing_timers = True
    PENDING_STATE = "async-wait:pending"

    def __init__(self, name: str, function, timeout_ms: int, capacity: int, retry_strategy: AsyncRetryStrategy,
                 ordered: bool):
        super().__init__(name, function)
        self.timeout_ms = timeout_ms
        self.capacity = capacity
        self.retry_strategy = retry_strategy
        self.ordered = ordered
        self._restored: list = []

    # -- lifecycle ------------------------------------------------------------------------------------------

    def restore_operator_state(self, state: dict[str, list]) -> None:
        super().restore_operator_state(state)
        self._restored = list(state.get(self.PENDING_STATE, ()))

    def open(self) -> None:
        self._pending = deque() if self.ordered else {}  # called, results not emitted; input order
        self._backlog: deque = deque()  # not called yet (restored beyond the capacity); after _pending in order
        self._stamped = False  # whether the input had timestamps: then the output has them too
        self._poll_ms = POLL_MIN_MS
        self._poll_at = None
        self._handoff = _Handoff()
        index = self.info.subtask_index if self.info is not None else 0
        loop = self._loop = _EventLoopThread(f"async-io {self.name} #{index}")
        try:
            self._calls = _Calls(self.function, self.timeout_ms, self.retry_strategy, self._handoff, loop.loop)
            loop.start()
            self._user_hook("open", self.runtime_context)
            for value, timestamp in self._restored:
                self._backlog.append(_Request(value, timestamp))
                self._stamped = self._stamped or timestamp is not None
            self._restored = []
            self._issue_backlog(block=False)
        except BaseException:
            loop.stop()  # the subtask does not close an operator whose open raised
            raise

    def _user_hook(self, method: str, *args) -> None:
        """The function's ``open`` / ``close``; an ``async def`` one runs on the event loop."""
        hook = getattr(self.function, method, None)
        if callable(hook):
            result = hook(*args)
            if inspect.isawaitable(result):
                loop = getattr(self, "_loop", None)
                if loop is not None and loop.is_alive():
                    loop.run(result)
                elif inspect.iscoroutine(result):
                    result.close()  # no loop to run it on (open failed before starting one)

    def close(self) -> None:
        loop = getattr(self, "_loop", None)
        try:
            self._user_hook("close")
        finally:
            if loop is not None:
                try:
                    if loop.is_alive():
                        loop.run(self._calls.cancel_all(), STOP_TIMEOUT_S + 1)
                finally:
                    loop.stop()

    # -- records, time, end of input ------------------------------------------------------------------------

    def process_batch(self, records: list) -> list:
        if type(records) is TimestampedBatch:
            self._stamped = True
            self._backlog.extend(map(_Request, records, records.timestamps))
        else:
            self._backlog.extend(map(_Request, records, repeat(None)))
        self._poll_ms = POLL_MIN_MS
        out: list = []
        self._issue_backlog(block=True, out=out)
        self._collect(out)
        return self._output(out)

    def process_watermark(self, watermark: int) -> list:
        self.watermark = watermark
        return self._output(self._everything())

    def finish(self) -> list:
        return self._output(self._everything())

    def next_processing_time(self) -> int | None:
        if not self._pending:
            return None
        if self._handoff or (self._backlog and len(self._pending) < self.capacity):
            return ALREADY_DUE
        if self._poll_at is None:
            self._poll_at = self.info.clock() + self._poll_ms
        return self._poll_at

    def on_processing_time(self, now_ms: int) -> list:
        self._poll_at = None
        out: list = []
        if self._collect(out):
            self._poll_ms = POLL_MIN_MS
        else:
            self._poll_ms = min(POLL_MAX_MS, self._poll_ms * 2)
        self._issue_backlog(block=False, out=out)
        return self._output(out)

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        state = super().snapshot_operator_state(checkpoint_id)
        state[self.PENDING_STATE] = [(r.value, r.timestamp) for r in chain(self._pending, self._backlog)]
        return state

    # -- the subtask's side of the calls --------------------------------------------------------------------

    def _issue_backlog(self, block: bool, out: list | None = None) -> None:
        """Call the backlog's requests, as many as the capacity allows; ``block``: wait for room for them all."""
        backlog, pending = self._backlog, self._pending
        while backlog:
            room = self.capacity - len(pending)
            if room <= 0:
                if not block:
                    return
                self._wait_for_calls(out)
                continue
            batch = [backlog.popleft() for _ in range(min(room, len(backlog)))]
            if type(pending) is dict:
                pending.update(dict.fromkeys(batch))
            else:
                pending.extend(batch)
            self._loop.call_soon(self._calls.start, batch)

    def _wait_for_calls(self, out: list) -> None:
        """Block until at least one call has finished, then collect."""
        while not self._handoff:
            if not self._handoff.wait(LIVENESS_CHECK_S) and not self._loop.is_alive():
                raise ChandyError(f"The event loop thread of async operator '{self.name}' ended with calls in "
                                  "flight: a bug in Chandy, please report it")
        self._collect(out)

    def _everything(self) -> list:
        """Wait for every call, the backlog's too; the requests to emit, in emission order."""
        out: list = []
        self._issue_backlog(block=True, out=out)
        while self._pending:
            self._wait_for_calls(out)
        return out

    def _collect(self, out: list) -> bool:
        """Take the finished calls (raising the first failure); append the requests now due for emission to
        ``out``. Whether any call had finished."""
        if not self._handoff:
            return False
        finished = self._handoff.take_all()
        for request, results, error in finished:
            if error is not None:
                self._fail(request, error)
            request.results = results
        pending = self._pending
        if type(pending) is dict:
            for request, _, _ in finished:
                del pending[request]
                out.append(request)
        else:
            while pending and pending[0].results is not None:
                out.append(pending.popleft())
        return True

    def _fail(self, request: _Request, error: BaseException):
        if isinstance(error, _CallFailed):
            raise call_failed(type(self.function).__name__, error.method, request.value, error.attempts,
                              error.cause) from error.cause
        raise error

    def _output(self, requests: list) -> list:
        out: list = []
        if not requests:
            return out
        if not self._stamped:
            for request in requests:
                out.extend(request.results)
            return out
        timestamps: list = []
        for request in requests:
            out.extend(request.results)
            timestamps.extend(repeat(request.timestamp, len(request.results)))
        return TimestampedBatch.of(out, timestamps)
