"""Jobs and plain-Python reference answers shared by the integration tests, the demo and benchmarks."""

from __future__ import annotations

import collections
import dataclasses

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


def reference_word_counts(lines) -> dict:
    return dict(collections.Counter(w for line in lines for w in line.split()))


@dataclasses.dataclass(frozen=True)
class Reading:
    sensor: str
    value: float
