"""The keyed reference job into a Delta Lake table and an Iceberg table, exactly once through real failures: a map
raises once, a worker SIGKILLs itself mid-stream, the test SIGKILLs a worker from outside at a random moment after
a completed checkpoint, each sink's committer is SIGKILLed once between the files' upload and
the table's commit, and once right after a commit (before a checkpoint records it, so the restored committer holds
files the table has). Each table must equal the running counts computed in plain Python, each row once, and its
history must show one commit per checkpoint of the sink, in checkpoint order. One job writes both tables: one
Spark run covers both sinks."""

import contextlib
import os
import signal

import pytest

from runtime.datastream.connectors.delta import DeltaSink
from runtime.datastream.connectors.iceberg import IcebergSink
from tests.integration import chaos
from tests.integration.jobs import reference_running_counts, faulty_running_counts
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.delta, pytest.mark.iceberg]

N, KEYS = 12_000, 37


def _in_order_once(checkpoints: list[int]) -> bool:
    return checkpoints == sorted(set(checkpoints))


def test_the_tables_equal_the_reference_after_an_exception_and_kills_around_the_commits(env, tmp_path):
    from deltalake import DeltaTable

    delta_path = str(tmp_path / "running_counts")
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}
    faults = ("raise-in-map", "kill-in-map", "kill-before-commit", "kill-after-commit", "iceberg-kill-before-commit",
              "iceberg-kill-after-commit")
    counts, chaos_dir, rng = faulty_running_counts(env, tmp_path, faults, N, KEYS, per_checkpoint=700,
                                                   spare_restarts=3)
    counts.sink_to(chaos.dying_before_commit(DeltaSink(delta_path), chaos_dir)).uid("delta")
    counts.sink_to(chaos.dying_before_commit(IcebergSink(catalog, "test.running_counts"), chaos_dir, "iceberg-")) \
        .uid("iceberg")
    client = env.execute_async("tables-out")
    master = client._run
    after = rng.randint(1, 3)
    wait_for(lambda: len(master.coordinator.completed_checkpoints()) >= after or master.ended,
             what=f"{after} completed checkpoints")
    with contextlib.suppress(ProcessLookupError):  # a worker that a planned fault killed a moment ago
        os.kill(rng.choice([r.pid for r in master.control.registrations.values()]), signal.SIGKILL)
    result = client.get_job_execution_result()

    # Every planned fault fired; faults that fire in the same attempt (the two sinks' committers at one commit, the
    # test's kill and a planned one) share its restart, so the count of restarts is no more than that.
    assert chaos.remaining(chaos_dir) == [] and result.restarts >= 1, (chaos.remaining(chaos_dir), result.restarts)
    expected = reference_running_counts(N, KEYS)

    delta = DeltaTable(delta_path)
    assert sorted((r["k"], r["n"]) for r in delta.to_pyarrow_table().to_pylist()) == expected, "Delta: each row once"
    writes = [h for h in reversed(delta.history()) if h.get("operation") == "WRITE"]
    checkpoints = [int(h["chandy.checkpoint-id"]) for h in writes]
    assert _in_order_once(checkpoints), f"Delta: one commit per checkpoint, in order: {checkpoints}"
    (app,) = {h["chandy.app-id"] for h in writes}
    assert app.startswith("chandy:tables-out:delta-committer:"), "one app id through every restore"
    assert delta.transaction_version(app) == checkpoints[-1]

    iceberg = IcebergSink(catalog, "test.running_counts").table()
    rows = iceberg.scan().to_arrow()
    assert sorted(zip(rows["k"].to_pylist(), rows["n"].to_pylist())) == expected, "Iceberg: each row once"
    checkpoints = [int(s.summary["chandy.checkpoint-id"]) for s in iceberg.snapshots()]
    assert len({s.summary["chandy.app-id"] for s in iceberg.snapshots()}) == 1
    assert _in_order_once(checkpoints), f"Iceberg: one snapshot per checkpoint, in order: {checkpoints}"
