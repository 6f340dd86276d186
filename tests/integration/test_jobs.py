"""Jobs on Spark give exactly the plain-Python answer. (The word count's and the count per key's operators are also
tested without Spark, by test harnesses at parallelism 1 and 2: tests/unit/test_keyed_running_results.py.)"""

import collections
import dataclasses

import pytest

from operators import CollectSink, MapFunction
from runtime import Types
from tests.integration.jobs import (
    TEXT,
    WORD_COUNT,
    CountPerKey,
    Reading,
    Tokenize,
    final_counts,
    reference_word_counts,
)


def test_word_count_at_parallelism_4(env):
    env.set_parallelism(4)
    sink = CollectSink("counts")
    (env.from_collection(TEXT)
        .flat_map(Tokenize(), output_type=WORD_COUNT)
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink))
    result = env.execute("word-count-p4")
    assert final_counts(result.collected(sink)) == reference_word_counts(TEXT)
    assert len(result.collected(sink)) == sum(reference_word_counts(TEXT).values())


def test_count_per_key_at_parallelism_4(env):
    env.set_parallelism(4)
    sink = CollectSink()
    n, keys = 50_000, 997
    env.from_sequence(0, n - 1).map(lambda x: x % keys, output_type=Types.LONG()) \
        .key_by(lambda x: x).process(CountPerKey()).sink_to(sink)
    out = env.execute("count-per-key-p4").collected(sink)
    assert len(out) == n
    assert final_counts(out) == dict(collections.Counter(x % keys for x in range(n)))
    # every running count 1..final appears exactly once per key: no record lost or duplicated
    assert sorted(out) == sorted((k, i) for k, c in collections.Counter(x % keys for x in range(n)).items()
                                 for i in range(1, c + 1))


def test_union_of_three_streams(env):
    env.set_parallelism(2)
    sink = CollectSink()
    a = env.from_sequence(0, 999)
    b = env.from_collection(list(range(1000, 1500)))
    c = env.from_sequence(2000, 2999).filter(lambda x: x % 2 == 0)
    a.union(b, c).map(lambda x: x * 10).sink_to(sink)
    out = env.execute("union").collected(sink)
    expected = [x * 10 for x in list(range(1500)) + list(range(2000, 3000, 2))]
    assert sorted(out) == expected


def test_two_key_by_stages(env):
    """Running counts per key, then re-keyed by the count's parity and summed per parity."""
    env.set_parallelism(3)
    sink = CollectSink()
    n = 20_000
    (env.from_sequence(0, n - 1).map(lambda x: (x * 7919) % 101)
        .key_by(lambda k: k).process(CountPerKey())
        .map(lambda kv: (kv[1] % 2, kv[1]))
        .key_by(lambda pv: pv[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink))
    out = env.execute("two-key-bys").collected(sink)
    per_key = collections.Counter((x * 7919) % 101 for x in range(n))
    running = [i for c in per_key.values() for i in range(1, c + 1)]
    expected = {parity: sum(i for i in running if i % 2 == parity) for parity in (0, 1)}
    assert len(out) == n
    assert final_counts(out) == expected


def test_records_of_many_python_types_survive_the_exchange(env):
    env.set_parallelism(2)
    sink = CollectSink()
    records = [(i, "t") for i in range(50)] + [{"id": i, "tags": ["a", None]} for i in range(50)] + \
              [Reading(f"s{i}", i / 3) for i in range(50)] + [None] * 5 + [b"\x00" * 2_000_000, b"", "ü" * 10]
    env.from_collection(records).rebalance().map(lambda r: r).key_by(lambda r: repr(r)[:5]) \
        .map(lambda r: r).sink_to(sink)
    out = env.execute("types").collected(sink)
    assert sorted(map(repr, out)) == sorted(map(repr, records))
    assert any(isinstance(r, Reading) for r in out)
    assert b"\x00" * 2_000_000 in out


class MainModuleFree(MapFunction):
    def map(self, value):
        return dataclasses.replace(value, value=value.value * 2)


def test_execute_and_collect(env):
    env.set_parallelism(2)
    with env.from_collection([Reading("a", 1.0), Reading("b", 2.0)]).map(MainModuleFree()) \
            .execute_and_collect() as results:
        assert sorted(results, key=lambda r: r.sensor) == [Reading("a", 2.0), Reading("b", 4.0)]


def test_typed_edges_give_the_same_answer(env):
    env.set_parallelism(2)
    sink = CollectSink()
    env.from_sequence(1, 10_000).map(lambda x: str(x % 10), output_type=Types.STRING()) \
        .key_by(lambda s: s).map(lambda s: s + "!", output_type=Types.STRING()).sink_to(sink)
    out = env.execute("typed").collected(sink)
    assert collections.Counter(out) == collections.Counter(f"{x % 10}!" for x in range(1, 10_001))


class TagWithSubtask(MapFunction):
    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return self.subtask, value


@pytest.mark.parametrize("parallelism", [1, 2])
def test_shuffle_rescale_and_custom_partitioning_deliver_every_record_where_they_say(env, parallelism):
    from operators import Partitioner

    class ByParity(Partitioner):
        def partition(self, key, num_partitions):
            return key % 2 % num_partitions

    env.set_parallelism(parallelism)
    numbers = env.from_sequence(0, 9_999)
    shuffled, rescaled, custom = CollectSink("shuffled"), CollectSink("rescaled"), CollectSink("custom")
    numbers.shuffle().map(lambda x: x * 2).sink_to(shuffled)
    numbers.rescale().map(lambda x: x + 1).set_parallelism(2 * parallelism).sink_to(rescaled)
    numbers.partition_custom(ByParity(), lambda x: x).map(TagWithSubtask()).sink_to(custom)
    result = env.execute("partitionings")
    assert sorted(result.collected(shuffled)) == [x * 2 for x in range(10_000)]
    assert sorted(result.collected(rescaled)) == [x + 1 for x in range(10_000)]
    tagged = result.collected(custom)
    assert sorted(x for _, x in tagged) == list(range(10_000))
    assert all(subtask == x % 2 % parallelism for subtask, x in tagged)


def test_a_python_file_added_to_the_environment_is_importable_on_the_executors(env, tmp_path):
    helpers = tmp_path / "chandy_test_shipped_helpers.py"
    helpers.write_text("def triple(x):\n    return 3 * x\n")
    env.set_parallelism(2).add_python_file(str(helpers))

    def triple(x):
        import chandy_test_shipped_helpers  # on no executor's path unless shipped

        return chandy_test_shipped_helpers.triple(x)

    sink = CollectSink("tripled")
    env.from_sequence(0, 99).rebalance().map(triple).sink_to(sink)
    assert sorted(env.execute("shipped").collected(sink)) == [3 * x for x in range(100)]


class ReadsARegion(MapFunction):
    def open(self, runtime_context):
        self.region = runtime_context.get_job_parameter("region", "none")
        self.missing = runtime_context.get_job_parameter("missing", "default")

    def map(self, value):
        return self.region, self.missing, value


def test_global_job_parameters_reach_every_function(env):
    from runtime.configuration import Configuration

    env.set_parallelism(2).get_config().set_global_job_parameters(Configuration().set_string("region", "eu"))
    sink = CollectSink("regions")
    env.from_sequence(0, 9).map(ReadsARegion()).sink_to(sink)
    assert sorted(env.execute("parameters").collected(sink)) == [("eu", "default", x) for x in range(10)]


def test_the_test_sessions_workers_come_from_the_preloading_daemon(env):
    """tests/conftest.py starts Spark with runtime.executor.worker_daemon: its workers start with Chandy imported."""
    import os

    sink = CollectSink("preloaded")
    env.from_collection([1, 2]).map(lambda _: os.environ.get("CHANDY_WORKER_PRELOADED")).sink_to(sink)
    assert env.execute("preloaded").collected(sink) == ["1", "1"]
