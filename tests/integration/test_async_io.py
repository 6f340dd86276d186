"""Async I/O end to end: an ordered async function with retries at parallelism 2, calling an HTTP server in this
process that answers slowly (and refuses each tenth number's first request), with a failure after a checkpoint:
the output is the plain-Python reference, each record exactly once."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from operators import CollectSink, SequenceSource
from operators.async_functions import AsyncFunction, AsyncRetryStrategy, async_retry_predicates
from runtime import Duration, RestartStrategies, Time, WatermarkStrategy
from runtime.datastream.async_data_stream import AsyncDataStream
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import DirectoryEmpty, PacedSource

N = 3_000


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True


class SquareServer:
    """``GET /n`` answers ``n * n`` after 2 ms; the first request for each multiple of 10 gets a 503."""

    def __init__(self):
        self.lock = threading.Lock()
        self.refused: set = set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                n = int(self.path.lstrip("/"))
                with server.lock:
                    refuse = n % 10 == 0 and n not in server.refused
                    if refuse:
                        server.refused.add(n)
                time.sleep(0.002)  # answers slowly
                body = b"busy" if refuse else str(n * n).encode()
                try:
                    self.send_response(503 if refuse else 200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # a call cancelled by a failing attempt
                    pass

            def log_message(self, *args):
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)  # the executors of local Spark are on this machine
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def square_server():
    server = SquareServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


class HttpSquare(AsyncFunction):
    def __init__(self, port: int):
        self.port = port

    async def async_invoke(self, value):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(f"GET /{value} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
            await writer.drain()
            response = await reader.read()
        finally:
            writer.close()
        head, _, body = response.partition(b"\r\n\r\n")
        if int(head.split(b" ", 2)[1]) != 200:
            raise ConnectionError(f"HTTP {head.split(b' ', 2)[1].decode()} for {value}")
        return [(value, int(body))]


def test_async_io_matches_the_reference_exactly_once_across_a_restore(env, tmp_path, square_server):
    faults = plan(str(tmp_path / "faults"), "fail")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_config().set_auto_watermark_interval(10)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    numbers = env.from_source(
        PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 8, together=str(tmp_path / "paced"),
                    end_when=DirectoryEmpty(faults)),
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50))
        .with_timestamp_assigner(lambda n, _: n * 10), "numbers").uid("numbers")
    retry = AsyncRetryStrategy.fixed_delay(3, 5, None, async_retry_predicates.has_exception_predicate)
    squares = AsyncDataStream.ordered_wait_with_retry(
        numbers.rebalance(),  # a chain of its own: its results also leave on processing-time polls
        HttpSquare(square_server.port), Time.seconds(30), retry, capacity=20).uid("squares")
    sink = CollectSink("squares")
    chaos = ChaosMap(faults, "fail", "exception", random.Random().randrange(100, 600))
    squares.map(chaos).uid("chaos").sink_to(sink).uid("sink")

    result = env.execute("async-io")

    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from[1] is not None
    reference = [(n, n * n) for n in range(N)]
    assert sorted(result.collected(sink)) == reference
    assert square_server.refused == {n for n in range(N) if n % 10 == 0}, "each tenth number refused once, and retried"
