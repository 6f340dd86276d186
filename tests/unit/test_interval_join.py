"""The interval join operator against a plain-Python reference, and its state bounded by the watermark."""

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.context import SubtaskInfo
from operators.functions import ProcessJoinFunction
from operators.interval_join import LEFT, RIGHT, IntervalJoinOperator
from runtime.keys.key_groups import key_group_range
from runtime.protocol.records import TimestampedBatch
from state_backends.heap import HeapKeyedStateBackend


class Pair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left, right, ctx.get_timestamp()


def joined(lower, upper, lefts, rights, lower_inclusive=True, upper_inclusive=True):
    op = IntervalJoinOperator("join", Pair(), lambda r: r[0], lambda r: r[0], lower, upper, lower_inclusive,
                              upper_inclusive)
    op.setup(SubtaskInfo("join", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    op.open()
    out = []
    for i in range(max(len(lefts), len(rights))):  # interleaved, one record of each side at a time
        if i < len(lefts):
            out.extend(op.process_batch1(TimestampedBatch.of([lefts[i]], [lefts[i][1]])) or [])
        if i < len(rights):
            out.extend(op.process_batch2(TimestampedBatch.of([rights[i]], [rights[i][1]])) or [])
    return op, out


SIDE = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 100)), max_size=25)


@settings(max_examples=200, deadline=None)
@given(lower=st.integers(-30, 30), width=st.integers(0, 40), lefts=SIDE, rights=SIDE,
       lower_inclusive=st.booleans(), upper_inclusive=st.booleans())
def test_every_pair_within_the_bounds_joins_once(lower, width, lefts, rights, lower_inclusive, upper_inclusive):
    upper = lower + width
    _, out = joined(lower, upper, lefts, rights, lower_inclusive, upper_inclusive)
    low = lower if lower_inclusive else lower + 1
    high = upper if upper_inclusive else upper - 1
    expected = [(left, right, max(left[1], right[1])) for left in lefts for right in rights
                if left[0] == right[0] and low <= right[1] - left[1] <= high]
    assert sorted(out) == sorted(expected)


def test_state_is_bounded_by_the_watermark():
    op = IntervalJoinOperator("join", Pair(), lambda r: r[0], lambda r: r[0], -10, 20)
    op.setup(SubtaskInfo("join", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    op.open()
    sizes = []
    for t in range(0, 5_000, 5):
        op.process_batch1(TimestampedBatch.of([("k", t)], [t]))
        op.process_batch2(TimestampedBatch.of([("k", t)], [t]))
        op.process_watermark(t - 1)
        sizes.append(sum(len(times) for side in (LEFT, RIGHT) for _, _, times in op.backend.entries(side)))
    assert max(sizes) <= 12, "a record is kept only while one of the other side may still join it"
    op.process_watermark((1 << 63) - 1)
    assert not list(op.backend.entries(LEFT)) and not list(op.backend.entries(RIGHT))


def test_records_behind_the_watermark_are_late_and_dropped():
    op, _ = joined(0, 10, [("k", 50)], [])
    op.process_watermark(100)
    assert op.process_batch2(TimestampedBatch.of([("k", 55)], [55])) == [] and op.late_records_dropped == 1
