import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import UnsupportedKeyError
from runtime.keys.key_groups import (
    assign_to_key_group,
    default_max_parallelism,
    key_group_range,
    key_group_to_subtask,
    murmur_scramble,
    subtask_for_key,
)
from runtime.keys.stable_hash import stable_hash

parallelism_and_max = st.integers(1, 600).flatmap(lambda p: st.tuples(st.just(p), st.integers(p, 2048)))
scalar_keys = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(),
                        st.binary())
keys = st.recursive(scalar_keys, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=6)


@given(parallelism_and_max)
@settings(max_examples=300)
def test_ranges_cover_every_key_group_exactly_once(p_and_max):
    parallelism, max_parallelism = p_and_max
    owned = []
    for subtask in range(parallelism):
        r = key_group_range(max_parallelism, parallelism, subtask)
        assert len(r) >= 1
        owned.extend(r)
    assert owned == list(range(max_parallelism))


@given(parallelism_and_max, st.data())
@settings(max_examples=300)
def test_every_key_group_is_in_the_range_of_the_subtask_that_owns_it(p_and_max, data):
    parallelism, max_parallelism = p_and_max
    group = data.draw(st.integers(0, max_parallelism - 1))
    subtask = key_group_to_subtask(group, max_parallelism, parallelism)
    assert 0 <= subtask < parallelism
    assert group in key_group_range(max_parallelism, parallelism, subtask)
    others = [s for s in range(parallelism) if group in key_group_range(max_parallelism, parallelism, s)]
    assert others == [subtask]


@given(keys, parallelism_and_max)
@settings(max_examples=300)
def test_each_key_lands_in_exactly_one_subtask_range(key, p_and_max):
    parallelism, max_parallelism = p_and_max
    group = assign_to_key_group(key, max_parallelism)
    assert 0 <= group < max_parallelism
    owners = [s for s in range(parallelism) if group in key_group_range(max_parallelism, parallelism, s)]
    assert owners == [subtask_for_key(key, max_parallelism, parallelism)]


@given(st.integers(-(2 ** 70), 2 ** 70))
def test_equal_numbers_hash_equally(n):
    assert stable_hash(n) == stable_hash(float(n)) if float(n) == n else True
    assert stable_hash(n) == stable_hash(int(n))


def test_bool_and_int_keys_agree_like_dict_keys():
    assert stable_hash(True) == stable_hash(1) == stable_hash(1.0)
    assert stable_hash(0) == stable_hash(False) == stable_hash(-0.0)


def test_default_max_parallelism_follows_flink():
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256
    assert default_max_parallelism(1000) == 2048
    assert default_max_parallelism(30000) == 32768


def test_murmur_scramble_is_murmur3_of_one_block_made_non_negative():
    # Flink's MathUtils.murmurHash(int) is Murmur3-32 (seed 0) over the int's 4 little-endian bytes, then
    # abs() as a Java int. Published Murmur3 vectors: 00000000 -> 0x2362F9DE; 21436587 -> 0xF55B516B.
    assert murmur_scramble(0) == 0x2362F9DE
    assert murmur_scramble(0x87654321) == (1 << 32) - 0xF55B516B


def test_unsupported_key_type_names_the_fix():
    with pytest.raises(UnsupportedKeyError, match="key_by"):
        stable_hash([1, 2])


@dataclass(frozen=True)
class Point:
    x: int
    y: int


def test_frozen_dataclass_keys_hash_by_value():
    assert stable_hash(Point(1, 2)) == stable_hash(Point(1, 2))
    assert stable_hash(Point(1, 2)) != stable_hash(Point(2, 1))


SAMPLE_KEYS = ["", "a", "user-42", "ünïcödé", b"\x00\xff", 0, 1, -1, 2 ** 40, -(2 ** 63), 2 ** 100, 3.5, None,
               True, (1, "x"), ("nested", (2, b"y")), -0.0]

_CHILD = """
import json, sys
from runtime.keys.key_groups import assign_to_key_group
from runtime.keys.stable_hash import stable_hash
keys = {keys!r}
print(json.dumps([[stable_hash(k), assign_to_key_group(k, 128), assign_to_key_group(k, 32768)] for k in keys]))
"""


@pytest.mark.parametrize("seed", ["0", "12345", "random"])
def test_hashes_are_identical_across_processes_with_different_hash_seeds(seed):
    here = [[stable_hash(k), assign_to_key_group(k, 128), assign_to_key_group(k, 32768)] for k in SAMPLE_KEYS]
    environment = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", _CHILD.format(keys=SAMPLE_KEYS)], env=environment,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == here


def test_builtin_hash_really_differs_across_those_processes():
    """Guards the test above: with other seeds, built-in hash() of the same string does change."""
    values = {subprocess.run([sys.executable, "-c", "print(hash('user-42'))"], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONHASHSEED=seed), check=True).stdout for seed in ("0", "1")}
    assert len(values) == 2
