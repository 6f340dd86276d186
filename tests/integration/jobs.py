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


def reference_word_counts(lines) -> dict:
    return dict(collections.Counter(w for line in lines for w in line.split()))


@dataclasses.dataclass(frozen=True)
class Reading:
    sensor: str
    value: float
