"""Jobs and plain-Python reference answers shared by the integration tests, the demo and benchmarks."""

from __future__ import annotations

import collections
import dataclasses
import random

from operators import CoMapFunction, FlatMapFunction, KeyedProcessFunction, ValueStateDescriptor
from runtime.common import Row, Types
from runtime.tools.demo import CountPerKey, final_counts  # noqa: F401  (re-exported for the tests)

TEXT = [
    "to be or not to be that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
    "or to take arms against a sea of troubles",
] * 25


def assert_counts_continue(pairs, expected) -> None:
    """The running counts ``pairs`` of a restored job end at ``expected`` per key, and each key's counts go on
    consecutively from the restored checkpoint's: every record after it counted once."""
    assert final_counts(pairs) == dict(expected)
    by_key = collections.defaultdict(list)
    for key, count in pairs:
        by_key[key].append(count)
    for key, counts in by_key.items():
        assert sorted(counts) == list(range(min(counts), expected[key] + 1)), key


class Tokenize(FlatMapFunction):
    """The word count's tokenizer: ``(word, 1)`` for each word of a line."""

    def flat_map(self, line):
        for word in line.split():
            yield word, 1


WORD_COUNT = Types.TUPLE([Types.STRING(), Types.INT()])


class Tag(CoMapFunction):
    """Each record of two connected streams tagged with the input it came by."""

    def map1(self, value):
        return "number", value

    def map2(self, value):
        return "word", value


CONNECTED_WORDS = ["to", "be", "or", "not"] * 50


def tagged_reference(numbers: int) -> list:
    """What :class:`Tag` makes of the numbers ``0..numbers-1`` connected with :data:`CONNECTED_WORDS`, sorted."""
    return sorted([("number", n) for n in range(numbers)] + [("word", w) for w in CONNECTED_WORDS])


def reference_word_counts(lines) -> dict:
    return dict(collections.Counter(w for line in lines for w in line.split()))


@dataclasses.dataclass(frozen=True)
class Reading:
    sensor: str
    value: float


RUNNING_COUNT = Types.ROW_NAMED(["k", "n"], [Types.LONG(), Types.LONG()])


class RunningCount(KeyedProcessFunction):
    """Every running count of a key, as ``Row(k, n)``: the keyed reference job's output, one row per record."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield Row(k=value, n=n)


def faulty_running_counts(env, tmp_path, faults: tuple, records: int, keys: int, per_checkpoint: int,
                          spare_restarts: int = 2):
    """The whole setup of an exactly-once test: ``faults`` planned in ``tmp_path/chaos``, checkpoints every 100 ms at
    parallelism 2, a restart for every fault and ``spare_restarts`` more, and :func:`running_counts_with_faults` over
    ``records`` numbers paced ``per_checkpoint`` at a time until every fault fired. Returns ``(counts, chaos_dir,
    rng)``."""
    from operators import SequenceSource
    from runtime import RestartStrategies
    from tests.integration import chaos, paced

    chaos_dir = chaos.plan(str(tmp_path / "chaos"), *faults)
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(len(faults) + spare_restarts, 0))
    rng = random.Random()
    numbers = paced.PacedSource(SequenceSource(0, records - 1), per_checkpoint=per_checkpoint,
                                end_when=paced.DirectoryEmpty(chaos_dir), together=str(tmp_path / "paced"))
    return running_counts_with_faults(env, numbers, chaos_dir, keys, rng), chaos_dir, rng


def running_counts_with_faults(env, numbers, chaos_dir: str, keys: int, rng):
    """The keyed reference job over the source ``numbers`` (keys ``n % keys``) with a map that raises once and a
    map that SIGKILLs its worker once, each after a random number of records (faults ``raise-in-map`` and
    ``kill-in-map`` planned in ``chaos_dir``): a stream of :data:`RUNNING_COUNT` rows."""
    from tests.integration import chaos

    return (env.from_source(numbers, "numbers").uid("numbers")
            .map(chaos.ChaosMap(chaos_dir, "raise-in-map", "raise", rng.randrange(500, 2500))).uid("chaos-raise")
            .map(lambda x: x % keys).uid("key")
            .key_by(lambda k: k).process(RunningCount(), output_type=RUNNING_COUNT).uid("count")
            .map(chaos.ChaosMap(chaos_dir, "kill-in-map", "kill", rng.randrange(500, 2500)), output_type=RUNNING_COUNT)
            .uid("chaos-kill"))


def reference_running_counts(records: int, keys: int) -> list[tuple[int, int]]:
    """Every ``(k, n)`` the keyed reference job writes for ``range(records)``, sorted."""
    per_key = collections.Counter(x % keys for x in range(records))
    return sorted((k, n) for k, c in per_key.items() for n in range(1, c + 1))
