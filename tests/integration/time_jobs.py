"""The event-time reference job of the timer tests: records counted per key and 100 ms bucket of event time, each
bucket's count emitted by an event-time timer. Shared by the jobs on Spark (tests/integration/test_time.py) and
by the same operator driven by test harnesses (tests/unit/test_time_semantics.py).

With out-of-orderness within the watermark's bound no record is late, so the output is exactly
``Counter((key, bucket end))`` however the records interleave, which plain Python computes.
"""

from __future__ import annotations

import collections

from operators import KeyedProcessFunction, MapStateDescriptor
from runtime import Duration, WatermarkStrategy

BOUND_MS = 300
MAX_WATERMARK = (1 << 63) - 1


def event_time(n: int) -> int:
    """3 ms apart, and out of order by up to 240 ms (within the 300 ms bound)."""
    return n * 3 - (n % 7) * 40


def strategy():
    return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(BOUND_MS))
            .with_timestamp_assigner(lambda n, _: event_time(n)))


def reference(n: int, keys: int) -> dict:
    return dict(collections.Counter((x % keys, event_time(x) // 100 * 100 + 99) for x in range(n)))


class BucketCount(KeyedProcessFunction):
    """Counts the records of each 100 ms bucket of event time; an event-time timer emits the count."""

    def open(self, runtime_context):
        self.counts = runtime_context.get_state(MapStateDescriptor("counts"))

    def process_element(self, value, ctx):
        end = ctx.timestamp() // 100 * 100 + 99
        self.counts.put(end, (self.counts.get(end) or 0) + 1)
        ctx.timer_service().register_event_time_timer(end)

    def on_timer(self, timestamp, ctx):
        count = self.counts.get(timestamp)
        self.counts.remove(timestamp)
        yield ctx.get_current_key(), timestamp, count
