"""Every window kind over one stamped sequence, and the plain-Python reference each must match: shared by the
windows job on Spark (tests/integration/test_windows.py) and by the same window operators driven by test harnesses
(tests/unit/test_window_semantics.py).

Event time is ``event_time(n)`` of the sequence number ``n``: out of order, but within the watermark's bound,
so no record is late and every window's result is fixed however the records interleave.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

from operators import (
    AggregateFunction,
    CollectSink,
    EventTimeSessionWindows,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TimeEvictor,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowFunction,
)
from runtime import Duration, Time, WatermarkStrategy

KEYS = 7
SIZE, SLIDE, GAP = 1_000, 250, 40


def event_time(n: int) -> int:
    """Gaps of 0-90 ms between neighbours (sessions form and merge), out of order by up to 160 ms."""
    return n * 30 + (n % 4) * 15 - (n % 5) * 40 + (n // 50) * 200


def strategy():
    return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200))
            .with_timestamp_assigner(lambda n, _: event_time(n)))


def tumbling_reference(n):
    return collections.Counter((x % KEYS, event_time(x) // SIZE * SIZE) for x in range(n))


def sliding_reference(n):
    sums = collections.Counter()
    for x in range(n):
        ts = event_time(x)
        for start in range(ts - ts % SLIDE, ts - SIZE, -SLIDE):
            sums[(x % KEYS, start)] += x
    return sums


def session_reference(n, keys=KEYS):
    """The sessions of the numbers keyed by ``x % keys``. (With seven keys a key's numbers come about 210 ms
    apart, so each session holds one; with one key they come 0-90 ms apart, and sessions merge.)"""
    sessions = []
    for key in range(keys):
        times = sorted((event_time(x), x) for x in range(n) if x % keys == key)
        current = []
        for ts, x in times:
            if current and ts > current[-1][0] + GAP:
                sessions.append((key, current[0][0], current[-1][0] + GAP, len(current)))
                current = []
            current.append((ts, x))
        if current:
            sessions.append((key, current[0][0], current[-1][0] + GAP, len(current)))
    return sorted(sessions)


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class WithWindowStart(WindowFunction):
    """The one pre-aggregated input (a sum, or a (key, count) pair) with its key and window start."""

    def apply(self, key, window, inputs):
        for total in inputs:
            yield key, window.start, total[1] if isinstance(total, tuple) else total


class SessionSize(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield key, window.start, window.end, len(list(elements))


class CountAll(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield context.window().start, len(list(elements))


def by_number(x):
    return x % KEYS


def by_first(record):
    return record[0]


def count_one(x):
    return x % KEYS, 1


@dataclasses.dataclass(frozen=True)
class WindowKind:
    """One window operator of the job: ``declare`` declares it on the stream it reads, which is the numbers
    (mapped by ``prepare`` on the numbers keyed by :func:`by_number`, when given) keyed by ``key`` (None: not keyed,
    a ``window_all``)."""

    declare: Callable
    key: Callable | None = by_number
    prepare: Callable | None = None

    def on(self, stream):
        """The window operator declared on ``stream``, the records it reads (the numbers, or ``prepare``'s)."""
        return self.declare(stream if self.key is None else stream.key_by(self.key))


WINDOWS = {
    "tumbling": WindowKind(lambda s: s.window(TumblingEventTimeWindows.of(Time.seconds(1)))
                           .reduce(lambda a, b: (a[0], a[1] + b[1]), window_function=WithWindowStart()),
                           key=by_first, prepare=count_one),
    "sliding": WindowKind(lambda s: s.window(SlidingEventTimeWindows.of(Duration.of_millis(SIZE),
                                                                        Duration.of_millis(SLIDE)))
                          .aggregate(Sum(), window_function=WithWindowStart())),
    "sessions": WindowKind(lambda s: s.window(EventTimeSessionWindows.with_gap(Duration.of_millis(GAP)))
                           .process(SessionSize())),
    "all": WindowKind(lambda s: s.window_all(TumblingEventTimeWindows.of(SIZE)).process(CountAll()), key=None),
    "count": WindowKind(lambda s: s.count_window(5).reduce(lambda a, b: a + b)),
    # an evictor keeps the pane's last 300 ms of event time; reduce then runs over what is left
    "evicted": WindowKind(lambda s: s.window(TumblingEventTimeWindows.of(SIZE)).evictor(TimeEvictor.of(300))
                          .reduce(lambda a, b: a + b, window_function=WithWindowStart())),
    "processing": WindowKind(lambda s: s.window(TumblingProcessingTimeWindows.of(100))
                             .reduce(lambda a, b: (a[0], a[1] + b[1])), key=by_first, prepare=count_one),
}


def windows_job(env, source):
    """Every kind of :data:`WINDOWS` over ``source``'s numbers, stamped by :func:`strategy`: a sink per kind."""
    numbers = env.from_source(source, strategy(), "numbers").uid("numbers")
    sinks = {}
    for name, kind in WINDOWS.items():
        stream = numbers if kind.prepare is None else numbers.key_by(by_number).map(kind.prepare)
        sinks[name] = CollectSink(name)
        kind.on(stream).uid(name).sink_to(sinks[name]).uid(f"{name}-sink")
    return sinks


def check_tumbling(got, n):
    assert collections.Counter({(k, s): c for k, s, c in got}) == tumbling_reference(n)
    assert len(got) == len(tumbling_reference(n)), "a window fired twice"


def check_sliding(got, n):
    assert collections.Counter({(k, s): c for k, s, c in got}) == sliding_reference(n)


def check_sessions(got, n):
    assert sorted(got) == session_reference(n)


def check_all(got, n):
    assert sorted(got) == sorted(collections.Counter(event_time(x) // SIZE * SIZE for x in range(n)).items())


def check_evicted(got, n):
    panes = collections.defaultdict(list)
    for x in range(n):
        panes[(x % KEYS, event_time(x) // SIZE * SIZE)].append((event_time(x), x))
    kept = {pane: sum(x for ts, x in items if ts > max(items)[0] - 300) for pane, items in panes.items()}
    assert {(k, s): total for k, s, total in got} == kept


def check_count(got, n):
    per_key = collections.Counter(x % KEYS for x in range(n))
    # Count windows follow arrival order, which parallel sources do not fix: their number and totals are fixed.
    assert len(got) == sum(c // 5 for c in per_key.values())
    assert sum(got) <= sum(range(n))


def check_processing(got, n):
    per_key = collections.Counter(x % KEYS for x in range(n))
    processed = collections.Counter()
    for key, count in got:  # processing-time windows: any grouping, every record once
        processed[key] += count
    assert processed == per_key


CHECKS = {"tumbling": check_tumbling, "sliding": check_sliding, "sessions": check_sessions, "all": check_all,
          "count": check_count, "evicted": check_evicted, "processing": check_processing}


def check_windows(got: dict, n: int) -> None:
    """``got``: what each kind of :data:`WINDOWS` emitted for the numbers ``0..n-1``."""
    assert set(got) == set(CHECKS)
    for name, check in CHECKS.items():
        check(got[name], n)
