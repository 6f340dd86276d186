"""A hung slot (its Python process stopped with SIGSTOP: it neither works nor closes its sockets) is found by its
missing heartbeats within the heartbeat timeout; the attempt fails and the job recovers with exact results."""

import collections
import os
import random
import signal

from operators import CollectSink, SequenceSource
from runtime import RestartStrategies
from runtime.configuration import Configuration
from tests.integration.chaos import ChaosMap, plan, remaining, stopped_pids
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import PacedSource

N, KEYS = 20_000, 23


def test_a_stopped_worker_is_detected_by_its_heartbeats_and_the_job_recovers_exactly(env, tmp_path):
    faults = plan(str(tmp_path / "faults"), "hang")
    env.configure(Configuration().set_string("heartbeat.timeout", "3 s"))
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    sink = CollectSink("counts")
    numbers = PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 10, together=str(tmp_path / "paced"))
    env.from_source(numbers, "numbers").uid("numbers") \
        .map(ChaosMap(faults, "hang", "stop", random.Random().randrange(N // 8, N // 4))).uid("hang") \
        .map(lambda n: n % KEYS).uid("modulo").key_by(lambda k: k).process(CountPerKey()).uid("count") \
        .sink_to(sink).uid("sink")
    try:
        result = env.execute("hung")
    finally:
        for pid in stopped_pids(faults):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # Spark killed it when it cancelled the attempt
    assert remaining(faults) == [] and stopped_pids(faults), "the fault fired: a process was stopped"
    assert result.restarts == 1
    expected = collections.Counter(n % KEYS for n in range(N))
    assert collections.Counter(k for k, _ in result.collected(sink)) == expected
    assert final_counts(result.collected(sink)) == dict(expected)
