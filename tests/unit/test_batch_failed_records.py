"""BATCH mode runs a keyed operator's records at the end of its input, so it sets aside the records whose function
raises itself (``side_output_failed_records``), as the runtime does for each batch in STREAMING mode. No Spark:
the batch operator is driven directly, as a subtask drives it."""

from operators.batch import BatchKeyedOperator
from operators.builtins import KeyedProcessOperator, KeyedReduceOperator
from operators.context import SubtaskInfo
from runtime.datastream.functions import KeyedProcessFunction
from runtime.keys.key_groups import key_group_range
from runtime.protocol.events import MAX_WATERMARK
from runtime.side_outputs import FailedRecord, SideOutputRecord
from state_backends.heap import HeapKeyedStateBackend


def run_at_batch(inner, records):
    inner.failed_records_tag = "failed"
    operator = BatchKeyedOperator(inner)
    operator.setup(SubtaskInfo(inner.name, 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    operator.open()
    out = list(operator.process_batch1(records)) + list(operator.process_watermark(MAX_WATERMARK))
    out += list(operator.finish())
    main = [r for r in out if not isinstance(r, SideOutputRecord)]
    side = [r.value for r in out if isinstance(r, SideOutputRecord)]
    assert all(r.tag == "failed" for r in out if isinstance(r, SideOutputRecord))
    return main, side


def add_unless_negative(a, b):
    if b[1] < 0:
        raise ValueError(f"negative amount {b[1]}")
    return a[0], a[1] + b[1]


def test_a_reduce_sets_aside_the_records_that_raise_and_emits_the_final_value_of_the_others():
    records = [("a", 1), ("b", 2), ("a", -5), ("a", 3), ("b", -1), ("c", 4)]
    main, side = run_at_batch(KeyedReduceOperator("sum", None, add_unless_negative, key_selector=lambda r: r[0]),
                              records)
    assert sorted(main) == [("a", 4), ("b", 2), ("c", 4)]
    assert sorted(f.record for f in side) == [("a", -5), ("b", -1)]
    assert all(isinstance(f, FailedRecord) and f.operator == "sum" and f.error_type == "ValueError"
               and "add_unless_negative" in f.traceback for f in side)


class Running(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if value[1] == 0:
            raise ZeroDivisionError("a zero")
        yield value[0], 100 // value[1]


def test_a_process_function_sets_aside_the_records_that_raise_and_the_others_go_on():
    records = [("a", 1), ("b", 0), ("a", 4), ("b", 5)]
    main, side = run_at_batch(KeyedProcessOperator("divide", Running(), key_selector=lambda r: r[0]), records)
    assert sorted(main) == [("a", 25), ("a", 100), ("b", 20)]
    assert [f.record for f in side] == [("b", 0)] and side[0].error_type == "ZeroDivisionError"


def test_without_the_side_output_a_raising_record_fails_the_operator_as_before():
    import pytest

    inner = KeyedReduceOperator("sum", None, add_unless_negative, key_selector=lambda r: r[0])
    operator = BatchKeyedOperator(inner)
    operator.setup(SubtaskInfo("sum", 0, 1, 128, 0), HeapKeyedStateBackend(128, key_group_range(128, 1, 0)))
    operator.open()
    with pytest.raises(ValueError, match="negative amount -1"):  # folded as they come, or at the end
        operator.process_batch1([("a", 1), ("a", -1)])
        operator.process_watermark(MAX_WATERMARK)
