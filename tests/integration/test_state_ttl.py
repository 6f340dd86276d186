"""State time-to-live in a running job: a keyed value with a TTL is gone when a processing-time timer set past
its expiry reads it, a value without one stays, also after an exception and a SIGKILL restored the state (with
its last-access times) from a checkpoint. (Without a failure, the same function is tested without Spark, by test
harnesses: tests/unit/test_state_ttl_semantics.py.)"""

import random

import pytest

from operators import CollectSink, SequenceSource
from runtime import RestartStrategies
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.paced import DirectoryEmpty, PacedSource
from tests.integration.ttl_jobs import N, ReadAfterExpiry


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_a_value_with_a_ttl_expires_and_one_without_stays_also_across_a_restore(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "fail")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    # 6 checkpoints let all records through; the sources then hold their end for 8 more (at least 700 ms: the
    # interval is 100 ms), so every timer, due 400 ms after its record, fires before the job ends
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 6,
                                          end_when=DirectoryEmpty(faults), end_after_checkpoints=6 + 8,
                                          together=str(tmp_path / "paced")), "numbers").uid("numbers")
    numbers = numbers.map(ChaosMap(faults, "fail", how, random.Random().randrange(200, 1_200))).uid("chaos")
    sink = CollectSink("read")
    numbers.key_by(lambda n: n).process(ReadAfterExpiry()).uid("ttl").sink_to(sink).uid("sink")
    result = env.execute(f"ttl-{how}")
    assert remaining(faults) == []
    assert result.restarts == 1 and result.restored_from[1] is not None
    assert sorted(result.collected(sink)) == [(n, None, n) for n in range(N)]
