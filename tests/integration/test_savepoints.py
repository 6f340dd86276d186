"""Savepoints: taken by hand while a job runs, or to stop it; self-contained (they can be moved), never deleted by
retention, restorable at another parallelism, and exact end to end."""

import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from operators import CollectSink, DiscardingSink, FileSink, SequenceSource
from runtime import StreamExecutionEnvironment, Types
from runtime.datastream.connectors.delta import DeltaSink
from runtime.errors import IncompatibleCheckpointError, SavepointError
from state_backends.storage import FINISHED_PREFIX, CheckpointStorage
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import FileExists, Hold, PacedSource
from tests.integration.waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, SHORT, KEYS = 30_000, 1_000, 37


def counting_job(env, tmp_path, parallelism, with_extra):
    """Numbers (paced: each subtask reads 1/40 of them per checkpoint, and holds its end until the file ``end``
    exists) and a short bounded source that finishes at once, counted per key into a CollectSink; with_extra
    adds a stateful branch (uid ``extra``) that a later version of the job drops."""
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck")).set_max_retained_checkpoints(1)
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 40,
                                          end_when=FileExists(str(tmp_path / "end")),
                                          together=str(tmp_path / "paced")), "numbers").uid("numbers")
    short = env.from_source(SequenceSource(N, N + SHORT - 1), "short").uid("short")
    sink = CollectSink("counts")
    both = numbers.union(short)
    both.map(lambda n: n % KEYS).uid("modulo").key_by(lambda k: k).process(CountPerKey()).uid("count") \
        .sink_to(sink).uid("sink")
    if with_extra:
        both.key_by(lambda n: n % 3).reduce(lambda a, b: a + b).uid("extra").sink_to(DiscardingSink()).uid("drop")
    return sink


def local_path(url):
    return url[len("file://"):] if url.startswith("file://") else url


def test_a_savepoint_outlives_retention_moves_and_restores_exactly_at_another_parallelism(spark, tmp_path):
    first = StreamExecutionEnvironment.get_execution_environment(spark)
    counting_job(first, tmp_path, 2, with_extra=True)
    client = first.execute_async("savepointed")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "savepointed")
    try:
        wait_for(lambda: max(storage.checkpoint_ids(), default=0) >= 3, what="three checkpoints")
        url = client.trigger_savepoint(str(tmp_path / "savepoints"))
        by_cli = subprocess.run([sys.executable, "-m", "runtime.tools.cli", "savepoint", storage.job_dir],
                                cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert by_cli.returncode == 0, by_cli.stderr
        assert by_cli.stdout.strip().startswith(storage.default_savepoint_url() + "/savepoint-")
        newest = max(storage.checkpoint_ids())
        wait_for(lambda: min(storage.usable_ids(), default=0) > newest + 2, what="retention to move on")
    finally:
        client.cancel()
    savepoint = local_path(url)
    assert os.path.dirname(savepoint) == str(tmp_path / "savepoints")
    metadata = json.load(open(os.path.join(savepoint, "_metadata")))
    assert metadata["type"] == "savepoint" and metadata["checkpoint_id"] not in storage.checkpoint_ids()
    handles = [f["path"] for op in metadata["operators"].values() for f in op["files"]]
    assert handles and not any(p.startswith(FINISHED_PREFIX) for p in handles), "it references nothing outside"
    assert metadata["operators"]["short"]["files"], "the finished short source's final state was copied in"
    moved = str(tmp_path / "moved" / "before-upgrade")
    shutil.move(savepoint, moved)

    open(tmp_path / "end", "w").close()  # the restored job runs to its end
    refused = StreamExecutionEnvironment.get_execution_environment(spark)
    counting_job(refused, tmp_path / "v2", 3, with_extra=False)
    with pytest.raises(IncompatibleCheckpointError, match="uid extra .*allow_non_restored_state=True"):
        refused.execute("upgraded", restore_from=moved)
    second = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = counting_job(second, tmp_path / "v2", 3, with_extra=False)
    open(tmp_path / "v2" / "end", "w").close()
    result = second.execute("upgraded", restore_from=moved, allow_non_restored_state=True)
    assert result.restored_from[0] == metadata["checkpoint_id"]
    expected = collections.Counter(n % KEYS for n in range(N + SHORT))
    assert collections.Counter(k for k, _ in result.collected(sink)) == expected, "each record counted once"
    assert final_counts(result.collected(sink)) == dict(expected)


def numbers_to_files(env, tmp_path, out, parallelism=2, hold=None):
    env.set_parallelism(parallelism).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    sink = FileSink(str(out), format="jsonl")
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 40,
                                          end_when=FileExists(str(tmp_path / "end")), together=str(tmp_path / "paced"),
                                          hold=hold),
                              "numbers").uid("numbers")
    numbers.map(lambda n: [n]).uid("wrap").sink_to(sink).uid("files")
    # A sink with one committer too: its writers hand their files over ahead of the savepoint's final state.
    numbers.map(lambda n: (n,), output_type=Types.ROW_NAMED(["n"], [Types.LONG()])).uid("row") \
        .sink_to(DeltaSink(str(out) + "-delta")).uid("delta")
    return sink


def delta_numbers(out) -> list[int]:
    from deltalake import DeltaTable

    return DeltaTable(str(out) + "-delta").to_pyarrow_table()["n"].to_pylist()


@pytest.mark.parametrize("how", ["api", "cli-drain"])
def test_stop_with_savepoint_then_restore_writes_each_record_once_end_to_end(spark, tmp_path, how):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = numbers_to_files(env, tmp_path, tmp_path / "out")
    client = env.execute_async("stopped")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "stopped")
    try:
        wait_for(lambda: max(storage.checkpoint_ids(), default=0) >= 3, what="three checkpoints")
        if how == "api":
            url = client.stop_with_savepoint(str(tmp_path / "savepoints"))
        else:
            out = subprocess.run([sys.executable, "-m", "runtime.tools.cli", "stop", storage.job_dir,
                                  "--path", str(tmp_path / "savepoints"), "--drain"],
                                 cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            url = out.stdout.strip()
        result = client.get_job_execution_result(timeout=300)
    finally:
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()
    assert client.get_job_status().name == "FINISHED"
    before = [n for (n,) in sink.read_committed()]
    assert len(before) == len(set(before)) and 0 < len(before) < N, "stopped part of the way, nothing twice"
    in_delta = delta_numbers(tmp_path / "out")
    assert len(in_delta) == len(set(in_delta)) and len(in_delta) < N, "stopped part of the way, nothing twice"
    assert result.sink_results["files"] == 0, "the savepoint's checkpoint committed everything"
    assert not os.path.exists(os.path.join(storage.job_dir, "_job.json")), "the job's endpoint is gone with it"
    with pytest.raises(SavepointError, match="FINISHED"):
        client.trigger_savepoint()

    open(tmp_path / "end", "w").close()
    again = StreamExecutionEnvironment.get_execution_environment(spark)
    numbers_to_files(again, tmp_path, tmp_path / "out", parallelism=3)  # and rescaled
    again.execute("stopped", restore_from=url)
    assert sorted(n for (n,) in sink.read_committed()) == list(range(N)), "each record once, end to end"
    assert sorted(delta_numbers(tmp_path / "out")) == list(range(N)), "each record once in the Delta table too"


def test_a_stop_between_two_barriers_commits_what_every_writer_wrote_and_the_restore_the_rest(spark, tmp_path):
    """The stop reaches the sources between different barriers: subtask 0 has taken checkpoint c, subtask 1 (held
    in a poll meanwhile) never does. So the Delta sink's writers hand their last files over for different
    checkpoints (c + 1 and c), and the committer must not wait for writer 1 to pass c + 1: it sends nothing more.
    The stop's final checkpoint commits every row the files sink committed, and the job restored from its savepoint,
    rescaled, commits the rest (it committed nothing when the savepoint's committer waited on)."""
    hold = Hold(str(tmp_path / "hold"), subtask=1)
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = numbers_to_files(env, tmp_path, tmp_path / "out", hold=hold)
    client = env.execute_async("stopped")
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "stopped")
    urls: list = []
    stopping = threading.Thread(target=lambda: urls.append(client.stop_with_savepoint(str(tmp_path / "savepoints"))))
    try:
        wait_for(lambda: max(storage.checkpoint_ids(), default=0) >= 3, what="three checkpoints")
        open(hold.path, "w").close()
        wait_for(lambda: os.path.exists(hold.passed), what="subtask 0 taking a checkpoint that subtask 1 has not")
        stopping.start()
        wait_for(lambda: storage.final_state_tokens(), what="subtask 0 stopping")
        time.sleep(0.5)  # the stop reaches subtask 1's slot too (at most a vanishing moment later), then
        os.remove(hold.path)  # it stops at once, not taking the checkpoint waiting for it
        stopping.join(300)
        client.get_job_execution_result(timeout=300)
    finally:
        if os.path.exists(hold.path):
            os.remove(hold.path)
        if not client.get_job_status().is_globally_terminal_state():
            client.cancel()
    assert client.get_job_status().name == "FINISHED" and urls, "stopped with a savepoint"
    before = sorted(n for (n,) in sink.read_committed())
    assert 0 < len(before) < N and sorted(delta_numbers(tmp_path / "out")) == before, \
        "the Delta table holds what every writer wrote before the stop, as the files do"

    open(tmp_path / "end", "w").close()
    again = StreamExecutionEnvironment.get_execution_environment(spark)
    numbers_to_files(again, tmp_path, tmp_path / "out", parallelism=3)
    again.execute("stopped", restore_from=urls[0])
    assert sorted(n for (n,) in sink.read_committed()) == list(range(N)), "each record once, end to end"
    assert sorted(delta_numbers(tmp_path / "out")) == list(range(N)), "each record once in the Delta table too"


def test_savepoints_need_checkpointing(env, tmp_path):
    env.set_parallelism(1)
    env.from_sequence(0, 9).sink_to(DiscardingSink())
    client = env.execute_async("no-checkpoints")
    try:
        with pytest.raises(SavepointError, match="without checkpointing.*enable_checkpointing"):
            client.trigger_savepoint(str(tmp_path))
    finally:
        client.get_job_execution_result(timeout=300)
