"""Keyed state in the functions of ``KeyedStream.map / flat_map / filter / reduce``, at the operator level:
exact per-key state over batches of interleaved keys, the unkeyed operators' records and timestamps, and the
choice of operator when a job is declared (no Spark)."""

import collections
import random

import pytest

from operators.builtins import (
    FilterOperator,
    FlatMapOperator,
    KeyedFilterOperator,
    KeyedFlatMapOperator,
    KeyedMapOperator,
    KeyedReduceOperator,
    MapOperator,
    may_use_keyed_state,
)
from operators.context import SubtaskInfo
from operators.functions import FilterFunction, FlatMapFunction, MapFunction, ReduceFunction
from runtime import StreamExecutionEnvironment
from runtime.errors import StateUsageError
from runtime.keys.key_groups import key_group_range
from runtime.protocol.records import TimestampedBatch
from state_backends.descriptors import ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend


class CountingMap(MapFunction):
    """(key, value, how many records of the key so far)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def map(self, record):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return record[0], record[1], n


class EverySecond(FilterFunction):
    """Keeps the 2nd, 4th, ... record of each key."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def filter(self, record):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return n % 2 == 0


class RepeatByCount(FlatMapFunction):
    """The n-th record of a key, n times (a generator: state is read while the operator drains it)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def flat_map(self, record):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        for i in range(n):
            yield record[0], record[1], i


class SumCountingFolds(ReduceFunction):
    """Sums values per key, and counts in its own state how many folds the key had."""

    def open(self, runtime_context):
        self.folds = runtime_context.get_state(ValueStateDescriptor("folds"))

    def reduce(self, a, b):
        n = (self.folds.value() or 0) + 1
        self.folds.update(n)
        return a[0], a[1] + b[1], n


class Stateless(MapFunction):
    """Defines open() (so it runs keyed) but keeps no state: its output must be the unkeyed operator's."""

    def open(self, runtime_context):
        self.opened = True

    def map(self, record):
        return record[0], record[1] * 2


def opened(op, keyed=True):
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0)) if keyed else None
    op.setup(SubtaskInfo(op.name, 0, 1, 128, 0), backend)
    op.open()
    return op


def interleaved(n=600, keys=("a", "b", "c", 7, (1, "x")), seed=1):
    rng = random.Random(seed)
    return [(rng.choice(keys), i) for i in range(n)]


def batches(records, sizes=(1, 37, 128, 5)):
    i, k = 0, 0
    while i < len(records):
        size = sizes[k % len(sizes)]
        yield records[i:i + size]
        i, k = i + size, k + 1


def timestamped(batch):
    return TimestampedBatch.of(batch, [1000 + r[1] for r in batch])


def run(op, records, stamp=False):
    out, timestamps = [], []
    for batch in batches(records):
        result = op.process_batch(timestamped(batch) if stamp else batch)
        out.extend(result)
        if stamp:
            assert type(result) is TimestampedBatch
            timestamps.extend(result.timestamps)
        else:
            assert type(result) is list
    return (out, timestamps) if stamp else out


def running_counts(records):
    seen = collections.Counter()
    for key, value in records:
        seen[key] += 1
        yield key, value, seen[key]


@pytest.mark.parametrize("stamp", [False, True])
def test_keyed_map_counts_per_key_exactly(stamp):
    records = interleaved()
    f = CountingMap()
    op = opened(KeyedMapOperator("count", f, f.map, key_selector=lambda r: r[0]))
    result = run(op, records, stamp)
    out = result[0] if stamp else result
    assert out == list(running_counts(records))
    if stamp:
        assert result[1] == [1000 + r[1] for r in records]


@pytest.mark.parametrize("stamp", [False, True])
def test_keyed_filter_uses_state_per_key(stamp):
    records = interleaved()
    f = EverySecond()
    op = opened(KeyedFilterOperator("every-second", f, f.filter, key_selector=lambda r: r[0]))
    result = run(op, records, stamp)
    expected = [(key, value) for key, value, n in running_counts(records) if n % 2 == 0]
    out = result[0] if stamp else result
    assert out == expected
    if stamp:
        assert result[1] == [1000 + value for _, value in expected]


@pytest.mark.parametrize("stamp", [False, True])
def test_keyed_flat_map_uses_state_per_key(stamp):
    records = interleaved(n=200)
    f = RepeatByCount()
    op = opened(KeyedFlatMapOperator("repeat", f, f.flat_map, key_selector=lambda r: r[0]))
    result = run(op, records, stamp)
    expected = [(key, value, i) for key, value, n in running_counts(records) for i in range(n)]
    out = result[0] if stamp else result
    assert out == expected
    if stamp:
        assert result[1] == [1000 + value for _, value, _ in expected]


@pytest.mark.parametrize("stamp", [False, True])
def test_keyed_operators_emit_what_the_unkeyed_ones_do(stamp):
    """Same records, same timestamps, including None timestamps, empty results and empty batches."""
    records = interleaved(n=300)
    f = Stateless()
    key = lambda r: r[0]  # noqa: E731
    pairs = [
        (MapOperator("m", f, f.map), KeyedMapOperator("m", f, f.map, key)),
        (FilterOperator("f", f, lambda r: r[1] % 3), KeyedFilterOperator("f", f, lambda r: r[1] % 3, key)),
        (FlatMapOperator("fm", f, lambda r: [r] * (r[1] % 3) or None),
         KeyedFlatMapOperator("fm", f, lambda r: [r] * (r[1] % 3) or None, key)),
    ]
    for plain, keyed in pairs:
        opened(plain, keyed=False)
        opened(keyed)
        for batch in [*batches(records), []]:
            if stamp:
                batch = TimestampedBatch.of(batch, [r[1] if r[1] % 5 else None for r in batch])
            expected, got = plain.process_batch(batch), keyed.process_batch(batch)
            assert type(got) is type(expected)
            assert got == expected
            if stamp:
                assert got.timestamps == expected.timestamps


def test_keyed_map_scopes_nan_keys_as_one_key():
    """NaNs are never equal to each other; as keys they are one key, as in the partitioner."""
    f = CountingMap()
    op = opened(KeyedMapOperator("count", f, f.map, key_selector=lambda r: r[0]))
    records = [(float("nan"), i) for i in range(3)] + [(("t", float("nan")), 3), (("t", float("nan")), 4)]
    assert [n for _, _, n in op.process_batch(records)] == [1, 2, 3, 1, 2]


def test_keyed_map_state_stays_exact_across_a_snapshot():
    records = interleaved(n=300)
    f = CountingMap()
    op = opened(KeyedMapOperator("count", f, f.map, key_selector=lambda r: r[0]))
    backend = op.runtime_context.keyed_backend
    first = op.process_batch(records[:150])
    snapshot = backend.snapshot()  # a barrier between two batches; written out while the next one runs
    second = op.process_batch(records[150:])
    assert first + second == list(running_counts(records))
    restored = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    for group, payload in snapshot.serialized():
        restored.restore_key_group(group, payload)
    assert {key: n for _, key, n in restored.entries("count")} == collections.Counter(k for k, _ in records[:150])


@pytest.mark.parametrize("stamp", [False, True])
def test_reduce_function_with_open_uses_its_own_keyed_state(stamp):
    records = interleaved()
    f = SumCountingFolds()
    op = opened(KeyedReduceOperator("sum", f, f.reduce, key_selector=lambda r: r[0]))
    result = run(op, records, stamp)
    out = result[0] if stamp else result
    totals, folds, expected = {}, collections.Counter(), []
    for key, value in records:
        if key in totals:
            folds[key] += 1
            totals[key] = (key, totals[key][1] + value, folds[key])
        else:
            totals[key] = (key, value)
        expected.append(totals[key])
    assert out == expected
    if stamp:
        assert result[1] == [1000 + r[1] for r in records]


def test_reduce_with_a_lambda_is_unchanged():
    op = opened(KeyedReduceOperator("sum", None, lambda a, b: a + b, key_selector=lambda x: x % 3))
    assert op.set_key is None  # the batch path without a key set per record
    assert op.process_batch(list(range(10))) == [0, 1, 2, 3, 5, 7, 9, 12, 15, 18]


def test_only_functions_with_open_run_keyed():
    assert may_use_keyed_state(CountingMap())
    assert not may_use_keyed_state(lambda r: r)
    assert not may_use_keyed_state(MapFunction())
    assert not may_use_keyed_state(len)

    class Callable:  # a plain callable object is opened too (StreamOperator.open), so it may hold state
        def open(self, runtime_context):
            pass

        def __call__(self, record):
            return record

    assert may_use_keyed_state(Callable())


def declared_operators(build):
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env).print()
    return {node.name: node.operator for node in env.get_job_graph("job").operators}


def test_keyed_stream_declares_keyed_operators_for_stateful_functions():
    key = lambda r: r[0]  # noqa: E731
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).map(CountingMap()))
    assert type(ops["Map"]) is KeyedMapOperator and ops["Map"].keyed and ops["Map"].key_selector is key
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).filter(EverySecond()))
    assert type(ops["Filter"]) is KeyedFilterOperator and ops["Filter"].key_selector is key
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).flat_map(RepeatByCount()))
    assert type(ops["FlatMap"]) is KeyedFlatMapOperator and ops["FlatMap"].key_selector is key


def test_keyed_stream_keeps_the_fast_operators_for_functions_without_open():
    key = lambda r: r[0]  # noqa: E731
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).map(lambda r: r))
    assert type(ops["Map"]) is MapOperator and not ops["Map"].keyed
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).filter(lambda r: True))
    assert type(ops["Filter"]) is FilterOperator
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).key_by(key).flat_map(lambda r: [r]))
    assert type(ops["FlatMap"]) is FlatMapOperator


def test_keyed_map_output_is_a_plain_data_stream():
    env = StreamExecutionEnvironment.get_execution_environment()
    mapped = env.from_collection([("a", 1)]).key_by(lambda r: r[0]).map(CountingMap())
    assert type(mapped).__name__ == "DataStream"
    assert not hasattr(mapped, "reduce")


def test_get_state_on_a_non_keyed_stream_still_fails_clearly():
    ops = declared_operators(lambda env: env.from_collection([("a", 1)]).map(CountingMap()))
    op = ops["Map"]
    assert type(op) is MapOperator and not op.keyed
    with pytest.raises(StateUsageError, match="only available in functions applied to a KeyedStream"):
        opened(op, keyed=False)
