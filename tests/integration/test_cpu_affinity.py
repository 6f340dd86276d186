"""On the executors: with spark.chandy.cpuAffinity a slot's Python worker runs on one CPU of its own while the slot
runs, and on all of the worker's CPUs after it. Read by the job's own functions on the workers; nothing is timed."""

import os

import pytest

from operators import CollectSink
from runtime.executor.cpu_affinity import allowed_cpus

KEY = "spark.chandy.cpuAffinity"
CPUS = frozenset(allowed_cpus())


def _cpus_by_worker(spark, env, policy: str | None, name: str) -> dict[int, set]:
    """The CPUs each worker process of a parallelism-2 job ran its records on."""
    if policy is None:
        spark.conf.unset(KEY)
    else:
        spark.conf.set(KEY, policy)
    try:
        env.set_parallelism(2)
        sink = CollectSink()
        env.from_sequence(0, 999).map(lambda x: (x, os.getpid(), frozenset(os.sched_getaffinity(0)))).sink_to(sink)
        records = env.execute(name).collected(sink)
    finally:
        spark.conf.unset(KEY)
    assert sorted(r[0] for r in records) == list(range(1000))
    seen: dict[int, set] = {}
    for _, pid, cpus in records:
        seen.setdefault(pid, set()).add(cpus)
    return seen


@pytest.mark.skipif(len(CPUS) < 2, reason="pinning shows only where the workers may use two CPUs")
def test_each_slot_runs_on_a_cpu_of_its_own_while_pinned_and_on_every_cpu_after(spark, env):
    pinned = _cpus_by_worker(spark, env, "on", "cpu-affinity-on")
    assert len(pinned) == 2  # two slots, a worker each
    cpus = [next(iter(sets)) for sets in pinned.values()]
    assert all(len(sets) == 1 for sets in pinned.values()) and all(len(c) == 1 for c in cpus)
    assert cpus[0] != cpus[1]
    after = _cpus_by_worker(spark, env, "off", "cpu-affinity-off")
    assert all(sets == {CPUS} for sets in after.values())  # a worker Spark reused is back on every CPU


@pytest.mark.skipif(len(CPUS) != 2, reason="auto pins where the slots on the executor are as many as its CPUs")
def test_auto_pins_two_slots_on_two_cpus(spark, env):
    pinned = _cpus_by_worker(spark, env, None, "cpu-affinity-auto")
    assert sorted(next(iter(sets)) for sets in pinned.values()) == [frozenset({c}) for c in sorted(CPUS)]
