"""Where shuffle, rescale and partition_custom send records, against plain-Python expectations."""

import collections

import pytest

from runtime.errors import FunctionContractError, KeySelectorError
from runtime.graph.job_graph import ChainEdge, Partitioner
from runtime.network.record_writer import EdgeWriter


class Collected:
    def __init__(self):
        self.records = []

    def send(self, records):
        self.records.extend(records)


def route(partitioner, producers, consumers, producer, records):
    edge = ChainEdge(0, 0, 1, partitioner, None, producers, consumers)
    channels = {c: Collected() for c in range(consumers)}
    writer = EdgeWriter(edge, producer, channels, batch_size=7, max_parallelism=128)
    for start in range(0, len(records), 10):  # several batches, as a subtask emits them
        writer.emit(records[start:start + 10])
    writer.flush()
    return {c: channel.records for c, channel in channels.items()}


def test_shuffle_delivers_every_record_once_spread_over_the_consumers():
    records = list(range(1000))
    received = route(Partitioner("shuffle"), 1, 4, 0, records)
    assert sorted(r for rs in received.values() for r in rs) == records
    assert all(len(rs) > 100 for rs in received.values()), {c: len(rs) for c, rs in received.items()}


@pytest.mark.parametrize("producers, consumers, expected", [
    (2, 4, {0: {0, 1}, 1: {2, 3}}),
    (4, 2, {0: {0}, 1: {0}, 2: {1}, 3: {1}}),
    (2, 3, {0: {0}, 1: {1, 2}}),
    (3, 3, {0: {0}, 1: {1}, 2: {2}}),
])
def test_rescale_feeds_each_producers_own_subset_of_consumers_round_robin(producers, consumers, expected):
    for producer in range(producers):
        records = list(range(100))
        received = route(Partitioner("rescale"), producers, consumers, producer, records)
        assert sorted(r for rs in received.values() for r in rs) == records
        assert {c for c, rs in received.items() if rs} == expected[producer]


def test_partition_custom_sends_each_record_where_the_partitioner_says():
    records = [(word, n) for n in range(20) for word in ("apple", "banana", "cherry")]
    partitioner = Partitioner("custom", lambda r: r[0], partition=lambda key, n: len(key) % n)
    received = route(partitioner, 1, 3, 0, records)
    expected = collections.defaultdict(list)
    for r in records:
        expected[len(r[0]) % 3].append(r)
    assert {c: rs for c, rs in received.items() if rs} == dict(expected)


def test_a_partition_out_of_range_or_a_raising_partitioner_is_named():
    out_of_range = Partitioner("custom", lambda r: r, partition=lambda key, n: key)
    with pytest.raises(FunctionContractError, match=r"returned 3 for key 3.*\[0, 3\)"):
        route(out_of_range, 1, 3, 0, [0, 1, 2, 3])
    negative = Partitioner("custom", lambda r: r, partition=lambda key, n: -1)
    with pytest.raises(FunctionContractError, match="returned -1"):
        route(negative, 1, 3, 0, [0])
    raising = Partitioner("custom", lambda r: r["id"], partition=lambda key, n: 0)
    with pytest.raises(KeySelectorError, match="TypeError"):
        route(raising, 1, 3, 0, [1])


def test_columnar_streams_refuse_record_partitionings_by_name():
    from runtime import StreamExecutionEnvironment
    from runtime.errors import ApiUsageError

    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ApiUsageError, match="shuffle is not available on a columnar stream"):
        env.from_sequence(0, 9, columnar=True).shuffle()
