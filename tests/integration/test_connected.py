"""Two-input operators (``connect``) end to end: records of each input reach their own method, keyed state and
timers are shared by both inputs of a key, the input watermark is the minimum of both, and a keyed join is
exactly once after an exception and a SIGKILL."""

import collections
import random

import pytest

from operators import (
    CoGroupFunction,
    CollectSink,
    KeyedCoProcessFunction,
    ProcessJoinFunction,
    SequenceSource,
    ValueStateDescriptor,
)
from runtime import Duration, RestartStrategies, Time, WatermarkStrategy
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.jobs import CONNECTED_WORDS, Tag, tagged_reference
from tests.integration.paced import PacedSource


def test_each_input_reaches_its_own_method(env):
    # At parallelism 2, each input's records from its own channels (also tested without Spark, by a test harness:
    # tests/unit/test_connected_semantics.py).
    env.set_parallelism(2)
    sink = CollectSink("tagged")
    env.from_sequence(0, 999).connect(env.from_collection(CONNECTED_WORDS)).map(Tag()).sink_to(sink)
    assert sorted(env.execute("co-map-p2").collected(sink)) == tagged_reference(1_000)


ORDERS = 6_000


def order_time(n: int) -> int:
    return n * 10 + (n % 3) * 7


class PaymentTimeout(KeyedCoProcessFunction):
    """An order (input 1) waits 200 ms of event time for its payment (input 2): joined when it comes, else
    reported unpaid when an event-time timer fires. Every 7th order is never paid."""

    def open(self, runtime_context):
        self.order = runtime_context.get_state(ValueStateDescriptor("order"))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid"))

    def process_element1(self, value, ctx):
        if self.paid.value():
            self.paid.clear()
            yield "paid", value
        else:
            self.order.update(value)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 200)

    def process_element2(self, value, ctx):
        if self.order.value() is not None:
            yield "paid", value
            self.order.clear()
        else:
            self.paid.update(True)

    def on_timer(self, timestamp, ctx):
        if self.order.value() is not None:
            yield "unpaid", self.order.value()
            self.order.clear()


def expected_join():
    return sorted(("unpaid" if n % 7 == 0 else "paid", n) for n in range(ORDERS))


def join_job(env, tmp_path, parallelism, chaos=None):
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_config().set_auto_watermark_interval(10)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    # orders n at n * 10 ms; the payment of order n 50 ms later (never for every 7th order)
    stamp = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(30))
    orders = env.from_source(
        PacedSource(SequenceSource(0, ORDERS - 1), per_checkpoint=ORDERS // parallelism // 8,
                    together=str(tmp_path / "paced-orders")),
        stamp.with_timestamp_assigner(lambda n, _: order_time(n)), "orders").uid("orders")
    payments = env.from_source(
        PacedSource(SequenceSource(0, ORDERS - 1), per_checkpoint=ORDERS // parallelism // 8,
                    together=str(tmp_path / "paced-payments")),
        stamp.with_timestamp_assigner(lambda n, _: order_time(n) + 50), "payments").uid("payments") \
        .filter(lambda n: n % 7 != 0).uid("paid-only")
    if chaos is not None:
        payments = payments.map(chaos).uid("chaos")
    sink = CollectSink("joined")
    (orders.connect(payments).key_by(lambda n: n, lambda n: n)  # key: the order id
     .process(PaymentTimeout()).uid("join").sink_to(sink).uid("sink"))
    return sink


def test_a_keyed_join_shares_state_and_timers_across_inputs(env, tmp_path):
    sink = join_job(env, tmp_path, 2)
    assert sorted(env.execute("join").collected(sink)) == expected_join()


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_a_keyed_join_is_exactly_once_after_a_failure(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "fail")
    sink = join_job(env, tmp_path, 2, ChaosMap(faults, "fail", how, random.Random().randrange(200, 1_500)))
    result = env.execute(f"join-{how}")
    assert remaining(faults) == [] and result.restarts == 1 and result.restored_from[1] is not None
    out = result.collected(sink)
    assert sorted(out) == expected_join(), collections.Counter(out).most_common(3)


class ClickThenBuy(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left, right, ctx.get_timestamp()


def test_an_interval_join_matches_the_reference(env):
    env.set_parallelism(2)
    env.get_config().set_auto_watermark_interval(10)
    stamp = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    clicks = env.from_source(SequenceSource(0, 2_999), stamp.with_timestamp_assigner(lambda n, _: n * 7),
                             "clicks")
    buys = env.from_source(SequenceSource(0, 999), stamp.with_timestamp_assigner(lambda n, _: n * 20), "buys")
    sink = CollectSink("joined")
    (clicks.key_by(lambda n: n % 13).interval_join(buys.key_by(lambda n: n % 13))
     .between(Time.milliseconds(-50), Time.milliseconds(30)).process(ClickThenBuy()).sink_to(sink))
    out = env.execute("interval-join").collected(sink)
    expected = [(c, b, max(c * 7, b * 20)) for c in range(3_000) for b in range(1_000)
                if c % 13 == b % 13 and -50 <= b * 20 - c * 7 <= 30]
    assert len(expected) > 500 and sorted(out) == sorted(expected)


class Sizes(CoGroupFunction):
    def co_group(self, first, second):
        yield len(first), len(second)


def test_window_join_and_co_group_match_the_reference(env):
    from operators import TumblingEventTimeWindows

    env.set_parallelism(2)
    env.get_config().set_auto_watermark_interval(10)
    stamp = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    left = env.from_source(SequenceSource(0, 599), stamp.with_timestamp_assigner(lambda n, _: n * 10), "left")
    right = env.from_source(SequenceSource(0, 299), stamp.with_timestamp_assigner(lambda n, _: n * 20 + 5), "right")
    joined, grouped = CollectSink("joined"), CollectSink("grouped")
    (left.join(right).where(lambda n: n % 5).equal_to(lambda n: n % 5).window(TumblingEventTimeWindows.of(1_000))
     .apply(lambda a, b: (a, b)).sink_to(joined))
    (left.co_group(right).where(lambda n: n % 5).equal_to(lambda n: n % 5)
     .window(TumblingEventTimeWindows.of(1_000)).apply(Sizes()).sink_to(grouped))
    result = env.execute("window-join")
    expected = [(a, b) for a in range(600) for b in range(300)
                if a % 5 == b % 5 and a * 10 // 1_000 == (b * 20 + 5) // 1_000]
    assert sorted(result.collected(joined)) == sorted(expected)
    sizes = collections.Counter()
    for a in range(600):
        sizes[(a % 5, a * 10 // 1_000, 0)] += 1
    for b in range(300):
        sizes[(b % 5, (b * 20 + 5) // 1_000, 1)] += 1
    groups = {(k, w) for k, w, _ in sizes}
    assert sorted(result.collected(grouped)) == sorted((sizes[(k, w, 0)], sizes[(k, w, 1)]) for k, w in groups)
