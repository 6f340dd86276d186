"""The record whose processing raised, as a failure report names it: read from the traceback of the operator's
record loop, never from the user's own variables."""

from operators.builtins import FilterOperator, FlatMapOperator, MapOperator
from runtime.executor.failing_record import MAX_REPR, failing_record_repr
from runtime.protocol.records import TimestampedBatch


def users_function(value):
    r = "the user's own r"  # a local of the user's code named like the loop's: not the record
    if value == 3:
        raise ValueError(f"bad {value} ({r})")
    return [value]


def raised_by(operator, records):
    try:
        operator.process_batch(records)
    except ValueError as error:
        return failing_record_repr(error)
    raise AssertionError("nothing raised")


def test_the_record_is_found_in_maps_filters_and_flat_maps_plain_or_timestamped():
    for kind in (MapOperator, FilterOperator, FlatMapOperator):
        operator = kind("op", users_function, users_function)
        assert raised_by(operator, [1, 2, 3, 4]) == "3"
        assert raised_by(operator, TimestampedBatch.of([1, 3], [10, 30])) == "3"


def test_a_long_record_is_cut_and_an_error_outside_a_record_loop_has_none():
    operator = MapOperator("op", users_function, lambda value: users_function(3))
    assert raised_by(operator, ["x" * 1000]) == repr("x" * 1000)[:MAX_REPR - 3] + "..."
    try:
        users_function(3)
    except ValueError as error:
        assert failing_record_repr(error) is None
