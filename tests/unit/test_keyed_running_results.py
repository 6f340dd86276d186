"""Running results of keyed operators in STREAMING mode, without Spark: the word count's reduce and the count per
key's process function (tests/integration/jobs.py), and a streaming reduce, driven by test harnesses at parallelism
1 and 2 (each subtask fed the keys it owns), against the plain-Python answers the jobs on Spark are checked
against. (tests/integration/test_jobs.py runs the word count and the count per key on Spark at parallelism 4.)"""

import collections

import pytest

from runtime import Types
from runtime.testing import OperatorHarness
from tests.integration.jobs import TEXT, WORD_COUNT, CountPerKey, Tokenize, final_counts, reference_word_counts
from tests.unit.keyed_subtasks import KeyedSubtasks


def through(harness, records: list) -> list:
    """What the harness of an operator that is not keyed emits for ``records``, to the end of its input."""
    harness.open()
    harness.process_elements(records)
    harness.end_input()
    return harness.output()


def keyed(build, key_selector, parallelism: int, records: list) -> list:
    """What the subtasks of the keyed operator ``build`` declares emit for ``records``, each key's in its order."""
    subtasks = KeyedSubtasks(build, key_selector, parallelism)
    subtasks.open()
    subtasks.process_elements(records)
    subtasks.end_input()
    return subtasks.output()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_word_count(parallelism):
    pairs = through(OperatorHarness.for_flat_map(Tokenize(), output_type=WORD_COUNT), TEXT)
    out = keyed(lambda ds: ds.key_by(lambda pair: pair[0], key_type=Types.STRING())
                .reduce(lambda a, b: (a[0], a[1] + b[1])), lambda pair: pair[0], parallelism, pairs)
    assert final_counts(out) == reference_word_counts(TEXT)
    assert len(out) == sum(reference_word_counts(TEXT).values())


@pytest.mark.parametrize("parallelism", [1, 2])
def test_count_per_key(parallelism):
    n, keys = 50_000, 997
    numbers = through(OperatorHarness.for_map(lambda x: x % keys, output_type=Types.LONG()), list(range(n)))
    out = keyed(lambda ds: ds.key_by(lambda x: x).process(CountPerKey()), lambda x: x, parallelism, numbers)
    assert len(out) == n
    assert final_counts(out) == dict(collections.Counter(x % keys for x in range(n)))
    # every running count 1..final appears exactly once per key: no record lost or duplicated
    assert sorted(out) == sorted((k, i) for k, c in collections.Counter(x % keys for x in range(n)).items()
                                 for i in range(1, c + 1))


def test_streaming_mode_reaches_the_same_final_values_through_every_running_value():
    # tests/integration/test_batch.py's job in STREAMING mode, at its parallelism 2: BATCH mode emits only the
    # final values (on Spark there), STREAMING every running one.
    n, keys = 20_000, 37
    pairs = through(OperatorHarness.for_map(lambda n: (n % keys, 1)), list(range(n)))
    out = keyed(lambda ds: ds.key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])), lambda p: p[0], 2,
                pairs)
    final = sorted(collections.Counter(n % keys for n in range(n)).items())
    assert len(out) == n
    assert sorted(max(v for k2, v in out if k2 == k) for k in range(keys)) == sorted(c for _, c in final)
