"""State time-to-live in a keyed function, without Spark: the TTL job's function (tests/integration/ttl_jobs.py)
driven by test harnesses at parallelism 2, its processing time (which TTL and timers read) moved as the job's
paced source lets records through. (tests/integration/test_state_ttl.py runs it on Spark through a failure.)"""

import pytest

from operators.context import StreamingRuntimeContext, SubtaskInfo
from operators.operator import StreamOperator
from runtime import Time
from runtime.datastream.state import StateTtlConfig
from runtime.errors import StateUsageError
from state_backends import ListStateDescriptor
from tests.integration.ttl_jobs import READ_AFTER_MS, TTL_MS, N, ReadAfterExpiry
from tests.unit.keyed_subtasks import KeyedSubtasks

STEPS = 6  # the job's source lets N // 6 records through per checkpoint, 100 ms apart
STEP_MS = 100


def read_after(read_after_ms: int) -> list:
    """What the timers read ``read_after_ms`` after each record's write, the records written a sixth at a time,
    100 ms of processing time apart; processing time reaches each write and each timer in turn."""
    subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda n: n).process(ReadAfterExpiry(read_after_ms)),
                             lambda n: n, parallelism=2)
    subtasks.open()
    writes = {1_000 + step * STEP_MS: list(range(step * N // STEPS, (step + 1) * N // STEPS)) for step in range(STEPS)}
    for now in sorted(set(writes) | {written + read_after_ms for written in writes}):
        subtasks.set_processing_time(now)  # the timers due by now fire
        subtasks.process_elements(writes.get(now, []))
    return sorted(subtasks.output())


def test_a_value_with_a_ttl_expires_and_one_without_stays():
    assert READ_AFTER_MS > TTL_MS
    assert read_after(READ_AFTER_MS) == [(n, None, n) for n in range(N)]


def test_a_value_with_a_ttl_is_there_until_it_expires():
    assert read_after(TTL_MS - 1) == [(n, n, n) for n in range(N)]


def test_a_ttl_on_operator_state_is_refused_naming_the_fix():
    offsets = ListStateDescriptor("offsets")
    offsets.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    context = StreamingRuntimeContext(SubtaskInfo("op", 0, 1, 128, 0), None, StreamOperator("op"))
    with pytest.raises(StateUsageError, match="keyed state only"):
        context.get_operator_list_state(offsets)
