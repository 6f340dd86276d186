"""The heap backend's bulk value states (state_backends.heap.bulk): which states it lays out flat, and the limit
past which it stops. What they hold, snapshots included, is the keyed-state contract's to check
(tests/conformance/test_state_backends.py, on every backend)."""

from __future__ import annotations

import pytest

from operators.context import SubtaskInfo
from operators.window.aligned import ALIGNED_WINDOW_STATE_PREFIX
from operators.window.assigners import TumblingEventTimeWindows
from operators.window.operator import Reduce, WindowOperator
from runtime.keys.key_groups import key_group_range
from runtime.protocol.records import TimestampedBatch
from state_backends import ValueStateDescriptor
from state_backends.heap import HeapKeyedStateBackend
from state_backends.heap import bulk

ALL = key_group_range(128, 1, 0)


def _add(value, total):
    return total + value


def test_the_aligned_windows_panes_are_laid_out_flat():
    backend = HeapKeyedStateBackend(128, ALL)
    op = WindowOperator("sum", lambda r: r[0], TumblingEventTimeWindows.of(10),
                        contents=Reduce(lambda a, b: (a[0], a[1] + b[1])))
    op.setup(SubtaskInfo("sum", 0, 1, 128, 0), backend)
    op.open()
    op.process_batch(TimestampedBatch.of([("a", 1), ("b", 2), ("a", 3)], [1, 6, 7]))
    assert set(backend._bulk) == {f"{ALIGNED_WINDOW_STATE_PREFIX}0/10"}
    assert sorted(op.process_watermark(9)) == [("a", 4), ("b", 2)]


def test_a_bulk_state_past_the_limit_goes_back_to_key_groups_and_no_further_state_is_laid_out_flat(monkeypatch):
    monkeypatch.setattr(bulk, "BULK_KEYS_LIMIT", 8)
    backend = HeapKeyedStateBackend(128, ALL)
    backend.declare_bulk_state(ValueStateDescriptor("small"))
    backend.aggregate_many("small", list(range(8)), [1] * 8, _add, int)
    assert "small" in backend._bulk
    backend.declare_bulk_state(ValueStateDescriptor("large"))
    snapshot = backend.snapshot()
    backend.aggregate_many("large", list(range(20)), [1] * 20, _add, int)
    backend.aggregate_many("large", list(range(20)), [2] * 20, _add, int)
    assert "large" not in backend._bulk, "outgrown: held in key groups again"
    backend.declare_bulk_state(ValueStateDescriptor("later"))
    assert "later" not in backend._bulk and "small" in backend._bulk
    assert {key: n for _, key, n in backend.entries("large")} == {key: 3 for key in range(20)}
    restored = HeapKeyedStateBackend(128, ALL)
    for group, payload in snapshot.serialized():
        restored.restore_key_group(group, payload)
    assert {key: n for _, key, n in restored.entries("small")} == {key: 1 for key in range(8)}
    assert list(restored.entries("large")) == []


@pytest.mark.parametrize("method", ["get_many", "put_many"])
def test_reading_or_writing_past_the_limit_goes_back_to_key_groups_too(monkeypatch, method):
    monkeypatch.setattr(bulk, "BULK_KEYS_LIMIT", 8)
    backend = HeapKeyedStateBackend(128, ALL)
    backend.declare_bulk_state(ValueStateDescriptor("panes"))
    backend.put_many("panes", list(range(6)), [[1]] * 6)
    backend.snapshot()  # the barrier moves them into key groups
    backend.put_many("panes", list(range(6, 10)), [[1]] * 4)
    assert "panes" in backend._bulk
    if method == "get_many":  # the six from key groups join the four: ten, past the limit
        values = backend.get_many("panes", list(range(10)))
        assert values == [[1]] * 10
    else:
        backend.put_many("panes", list(range(10)), [[2]] * 10)
    assert "panes" not in backend._bulk
    assert sorted(backend.get_many("panes", list(range(10)))) == ([[1]] * 10 if method == "get_many" else [[2]] * 10)
