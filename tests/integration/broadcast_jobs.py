"""The broadcast-state job's function and reference: readings judged against their sensor's threshold, a
broadcast rule. Shared by the job on Spark (tests/integration/test_broadcast.py) and by the same function driven
by test harnesses (tests/unit/test_broadcast_semantics.py)."""

from __future__ import annotations

from operators import KeyedBroadcastProcessFunction, ListStateDescriptor, MapStateDescriptor

RULES = MapStateDescriptor("thresholds")
PENDING = ListStateDescriptor("pending")
N, SENSORS = 24_000, 12
RULE_EVERY = N // SENSORS  # the rule of sensor s comes with record s * RULE_EVERY: most readings wait for it


def value(n: int) -> int:
    return n * 37 % 100


def threshold(sensor: int) -> int:
    return 40 + 2 * sensor


def expected() -> list:
    return sorted((n % SENSORS, n, value(n) > threshold(n % SENSORS)) for n in range(N))


def rule_of(n: int) -> tuple[int, int] | None:
    """The rule number ``n`` brings (``(sensor, threshold)``), if it brings one."""
    return (n // RULE_EVERY, threshold(n // RULE_EVERY)) if n % RULE_EVERY == 0 else None


def reading_of(n: int) -> tuple[int, int]:
    return n % SENSORS, n


class Alerts(KeyedBroadcastProcessFunction):
    """A reading is judged against its sensor's threshold, a broadcast rule; readings that come before their rule
    wait in keyed state until ``apply_to_keyed_state`` finds them."""

    def open(self, runtime_context):
        self.pending = runtime_context.get_list_state(PENDING)

    def process_element(self, reading, ctx):
        sensor, n = reading
        rule = ctx.get_broadcast_state(RULES).get(sensor)
        if rule is None:
            self.pending.add(n)
        else:
            yield sensor, n, value(n) > rule

    def process_broadcast_element(self, rule, ctx):
        sensor, limit = rule
        ctx.get_broadcast_state(RULES).put(sensor, limit)
        judged = []

        def release(key, pending):
            if key == sensor:
                judged.extend((sensor, n, value(n) > limit) for n in pending.get())
                pending.clear()
        ctx.apply_to_keyed_state(PENDING, release)
        yield from judged
