"""Async I/O without Spark: the async wait operator driven as a subtask drives it (open, batches, watermarks,
processing-time polls, snapshot, a new instance restored from it, finish), mostly against an HTTP server in this
process that answers slowly; and AsyncDataStream's checks where the job is declared."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import traceback
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cloudpickle
import pytest

from operators.async_functions import (
    NO_RETRY_STRATEGY,
    AsyncFunction,
    AsyncRetryStrategy,
    async_retry_predicates,
)
from operators.async_io import AsyncFunctionError, AsyncWaitOperator
from operators.context import SubtaskInfo
from operators.timers import processing_time_ms
from runtime import StreamExecutionEnvironment, Time, Types
from runtime.datastream.async_data_stream import AsyncDataStream
from runtime.errors import ApiUsageError, ConfigurationError, FunctionContractError
from runtime.protocol.records import TimestampedBatch

WAIT_S = 10.0  # the longest any wait here may take before the test fails


# -- an HTTP server that answers slowly, counting what it sees ---------------------------------------------------


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True


class SlowServer:
    """``GET /n`` answers ``n * n`` after ``delay_s``; a held ``n`` answers only once ``release`` is set. With
    ``gather`` set, each request waits until ``gather`` requests are in the server at once (or ``total`` have
    arrived), so that the most in flight at once is reached whenever the client allows it."""

    def __init__(self, delay_s: float = 0.01):
        self.delay_s = delay_s
        self.changed = threading.Condition()
        self.in_flight = 0
        self.most_in_flight = 0
        self.arrivals = 0
        self.requests: collections.Counter = collections.Counter()
        self.held: set = set()
        self.release = threading.Event()
        self.gather = 0
        self.total = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.answer(self)

            def log_message(self, *args):
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        n = int(handler.path.lstrip("/"))
        with self.changed:
            self.arrivals += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.requests[n] += 1
            self.changed.notify_all()
            if self.gather:
                self.changed.wait_for(lambda: self.in_flight >= self.gather or self.arrivals >= self.total, WAIT_S)
        if n in self.held:
            self.release.wait(WAIT_S)
        else:
            time.sleep(self.delay_s)  # the slow answer itself
        with self.changed:  # before answering: a client that has its answer is no longer in flight here
            self.in_flight -= 1
            self.changed.notify_all()
        try:
            body = str(n * n).encode()
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client was cancelled (its operator closed)
            pass

    def wait_for_requests(self, values) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: all(self.requests[v] for v in values), WAIT_S)


@pytest.fixture
def server():
    s = SlowServer()
    s.thread.start()
    yield s
    s.release.set()
    s.httpd.shutdown()
    s.httpd.server_close()


async def http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()  # HTTP/1.0: the server closes the connection after its answer
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


class HttpSquare(AsyncFunction):
    def __init__(self, port: int):
        self.port = port

    async def async_invoke(self, value):
        status, body = await http_get(self.port, f"/{value}")
        if status != 200:
            raise ConnectionError(f"HTTP {status} for {value}")
        return [(value, int(body))]


# -- driving the operator as a subtask does ----------------------------------------------------------------------


@pytest.fixture
def make():
    """Build an operator as the driver does, ship it (pickle), set it up, restore ``state``, open it; closed at
    the end of the test whatever happens."""
    made = []

    def build(function, ordered=True, capacity=100, timeout_ms=10_000, strategy=NO_RETRY_STRATEGY, state=None):
        op = AsyncWaitOperator("async wait operator", function, timeout_ms, capacity, strategy, ordered)
        op = cloudpickle.loads(cloudpickle.dumps(op))
        op.setup(SubtaskInfo("async wait operator", 0, 1, 128, 0))
        if state is not None:
            op.restore_operator_state(state)
        made.append(op)
        op.open()
        return op

    yield build
    for op in made:
        op.close()


def run_timers_until(op, count: int) -> list:
    """The subtask's loop without input: wait for the operator's next processing time, fire it, until ``count``
    records came out."""
    out: list = []
    deadline = time.monotonic() + WAIT_S
    while len(out) < count:
        assert time.monotonic() < deadline, f"only {out} after {WAIT_S} s"
        due = op.next_processing_time()
        assert due is not None, f"calls in flight, yet no processing time asked for (got {out})"
        now = processing_time_ms()
        if due > now:
            time.sleep((due - now) / 1000)  # as the subtask's poll of its input gate until then
            continue
        out += op.on_processing_time(processing_time_ms())
    return out


def squares(values) -> list:
    return [(v, v * v) for v in values]


def stamped(*batches) -> tuple[list, list]:
    """The records of ``batches`` and their timestamps (an empty output is a plain ``[]``, without any)."""
    records, timestamps = [], []
    for batch in batches:
        assert not batch or type(batch) is TimestampedBatch, f"timestamps lost: {batch!r}"
        records += batch
        timestamps += batch.timestamps if batch else []
    return records, timestamps


# -- order, watermarks, timestamps ------------------------------------------------------------------------------


class OneBeforeZero(AsyncFunction):
    """The call for 0 finishes only after the call for 1 has: completion order 1, 2, 0 for input 0, 1, 2."""

    async def async_invoke(self, value):
        if not hasattr(self, "one_done"):
            self.one_done = asyncio.Event()
        if value == 0:
            await self.one_done.wait()
        if value == 1:
            self.one_done.set()
        return [value]


@pytest.mark.parametrize("ordered, expected", [(True, [0, 1, 2]), (False, [1, 2, 0])])
def test_ordered_emits_in_input_order_and_unordered_as_calls_finish(make, ordered, expected):
    op = make(OneBeforeZero(), ordered=ordered)
    out = list(op.process_batch([0, 1, 2]))
    out += op.process_watermark(100)
    assert out == expected


@pytest.mark.parametrize("ordered", [True, False])
def test_no_result_crosses_a_watermark_and_results_keep_their_timestamps(make, server, ordered):
    op = make(HttpSquare(server.port), ordered=ordered)
    before = list(range(0, 6))
    after = list(range(6, 12))
    emitted, times = stamped(op.process_batch(TimestampedBatch.of(before, [1_000 + v for v in before])),
                             op.process_watermark(1_005))  # the server takes >= 10 ms: calls in flight here
    assert sorted(emitted) == squares(before) and times == [1_000 + v for v, _ in emitted]
    rest, rest_times = stamped(op.process_batch(TimestampedBatch.of(after, [2_000 + v for v in after])),
                               op.finish())
    assert sorted(rest) == squares(after) and rest_times == [2_000 + v for v, _ in rest]
    if ordered:
        assert emitted + rest == squares(before + after)


class Twice(AsyncFunction):
    async def async_invoke(self, value):
        return [value, value]


def test_every_result_of_a_record_keeps_its_timestamp(make):
    op = make(Twice(), ordered=True)
    out = stamped(op.process_batch(TimestampedBatch.of(["a", "b"], [5, 7])), op.finish())
    assert out == (["a", "a", "b", "b"], [5, 5, 7, 7])


def test_processing_time_polls_emit_results_while_no_input_comes(make, server):
    op = make(HttpSquare(server.port), ordered=False)
    assert op.next_processing_time() is None  # nothing in flight: no poll
    out = list(op.process_batch(list(range(8))))
    out += run_timers_until(op, 8 - len(out))
    assert sorted(out) == squares(range(8))
    assert op.next_processing_time() is None


def test_while_calls_are_in_flight_the_operator_asks_for_polls_at_fixed_times_that_move_on(make, server):
    server.held = {1}
    op = make(HttpSquare(server.port))
    op.process_batch([1])
    server.wait_for_requests([1])
    dues = []
    for _ in range(4):
        due = op.next_processing_time()
        assert op.next_processing_time() == due, "a fixed time, which the subtask's clock reaches"
        while processing_time_ms() < due:  # the subtask waits for the clock to reach it
            time.sleep(0.0005)
        assert op.on_processing_time(processing_time_ms()) == []
        dues.append(due)
    assert dues == sorted(set(dues)), "each poll asks for the next one later"
    server.release.set()
    assert op.finish() == [(1, 1)] and op.next_processing_time() is None


# -- checkpoints and restores -----------------------------------------------------------------------------------


def wait_until_answered_but_not_emitted(op, values: set) -> None:
    """Ordered mode, a held record first: wait until the operator has taken the answers for ``values`` (a peek at
    its internals: no public method tells the answers it holds back from those still in flight)."""
    deadline = time.monotonic() + WAIT_S
    while not values <= {r.value for r in op._pending if r.results is not None}:
        assert time.monotonic() < deadline
        assert op.on_processing_time(processing_time_ms()) == []  # held back behind the record in flight
        op._handoff.wait(0.05)


@pytest.mark.parametrize("ordered", [True, False])
def test_a_restored_operator_calls_again_exactly_the_records_not_emitted(make, server, ordered):
    server.held = {5, 6, 7}  # in flight at the checkpoint; 8 and 9 answer (in ordered mode, waiting behind 5)
    first = make(HttpSquare(server.port), ordered=ordered)
    emitted, times = stamped(first.process_batch(TimestampedBatch.of([0, 1, 2, 3, 4], [10, 11, 12, 13, 14])),
                             first.process_watermark(20),
                             first.process_batch(TimestampedBatch.of([5, 6, 7, 8, 9], [15, 16, 17, 18, 19])))
    server.wait_for_requests([5, 6, 7])
    if ordered:
        wait_until_answered_but_not_emitted(first, {8, 9})
    state = cloudpickle.loads(cloudpickle.dumps(first.snapshot_operator_state(1)))
    first.close()  # the attempt ends: its calls in flight are cancelled

    done = {v for v, _ in emitted}
    pending = state["async-wait:pending"]
    assert [v for v, _ in pending] == [v for v in range(10) if v not in done]  # in input order
    assert {5, 6, 7} <= {v for v, _ in pending} and all(t == 10 + v for v, t in pending)
    if ordered:
        assert [v for v, _ in pending] == [5, 6, 7, 8, 9]

    server.release.set()
    second = make(HttpSquare(server.port), ordered=ordered, state=state)
    rest, rest_times = stamped(second.finish())
    assert sorted(emitted + rest) == squares(range(10))  # each result exactly once
    assert times + rest_times == [10 + v for v, _ in emitted + rest]
    if ordered:
        assert emitted + rest == squares(range(10))
    assert all(server.requests[v] == 1 for v in done), "a record whose results were emitted is not called again"
    assert all(server.requests[v] == 2 for v in (5, 6, 7)), "a record in flight at the checkpoint is called again"


class Concurrency(AsyncFunction):
    def __init__(self):
        self.running = self.most = 0

    async def async_invoke(self, value):
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.005)
        self.running -= 1
        return [value]


def test_restored_records_beyond_the_capacity_wait_their_turn_in_order(make):
    state = {"async-wait:pending": [(v, None) for v in range(7)]}  # e.g. two subtasks' records after a rescale
    op = make(Concurrency(), ordered=True, capacity=2, state=state)
    assert op.snapshot_operator_state(2)["async-wait:pending"] == state["async-wait:pending"]
    out = run_timers_until(op, 3)
    out += op.process_batch([7, 8])  # new input comes after the restored records
    out += op.finish()
    assert out == list(range(9)) and op.function.most == 2


# -- capacity ---------------------------------------------------------------------------------------------------


def test_the_capacity_bounds_the_calls_in_flight(make, server):
    server.gather, server.total = 3, 12
    op = make(HttpSquare(server.port), ordered=False, capacity=3)
    out = list(op.process_batch(list(range(12))))  # waits for calls to finish whenever 3 are in flight
    out += op.finish()
    assert sorted(out) == squares(range(12))
    assert server.most_in_flight == 3, "never more than the capacity in flight, and the capacity is used"


# -- timeouts, retries, errors ----------------------------------------------------------------------------------


class SilentOnOdd(AsyncFunction):
    async def async_invoke(self, value):
        if value % 2:
            await asyncio.Event().wait()  # never answers
        return [value]

    def timeout(self, value):
        return [-value]


def test_a_call_that_times_out_emits_what_the_functions_timeout_returns(make):
    op = make(SilentOnOdd(), ordered=True, timeout_ms=50)
    out = list(op.process_batch([1, 2, 3, 4]))
    out += op.finish()
    assert out == [-1, 2, -3, 4]


class Silent(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.Event().wait()


def test_the_default_timeout_fails_the_job_with_a_clear_error(make):
    op = make(Silent(), ordered=False, timeout_ms=30)
    with pytest.raises(AsyncFunctionError) as raised:
        op.process_batch(["slow"])
        op.finish()
    assert "Silent.timeout('slow') raised TimeoutError" in str(raised.value)
    assert "Give the calls more time" in str(raised.value)
    assert type(raised.value.__cause__) is TimeoutError


class Flaky(AsyncFunction):
    """Fails on the first call for a record, answers [] on the second, [value] from the third."""

    def __init__(self):
        self.calls: collections.Counter = collections.Counter()  # touched on the event loop's thread only

    async def async_invoke(self, value):
        self.calls[value] += 1
        if self.calls[value] == 1:
            raise ConnectionError(f"reset while fetching {value}")
        return [] if self.calls[value] == 2 else [value]


@pytest.mark.parametrize("strategy", [
    AsyncRetryStrategy.fixed_delay(3, 1, async_retry_predicates.empty_result_predicate,
                                   async_retry_predicates.has_exception_predicate),
    AsyncRetryStrategy.exponential_backoff(3, 1, 4, 2.0, async_retry_predicates.empty_result_predicate,
                                           async_retry_predicates.has_exception_predicate),
])
def test_calls_are_retried_while_the_predicates_ask(make, strategy):
    op = make(Flaky(), ordered=True, strategy=strategy)
    out = list(op.process_batch([1, 2, 3]))
    out += op.finish()
    assert out == [1, 2, 3] and op.function.calls == {1: 3, 2: 3, 3: 3}


def test_without_a_result_predicate_an_empty_result_is_emitted_as_it_is(make):
    strategy = AsyncRetryStrategy.fixed_delay(3, 1, None, async_retry_predicates.has_exception_predicate)
    op = make(Flaky(), ordered=True, strategy=strategy)
    assert list(op.process_batch([1])) + list(op.finish()) == [] and op.function.calls == {1: 2}


class Missing(AsyncFunction):
    def __init__(self):
        self.calls: collections.Counter = collections.Counter()

    async def async_invoke(self, value):
        self.calls[value] += 1
        return await self.lookup_user(value)

    async def lookup_user(self, value):
        raise KeyError(f"no user {value}")


def test_a_call_that_still_fails_after_its_retries_fails_the_job_with_the_users_traceback(make):
    strategy = AsyncRetryStrategy.fixed_delay(2, 1, None, async_retry_predicates.has_exception_predicate)
    op = make(Missing(), ordered=False, strategy=strategy)
    with pytest.raises(AsyncFunctionError) as raised:  # from whichever call of the subtask's comes next
        op.process_batch([7])
        op.process_watermark(100)
    error = raised.value
    assert "Missing.async_invoke(7) raised KeyError: 'no user 7' (after 3 attempts)" in str(error)
    assert type(error.__cause__) is KeyError and op.function.calls[7] == 3
    report = "".join(traceback.format_exception(error))
    assert "in lookup_user" in report and 'raise KeyError(f"no user {value}")' in report


def test_an_exception_the_predicate_does_not_match_is_not_retried(make):
    only_resets = partial(async_retry_predicates.exception_type_predicate, expected_error_type=ConnectionError)
    op = make(Missing(), ordered=True, strategy=AsyncRetryStrategy.fixed_delay(5, 1, None, only_resets))
    with pytest.raises(AsyncFunctionError, match=r"\(after 1 attempt\)"):
        op.process_batch(["x"])
        op.finish()
    assert op.function.calls["x"] == 1


class ReturnsATuple(AsyncFunction):
    async def async_invoke(self, value):
        return value, len(value)


def test_a_result_that_is_not_a_list_is_a_contract_error(make):
    op = make(ReturnsATuple(), ordered=True)
    with pytest.raises(FunctionContractError, match=r"ReturnsATuple.async_invoke\('abc'\) returned tuple .*list"):
        op.process_batch(["abc"])
        op.finish()


# -- lifecycle --------------------------------------------------------------------------------------------------


class AsyncOpen(AsyncFunction):
    async def open(self, runtime_context):
        self.loop = asyncio.get_running_loop()  # e.g. a client session, made on the loop that will use it

    async def async_invoke(self, value):
        return [asyncio.get_running_loop() is self.loop]

    async def close(self):
        self.closed_on = asyncio.get_running_loop()


def test_async_open_and_close_run_on_the_event_loop_and_close_stops_its_thread(make):
    op = make(AsyncOpen(), ordered=True)
    assert list(op.process_batch([1])) + list(op.finish()) == [True]
    loop = op.function.loop
    op.close()
    assert op.function.closed_on is loop
    assert not [t for t in threading.enumerate() if t.name.startswith("async-io async wait operator")]


class FailingOpen(AsyncFunction):
    def open(self, runtime_context):
        raise OSError("cannot reach the service")

    async def async_invoke(self, value):
        return [value]


def test_an_open_that_raises_leaves_no_event_loop_thread_behind(make):
    with pytest.raises(OSError, match="cannot reach"):
        make(FailingOpen())
    assert not [t for t in threading.enumerate() if t.name.startswith("async-io async wait operator")]


# -- declaring the job ------------------------------------------------------------------------------------------


class Plain(AsyncFunction):
    def async_invoke(self, value):
        return [value]


class Forgot(AsyncFunction):
    pass


class Fine(AsyncFunction):
    async def async_invoke(self, value):
        return [value]


def numbers():
    return StreamExecutionEnvironment.get_execution_environment().from_collection([1, 2, 3])


@pytest.mark.parametrize("function, message", [
    (Plain(), "Plain.async_invoke must be declared 'async def'"),
    (Forgot(), "Forgot does not define async_invoke"),
    (len, "expects an AsyncFunction"),
])
def test_an_async_invoke_that_is_not_a_coroutine_function_is_refused_where_the_job_is_declared(function, message):
    with pytest.raises(ApiUsageError, match=message):
        AsyncDataStream.unordered_wait(numbers(), function, Time.seconds(1))


def test_retries_need_a_timeout_and_a_strategy():
    retry = AsyncRetryStrategy.fixed_delay(3, 10, None, async_retry_predicates.has_exception_predicate)
    with pytest.raises(ConfigurationError, match="needs a timeout"):
        AsyncDataStream.ordered_wait_with_retry(numbers(), Fine(), 0, retry)
    with pytest.raises(ApiUsageError, match="no_restart"):
        AsyncDataStream.ordered_wait_with_retry(numbers(), Fine(), Time.seconds(1), None)
    with pytest.raises(ConfigurationError, match="capacity"):
        AsyncDataStream.ordered_wait(numbers(), Fine(), Time.seconds(1), capacity=0)
    with pytest.raises(ConfigurationError, match="max_attempts"):
        AsyncRetryStrategy.fixed_delay(0, 10, None, None)
    # without retries, no timeout is fine (as in PyFlink)
    assert AsyncDataStream.unordered_wait(numbers(), Fine(), 0).get_name() == "async wait operator"


def test_the_declared_operator_ships_with_its_settings():
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = AsyncDataStream.unordered_wait_with_retry(
        env.from_collection(["a"]), Fine(), Time.seconds(3), AsyncRetryStrategy.no_restart(), 7, Types.STRING())
    assert stream.get_type() == Types.STRING()
    stream.uid("lookups").print()
    [node] = [n for n in env.get_job_graph("job").operators if n.uid == "lookups"]
    op = node.operator
    assert isinstance(op, AsyncWaitOperator) and (op.ordered, op.capacity, op.timeout_ms) == (False, 7, 3_000)
