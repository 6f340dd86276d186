"""A Delta table read as a stream on Spark, exactly once: a writer commits versions while the job runs, a map raises
once and a worker is SIGKILLed from outside; the committed output holds every row of every version once."""

import os
import random
import signal
import threading

import pytest

pytest.importorskip("deltalake")

import pyarrow as pa  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

from operators import FileSink  # noqa: E402
from operators.delta.source import DeltaSource  # noqa: E402
from runtime import RestartStrategies  # noqa: E402
from tests.integration import chaos  # noqa: E402
from tests.integration.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.delta

ROWS_PER_VERSION = 100


class VersionWriter(threading.Thread):
    """Appends versions of ``ROWS_PER_VERSION`` rows with ids counting on; the first ``first`` at once, the rest
    once ``go_on`` is set."""

    def __init__(self, path, first_id, first, rest):
        super().__init__(daemon=True, name="delta-writer")
        self.path, self.next_id, self.first, self.rest = path, first_id, first, rest
        self.first_written, self.go_on = threading.Event(), threading.Event()
        self.error = None

    def _append(self, count):
        for _ in range(count):
            ids = list(range(self.next_id, self.next_id + ROWS_PER_VERSION))
            write_deltalake(self.path, pa.table({"id": ids, "part": [i % 3 for i in ids]}), mode="append")
            self.next_id += ROWS_PER_VERSION

    def run(self):
        try:
            self._append(self.first)
            self.first_written.set()
            self.go_on.wait()
            self._append(self.rest)
        except BaseException as exc:  # the test reports it
            self.error = exc
            self.first_written.set()


def test_versions_committed_while_the_job_runs_arrive_once_through_an_exception_and_a_kill(env, tmp_path):
    path = str(tmp_path / "orders")
    write_deltalake(path, pa.table({"id": list(range(1500)), "part": [i % 3 for i in range(1500)]}))
    chaos_dir = chaos.plan(str(tmp_path / "chaos"), "raise-in-map")
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, 0))
    source = DeltaSource.for_continuous(path).update_check_interval(50).build()
    sink = FileSink(str(tmp_path / "out"), format="jsonl")
    (env.from_source(source, "orders").uid("delta")
     .map(chaos.ChaosMap(chaos_dir, "raise-in-map", "raise", random.randrange(200, 800))).uid("chaos")
     .map(lambda row: row["id"]).uid("ids")
     .sink_to(sink).uid("out"))
    client = env.execute_async("delta-source")
    master = client._run
    writer = VersionWriter(path, first_id=1500, first=10, rest=10)
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
        total = writer.next_id
        wait_for(lambda: len(sink.read_committed()) >= total and master.restarts >= 2,
                 what="every row committed, after both failures")
    finally:
        writer.go_on.set()
        client.cancel()
    assert chaos.remaining(chaos_dir) == []
    assert sorted(sink.read_committed()) == list(range(total))
