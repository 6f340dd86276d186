"""Checkpoints after tasks finish (Flink's FLIP-147): when a bounded source runs out while another still runs,
checkpoints go on, each holding the finished subtasks' final state, and a restore from one of them is exact: the
finished source is not read again."""

import collections
import random

import pytest

from operators import CollectSink, SequenceSource
from runtime import RestartStrategies
from state_backends.storage import FINISHED_PREFIX, CheckpointStorage
from tests.integration.chaos import ChaosFileSink, ChaosMap, plan, remaining
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import PacedSource

SHORT, LONG, KEYS = 1_000, 24_000, 31


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_a_restore_after_a_source_finished_is_exact_and_does_not_read_it_again(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "fail")
    url = str(tmp_path / "checkpoints")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(url).set_max_retained_checkpoints(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    short = env.from_source(SequenceSource(0, SHORT - 1), "short").uid("short")  # done in its first poll
    long = env.from_source(PacedSource(SequenceSource(SHORT, SHORT + LONG - 1), per_checkpoint=LONG // 2 // 12,
                                       together=str(tmp_path / "paced")), "long").uid("long") \
        .map(ChaosMap(faults, "fail", how, random.Random().randrange(LONG // 4, LONG // 2))).uid("chaos")
    sink = CollectSink("counts")
    short.union(long).key_by(lambda n: n % KEYS).process(CountPerKey()).uid("count").sink_to(sink).uid("sink")
    result = env.execute(f"finished-{how}")
    assert remaining(faults) == [] and result.restarts == 1
    restored = result.restored_from[1]
    assert restored is not None, "checkpoints went on after the short source finished"
    checkpoint = CheckpointStorage("file://" + url, f"finished-{how}").read_checkpoint(restored)
    assert all(h.path.startswith(FINISHED_PREFIX) for h in checkpoint.operator("short").handles), \
        "the restored checkpoint holds the short source's final state"
    expected = collections.Counter(n % KEYS for n in range(SHORT + LONG))
    assert final_counts(result.collected(sink)) == dict(expected)
    counts = collections.Counter(k for k, _ in result.collected(sink))
    assert counts == expected, "no record of the finished source was counted twice"


@pytest.mark.parametrize("fault", [None, "raise-before-commit", "kill-before-commit"])
def test_a_bounded_jobs_tail_is_committed_by_its_final_checkpoint(env, tmp_path, fault):
    """No periodic checkpoint happens (the interval is an hour): everything the sink wrote is committed by the
    final checkpoint the coordinator completes from the subtasks' final states, not by the driver. A failure
    between that checkpoint and the commit restores it and commits again: still each record once."""
    faults = plan(str(tmp_path / "faults"), *([fault] if fault else []))
    url = str(tmp_path / "checkpoints")
    env.set_parallelism(2).enable_checkpointing(3_600_000)
    env.get_checkpoint_config().set_checkpoint_storage(url)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    sink = ChaosFileSink(str(tmp_path / "out"), faults, format="jsonl")
    env.from_source(SequenceSource(0, 4_999), "numbers").uid("numbers").map(lambda n: [n % KEYS, n]).uid("pair") \
        .sink_to(sink).uid("files")
    result = env.execute(f"final-{fault}")
    assert remaining(faults) == []
    assert sorted(sink.read_committed()) == sorted([n % KEYS, n] for n in range(5_000))
    assert result.sink_results["files"] == 0, "the driver had nothing left to commit"
    storage = CheckpointStorage("file://" + url, f"final-{fault}")
    final = storage.read_checkpoint(result.checkpoints[-1].checkpoint_id)
    assert final.operator("files").handles and all(
        h.path.startswith(FINISHED_PREFIX) for op in final.operators for h in op.handles), \
        "the final checkpoint is made of the subtasks' final states"
    assert result.restarts == (1 if fault else 0)
    if fault:
        assert result.restored_from[1] == result.checkpoints[0].checkpoint_id, "the final checkpoint was restored"
