"""Exactly-once under real failures: an exception thrown in an operator, and a worker killed with SIGKILL.

The job emits a running count per key; with exactly-once state and a sink whose records are part of the
checkpoint, the output must hold every (key, i) for i = 1..count(key) exactly once: nothing lost, nothing
repeated, although the first attempt died after at least one completed checkpoint.
"""

import collections
import os
import random
import signal

import pytest

from operators import CollectSink, MapFunction, SequenceSource
from runtime import CheckpointingMode, JobFailedError, RestartStrategies
from runtime.configuration import Configuration
from tests.integration.jobs import CountPerKey
from tests.integration.paced import PacedSource

N = 120_000
KEYS = 113


class FailOnceAfterCheckpoint(MapFunction):
    """In the first attempt only: fail after ``share`` of this subtask's records and >= 1 completed checkpoint."""

    def __init__(self, share: float, how: str, expected_per_subtask: int):
        self.threshold = int(share * expected_per_subtask)
        self.how = how

    def open(self, runtime_context):
        self.first_attempt = runtime_context.get_attempt_number() == 0
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.completed = 0
        self.seen = 0

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed += 1

    def map(self, value):
        self.seen += 1
        if self.first_attempt and self.subtask == 0 and self.completed >= 1 and self.seen >= self.threshold:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure after {self.seen} records")
        return value


def expected_running_counts(n, keys):
    per_key = collections.Counter(x % keys for x in range(n))
    return sorted((k, i) for k, c in per_key.items() for i in range(1, c + 1))


def build(env, tmp_path, parallelism, how, seed, mode=CheckpointingMode.EXACTLY_ONCE, tail=None, storage=None,
          filesystem=None, n=N):
    """``storage``, ``filesystem``: where checkpoints go (by default a local directory in ``tmp_path``); ``n``: how
    many numbers the source counts."""
    share = random.Random(seed).uniform(0.2, 0.8)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(100, mode)
    env.get_checkpoint_config().set_checkpoint_storage(storage or str(tmp_path / "checkpoints"), filesystem=filesystem)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    sink = CollectSink("counts")
    # Each completed checkpoint lets a tenth of a source subtask's input through: the injected failure comes
    # after at least one completed checkpoint however fast or slow the machine is.
    numbers = PacedSource(SequenceSource(0, n - 1), per_checkpoint=n // parallelism // 10,
                          together=str(tmp_path / "paced"))
    stream = (env.from_source(numbers, "numbers").uid("numbers")
              .map(lambda x: x % KEYS).uid("modulo")
              .key_by(lambda k: k).process(CountPerKey()).uid("count")
              .map(FailOnceAfterCheckpoint(share, how, n // parallelism)).uid("fail-once"))
    if tail is not None:
        stream = tail(stream)
    stream.sink_to(sink).uid("sink")
    return sink


@pytest.mark.parametrize("parallelism", [2, 4])
@pytest.mark.parametrize("how", ["exception", "kill"])
def test_exactly_once_after_a_failure(env, tmp_path, parallelism, how):
    seed = random.randrange(1 << 30)
    sink = build(env, tmp_path, parallelism, how, seed)
    result = env.execute(f"exactly-once-{how}-p{parallelism}")
    assert result.restarts == 1, f"seed {seed}: the injected failure must have happened once"
    assert result.restored_from[0] is None and result.restored_from[1] is not None, f"seed {seed}"
    assert sorted(result.collected(sink)) == expected_running_counts(N, KEYS), f"seed {seed}"


@pytest.mark.parametrize("how", ["exception", "kill"])
def test_exactly_once_after_a_failure_with_tls_on(env, tmp_path, how):
    """The same with every internal connection in TLS (Flink's security.ssl.internal.enabled)."""
    env.configure(Configuration().set_boolean("security.ssl.internal.enabled", True))
    seed = random.randrange(1 << 30)
    sink = build(env, tmp_path, 2, how, seed)
    result = env.execute(f"exactly-once-tls-{how}")
    assert result.restarts == 1, f"seed {seed}: the injected failure must have happened once"
    assert sorted(result.collected(sink)) == expected_running_counts(N, KEYS), f"seed {seed}"


def test_at_least_once_mode_completes_with_counts_at_least_the_reference(env, tmp_path):
    seed = random.randrange(1 << 30)
    sink = build(env, tmp_path, 2, "exception", seed, CheckpointingMode.AT_LEAST_ONCE)
    result = env.execute("at-least-once")
    assert result.restarts == 1
    got = collections.Counter(result.collected(sink))
    expected = collections.Counter(expected_running_counts(N, KEYS))
    assert all(got[pair] >= 1 for pair in expected), f"seed {seed}: a record was lost"
    finals = {}
    for key, n in result.collected(sink):
        finals[key] = max(finals.get(key, 0), n)
    assert all(finals[k] >= c for k, c in collections.Counter(x % KEYS for x in range(N)).items())


def test_without_restarts_left_the_failure_reaches_the_user(env, tmp_path):
    build(env, tmp_path, 2, "exception", 1)
    env.set_restart_strategy(RestartStrategies.no_restart())
    with pytest.raises(JobFailedError, match="injected failure"):
        env.execute("no-restart")


class CountInOperatorState(MapFunction):
    """Counts its records in non-keyed operator list state and tags each record with the running count."""

    def open(self, runtime_context):
        from operators import ListStateDescriptor

        self.counter = runtime_context.get_operator_list_state(ListStateDescriptor("seen"))
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        seen = sum(self.counter.get()) + 1
        self.counter.update([seen])
        return self.subtask, seen


def test_operator_list_state_is_exactly_once_too(env, tmp_path):
    sink = build(env, tmp_path, 2, "exception", random.randrange(1 << 30),
                 tail=lambda stream: stream.map(CountInOperatorState()).uid("tagger"))
    result = env.execute("operator-state")
    assert result.restarts == 1
    finals = {}
    for subtask, seen in result.collected(sink):
        finals[subtask] = max(finals.get(subtask, 0), seen)
    assert sum(finals.values()) == N
    assert sorted(result.collected(sink)) == sorted((s, i) for s, c in finals.items() for i in range(1, c + 1))
