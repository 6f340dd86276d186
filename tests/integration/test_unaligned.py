"""Unaligned checkpoints end to end: a fast and a 100x slower input feed a slow keyed operator, so the channels
into it are full all the time.

An aligned checkpoint covers every record its sources emitted before their barriers: the operator processes all
of them first, and stores nothing in flight. An unaligned one is taken at the first barrier, which overtakes the
queued records: they are stored as channel state (``persisted_bytes``) and replayed after a restore. The tests
check that difference (without timing anything: the benchmark measures the durations), and that the results are
exact after an exception, after a SIGKILL, and after a restore at the same and at another parallelism.
"""

import collections
import time

import pytest

from operators import CollectSink, SequenceSource
from runtime import RestartStrategies, StreamExecutionEnvironment
from runtime.configuration import Configuration
from runtime.datastream.functions import MapFunction
from state_backends.storage import CheckpointStorage
from tests.integration.chaos import ChaosMap, plan, remaining
from tests.integration.jobs import CountPerKey, assert_counts_continue, final_counts
from tests.integration.paced import FileExists, PacedSource
from tests.integration.waiting import wait_for

FAST, SLOW, KEYS = 6_000, 60, 17
SLOW_BASE = 1_000_000  # the slow input's records, told apart from the fast one's


class SlowCountPerKey(CountPerKey):
    """Counts per key, at about 2,000 records per second: the bottleneck, with full input queues."""

    def process_element(self, value, ctx):
        time.sleep(0.0005)
        yield from super().process_element(value, ctx)


class Slowly(MapFunction):
    """The slow input: 100 times slower than the bottleneck behind it."""

    def map(self, value):
        time.sleep(0.05)
        return value


def _expected():
    return collections.Counter([n % KEYS for n in range(FAST)] + [n % KEYS for n in range(SLOW_BASE,
                                                                                          SLOW_BASE + SLOW)])


def _job(env, tmp_path, sink, unaligned=True, fault=None, parallelism=2, faults=None, end_when=None,
         aligned_timeout_ms=0):
    env.set_parallelism(parallelism).enable_checkpointing(300)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(str(tmp_path / "ck"))
    config.set_max_retained_checkpoints(1000)
    if unaligned:
        config.enable_unaligned_checkpoints().set_aligned_checkpoint_timeout(aligned_timeout_ms)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    fast = env.from_source(PacedSource(SequenceSource(0, FAST - 1), end_after_checkpoints=2, end_when=end_when,
                                       together=str(tmp_path / "paced-fast")), "fast").uid("fast")
    slow = env.from_source(SequenceSource(SLOW_BASE, SLOW_BASE + SLOW - 1), "slow").uid("slow") \
        .map(Slowly()).uid("slowly")
    keyed = fast.union(slow).key_by(lambda n: n % KEYS).process(SlowCountPerKey()).uid("count")
    if fault is not None:
        # Two checkpoints after the first records: the one restored was taken while the fast input still queued
        # before the slow operator (the first checkpoint may come before any record does, with nothing in flight).
        keyed = keyed.map(ChaosMap(faults, "boom", fault, FAST // 20, fresh_checkpoints=2)).uid("chaos")
    keyed.sink_to(sink).uid("sink")


def _counts(result, sink):
    return collections.Counter(k for k, _ in result.collected(sink))


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "aligned-timeout", "unaligned-no-debloating"])
def test_an_unaligned_checkpoint_stores_the_records_in_flight_and_an_aligned_one_waits_for_them(env, tmp_path, mode):
    sink = CollectSink("counts")
    if mode == "unaligned-no-debloating":  # full batches: the subtask snapshots between two slices of one
        env.configure(Configuration().set_string("taskmanager.network.memory.buffer-debloat.enabled", "false"))
    # with an aligned timeout of 50 ms, checkpoints start aligned and switch: behind the backlog, every barrier
    # reaches the slow operator later than that
    _job(env, tmp_path, sink, unaligned=mode != "aligned", aligned_timeout_ms=50 if mode == "aligned-timeout" else 0)
    result = env.execute(f"unaligned-{mode}")
    assert _counts(result, sink) == _expected() and final_counts(result.collected(sink)) == dict(_expected())
    stored = [stats for stats in result.checkpoints if stats.persisted_bytes]
    if mode == "aligned":
        assert not stored and not any(stats.unaligned for stats in result.checkpoints)
    else:
        assert stored, "no checkpoint stored records in flight, though the operator's input was backlogged"
        assert all(stats.unaligned for stats in stored)
    if mode.startswith("unaligned"):  # from the start: every checkpoint but the final one (from final states alone)
        assert all(stats.unaligned for stats in result.checkpoints[:-1]), result.checkpoints


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_restore_from_an_unaligned_checkpoint_replays_the_records_in_flight_exactly_once(env, tmp_path, how):
    faults = plan(str(tmp_path / "faults"), "boom")
    sink = CollectSink("counts")
    _job(env, tmp_path, sink, fault=how, faults=faults)
    result = env.execute(f"unaligned-{how}")
    assert remaining(faults) == [] and result.restarts == 1
    restored = result.restored_from[1]
    assert [s.persisted_bytes for s in result.checkpoints if s.checkpoint_id == restored][0] > 0, \
        "the checkpoint restored held records in flight"
    assert _counts(result, sink) == _expected() and final_counts(result.collected(sink)) == dict(_expected())


def _with_channel_state(storage):
    """The id of a completed checkpoint of ``storage`` that holds records in flight, or None."""
    for checkpoint_id in storage.checkpoint_ids():
        try:
            stats = storage.validated_checkpoint(checkpoint_id).stats
        except Exception:  # being written, or deleted meanwhile
            continue
        if stats is not None and stats.persisted_bytes:
            return checkpoint_id
    return None


@pytest.mark.parametrize("parallelism", [2, 3])
def test_an_unaligned_checkpoint_restores_exactly_at_the_same_and_at_another_parallelism(spark, tmp_path,
                                                                                       parallelism):
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    _job(first, tmp_path, CollectSink("counts"), end_when=FileExists(str(tmp_path / "end")))
    client = first.execute_async("rescaled")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "rescaled")
    try:
        wait_for(lambda: _with_channel_state(storage) is not None, what="a checkpoint holding records in flight")
        if parallelism == 2:  # a savepoint of the same job is aligned: no records in flight in it
            savepoint = client.trigger_savepoint(str(tmp_path / "savepoints"))
            taken = storage.savepoint_storage(savepoint).validated()
            assert taken.savepoint and not taken.stats.persisted_bytes
            assert not any(h.has_channel_state for op in taken.operators for h in op.handles)
    finally:
        client.cancel()
    checkpoint_id = _with_channel_state(storage)
    restored = storage.validated_checkpoint(checkpoint_id)
    assert any(h.channel_key_groups for h in restored.operator("count").handles), "keyed channel state"

    second = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    open(tmp_path / "end", "w").close()
    _job(second, tmp_path / "restored", sink, parallelism=parallelism)
    result = second.execute("rescaled", restore_from=storage.checkpoint_dir(checkpoint_id))
    assert result.restored_from[0] == checkpoint_id
    assert_counts_continue(result.collected(sink), _expected())
