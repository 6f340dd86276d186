"""Buffer debloating end to end: behind a slow sink, the batches that reach it shrink to what drains in about
the target time (a second), instead of full 4,096-record batches; with debloating off they stay large."""

import statistics
import time

import pytest

from operators import SequenceSource, Sink, SinkWriter
from runtime import StreamExecutionEnvironment
from runtime.configuration import Configuration

N = 8_000


class _SizeWriter(SinkWriter):
    def __init__(self):
        self.sizes = []

    def write_batch(self, records):
        self.sizes.append(len(records))
        time.sleep(0.001 * len(records))  # a slow sink: about 1,000 records per second per subtask

    def result(self):
        return self.sizes


class SlowSizeSink(Sink):
    name = "sizes"

    def create_writer(self, subtask_index, parallelism):
        return _SizeWriter()

    def merge_results(self, results):
        return results


@pytest.mark.parametrize("debloat", [True, False])
def test_batches_behind_a_slow_sink_shrink_with_debloating(spark, debloat):
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    if not debloat:
        env.configure(Configuration().set_string("taskmanager.network.memory.buffer-debloat.enabled", "false"))
    env.from_source(SequenceSource(0, N - 1), "numbers").uid("numbers").map(lambda n: n).uid("first") \
        .key_by(lambda n: n % 10).map(lambda n: n).uid("second").sink_to(SlowSizeSink()).uid("sink")
    result = env.execute(f"debloat-{debloat}")
    parts = result.sink_results["sink"]
    sizes = [size for part in parts for size in part]
    assert sum(sizes) == N
    if debloat:  # 1,000 records/s over 2 channels x 12 batches in flight: about 40 records a batch
        assert statistics.median(size for part in parts for size in part[len(part) // 2:]) <= 256, parts
    else:
        assert max(sizes) >= 1024, sizes
