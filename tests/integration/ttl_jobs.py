"""The state time-to-live job's function, shared by the job on Spark (tests/integration/test_state_ttl.py) and by
the same function driven by test harnesses (tests/unit/test_state_ttl_semantics.py)."""

from __future__ import annotations

from operators import KeyedProcessFunction, ValueStateDescriptor
from runtime import Time
from runtime.datastream.state import StateTtlConfig

TTL_MS, READ_AFTER_MS, N = 200, 400, 3_000


class ReadAfterExpiry(KeyedProcessFunction):
    """Writes each record to a value with a TTL of ``TTL_MS`` and to one without, and reads both from a
    processing-time timer ``read_after_ms`` after the write: ``(key, the value with a TTL, the other)``."""

    def __init__(self, read_after_ms: int = READ_AFTER_MS):
        self.read_after_ms = read_after_ms

    def open(self, runtime_context):
        expiring = ValueStateDescriptor("expiring")
        expiring.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(TTL_MS)).build())
        self.expiring = runtime_context.get_state(expiring)
        self.plain = runtime_context.get_state(ValueStateDescriptor("plain"))

    def process_element(self, n, ctx):
        self.expiring.update(n)
        self.plain.update(n)
        # by default the timer falls due READ_AFTER_MS after the write, when the TTL has certainly run out
        ctx.timer_service().register_processing_time_timer(
            ctx.timer_service().current_processing_time() + self.read_after_ms)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.expiring.value(), self.plain.value()
