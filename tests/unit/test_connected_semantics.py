"""Connected streams without Spark: a co-map driven by a two-input test harness hands each input's records to its
own method, against the reference the job on Spark is checked against. (tests/integration/test_connected.py runs
it on Spark at parallelism 2, beside the keyed join, the interval join and the window join.)"""

from runtime.testing import OperatorHarness
from tests.integration.jobs import CONNECTED_WORDS, Tag, tagged_reference


def test_each_input_reaches_its_own_method():
    harness = OperatorHarness.for_two_inputs(lambda numbers, words: numbers.connect(words).map(Tag()))
    harness.open()
    harness.process_elements(range(1_000))
    harness.process_elements2(CONNECTED_WORDS)
    harness.end_input()
    assert sorted(harness.output()) == tagged_reference(1_000)
