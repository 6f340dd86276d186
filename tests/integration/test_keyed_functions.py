"""A KeyedStream.map whose function keeps keyed state gives the plain-Python answer on Spark."""

import collections

from operators import CollectSink, MapFunction
from state_backends.descriptors import ValueStateDescriptor


class CountingMap(MapFunction):
    """(word, how many times the word was seen so far), counted in keyed state."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def map(self, word):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return word, n


def test_keyed_map_counts_per_key_at_parallelism_2(env):
    env.set_parallelism(2)
    sink = CollectSink("counts")
    words = [f"w{(i * 7919) % 53}" for i in range(5_000)]
    env.from_collection(words).key_by(lambda w: w).map(CountingMap()).sink_to(sink)
    out = env.execute("keyed-map-count").collected(sink)
    # each key's records reach one subtask in their order, so its running counts are 1..n, each exactly once
    reference = [(word, i) for word, n in collections.Counter(words).items() for i in range(1, n + 1)]
    assert sorted(out) == sorted(reference)
    per_key: dict = collections.defaultdict(list)
    for word, n in out:
        per_key[word].append(n)
    assert all(counts == list(range(1, len(counts) + 1)) for counts in per_key.values())
