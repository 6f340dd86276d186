"""A Delta table read as a stream on Spark, exactly once: a writer commits versions while the job runs, a map raises
once and a worker is SIGKILLed from outside; the committed output holds every row of every version once. Without
a change data feed the versions are appends (read from their added files); with one, every third version deletes
or updates rows too, and every change arrives once, as the plain-Python reference of the writes says."""

import collections
import os
import random
import signal
import threading

import pytest

pytest.importorskip("deltalake")

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from operators import FileSink  # noqa: E402
from operators.delta.source import DeltaSource  # noqa: E402
from runtime import RestartStrategies  # noqa: E402
from tests.integration import chaos  # noqa: E402
from tests.integration.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.delta

ROWS_PER_VERSION = 100
SNAPSHOT_ROWS = 1500


def table_of(ids):
    return pa.table({"id": ids, "part": [i % 3 for i in ids]})


class VersionWriter(threading.Thread):
    """Commits versions: appends of ``ROWS_PER_VERSION`` rows with ids counting on and, with ``changes``, every third
    version a delete or an update of earlier rows instead. The first ``first`` versions at once, the rest once
    ``go_on`` is set. ``expected`` counts the change each version makes, as the change data feed gives it."""

    def __init__(self, path, first, rest, changes):
        super().__init__(daemon=True, name="delta-writer")
        self.path, self.first, self.rest, self.changes = path, first, rest, changes
        self.next_id = SNAPSHOT_ROWS
        self.live = list(range(SNAPSHOT_ROWS))  # ids in the table now
        self.expected = collections.Counter(("snapshot", i) for i in self.live)
        self.first_written, self.go_on = threading.Event(), threading.Event()
        self.versions = 0
        self.error = None

    def _commit(self, count):
        for _ in range(count):
            self.versions += 1
            if self.changes and self.versions % 3 == 0:
                victim = self.live.pop(self.versions * 7 % len(self.live))
                if self.versions % 2:
                    DeltaTable(self.path).delete(f"id = {victim}")
                    self.expected[("delete", victim)] += 1
                else:
                    DeltaTable(self.path).update({"id": f"id + {10 ** 7}"}, predicate=f"id = {victim}")
                    self.live.append(victim + 10 ** 7)
                    self.expected.update([("update_preimage", victim), ("update_postimage", victim + 10 ** 7)])
                continue
            ids = list(range(self.next_id, self.next_id + ROWS_PER_VERSION))
            write_deltalake(self.path, table_of(ids), mode="append")
            self.next_id += ROWS_PER_VERSION
            self.live.extend(ids)
            self.expected.update(("insert" if self.changes else "snapshot", i) for i in ids)

    def run(self):
        try:
            self._commit(self.first)
            self.first_written.set()
            self.go_on.wait()
            self._commit(self.rest)
        except BaseException as exc:  # the test reports it
            self.error = exc
            self.first_written.set()


@pytest.mark.parametrize("change_data_feed", [False, True], ids=["appends", "change-data-feed"])
def test_versions_committed_while_the_job_runs_arrive_once_through_an_exception_and_a_kill(env, tmp_path,
                                                                                           change_data_feed):
    path = str(tmp_path / "orders")
    configuration = {"delta.enableChangeDataFeed": "true"} if change_data_feed else None
    write_deltalake(path, table_of(list(range(SNAPSHOT_ROWS))), configuration=configuration)
    chaos_dir = chaos.plan(str(tmp_path / "chaos"), "raise-in-map")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, 0))
    source = DeltaSource.for_continuous(path).update_check_interval(50).build()
    sink = FileSink(str(tmp_path / "out"), format="jsonl")
    (env.from_source(source, "orders").uid("delta")
     .map(chaos.ChaosMap(chaos_dir, "raise-in-map", "raise", random.randrange(200, 800))).uid("chaos")
     .map(lambda row: [row.get("_change_type", "snapshot"), row["id"]]).uid("changes")
     .sink_to(sink).uid("out"))
    client = env.execute_async("delta-source")
    master = client._run
    writer = VersionWriter(path, first=10, rest=10, changes=change_data_feed)
    try:
        writer.start()
        assert writer.first_written.wait(60) and writer.error is None, writer.error
        wait_for(lambda: chaos.remaining(chaos_dir) == [] and len(master.restored_from) == 2
                 and master.restored_from[-1] is not None and master.coordinator.completed_checkpoints()
                 and master.coordinator.completed_checkpoints()[-1] > master.restored_from[-1],
                 what="the exception's restart from a checkpoint, and a checkpoint after it")
        os.kill(random.choice([r.pid for r in master.control.registrations.values()]), signal.SIGKILL)
        writer.go_on.set()
        writer.join(60)
        assert not writer.is_alive() and writer.error is None, writer.error
        total = sum(writer.expected.values())
        wait_for(lambda: len(sink.read_committed()) >= total and master.restarts >= 2,
                 what="every change committed, after both failures")
    finally:
        writer.go_on.set()
        client.cancel()
    assert collections.Counter(tuple(change) for change in sink.read_committed()) == writer.expected
