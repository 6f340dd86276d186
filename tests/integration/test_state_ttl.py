"""State time-to-live in a running job: a keyed value with a TTL is gone when a processing-time timer set past
its expiry reads it, a value without one stays, also after an exception and a SIGKILL restored the state (with
its last-access times) from a checkpoint."""

import random

import pytest

from operators import CollectSink, KeyedProcessFunction, SequenceSource, ValueStateDescriptor
from runtime import RestartStrategies, Time
from runtime.datastream.state import StateTtlConfig
from runtime.errors import StateUsageError
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import DirectoryEmpty, PacedSource

TTL_MS, READ_AFTER_MS, N = 200, 400, 3_000


class ReadAfterExpiry(KeyedProcessFunction):
    def open(self, runtime_context):
        expiring = ValueStateDescriptor("expiring")
        expiring.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(TTL_MS)).build())
        self.expiring = runtime_context.get_state(expiring)
        self.plain = runtime_context.get_state(ValueStateDescriptor("plain"))

    def process_element(self, n, ctx):
        self.expiring.update(n)
        self.plain.update(n)
        # the timer falls due READ_AFTER_MS after the write, when the TTL has certainly run out
        ctx.timer_service().register_processing_time_timer(
            ctx.timer_service().current_processing_time() + READ_AFTER_MS)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.expiring.value(), self.plain.value()


@pytest.mark.parametrize("how", [None, "exception", "kill"])
def test_a_value_with_a_ttl_expires_and_one_without_stays_also_across_a_restore(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), *(["fail"] if how else []))
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    # 6 checkpoints let all records through; the sources then hold their end for 8 more (at least 700 ms: the
    # interval is 100 ms), so every timer, due 400 ms after its record, fires before the job ends
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 6,
                                          end_when=DirectoryEmpty(faults), end_after_checkpoints=6 + 8,
                                          together=str(tmp_path / "paced")), "numbers").uid("numbers")
    if how:
        numbers = numbers.map(ChaosMap(faults, "fail", how, random.Random().randrange(200, 1_200))).uid("chaos")
    sink = CollectSink("read")
    numbers.key_by(lambda n: n).process(ReadAfterExpiry()).uid("ttl").sink_to(sink).uid("sink")
    result = env.execute(f"ttl-{how}")
    assert remaining(faults) == []
    if how:
        assert result.restarts == 1 and result.restored_from[1] is not None
    assert sorted(result.collected(sink)) == [(n, None, n) for n in range(N)]


def test_a_ttl_on_operator_state_is_refused_naming_the_fix():
    from operators.context import StreamingRuntimeContext, SubtaskInfo
    from operators.operator import StreamOperator
    from state_backends import ListStateDescriptor

    offsets = ListStateDescriptor("offsets")
    offsets.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    context = StreamingRuntimeContext(SubtaskInfo("op", 0, 1, 128, 0), None, StreamOperator("op"))
    with pytest.raises(StateUsageError, match="keyed state only"):
        context.get_operator_list_state(offsets)
