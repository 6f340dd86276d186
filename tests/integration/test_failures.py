"""Failures are visible, named, and leave nothing running."""

import collections
import os
import signal
import socket
import threading

import pytest

from operators import CollectSink, KeyedProcessFunction, MapFunction, SequenceSource
from runtime import (
    InsufficientSlotsError,
    JobCancelledError,
    JobFailedError,
    JobStatus,
    RestartStrategies,
    UnpicklableFunctionError,
)
from tests.integration.waiting import wait_for


def explode_on_777(x):
    if x == 777:
        return 1 // 0
    return x


def port_is_closed(address) -> bool:
    try:
        socket.create_connection(address, timeout=1).close()
    except OSError:
        return True
    return False


def pid_is_gone_or_idle(pid) -> bool:
    """A Python worker of a failed job is either gone, or back in Spark's pool with none of our threads."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    task_dir = f"/proc/{pid}/task"
    names = []
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return not any(name.startswith("chandy") for name in names)


def assert_nothing_left_running(spark, run):
    tracker = spark.sparkContext.statusTracker()
    assert tracker.getActiveJobsIds() == []
    assert run.data_addresses, "the tasks registered, so their addresses are known"
    assert all(port_is_closed(a) for a in run.data_addresses)
    assert all(pid_is_gone_or_idle(pid) for pid in run.registered_pids)


def test_user_exception_fails_the_job_with_its_traceback(env, spark):
    env.set_parallelism(2)
    env.from_sequence(0, 100_000).map(explode_on_777).name("explosive map").key_by(lambda x: x % 7) \
        .reduce(lambda a, b: a + b).sink_to(CollectSink())
    client = env.execute_async("failing")
    with pytest.raises(JobFailedError) as caught:
        client.get_job_execution_result(timeout=120)
    error = caught.value
    assert error.operator_name == "explosive map"
    assert "ZeroDivisionError" in str(error)
    assert "explode_on_777" in error.user_traceback and "return 1 // 0" in error.user_traceback
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert client.get_job_status() is JobStatus.FAILED
    assert_nothing_left_running(spark, client._run)


class FailsInOpen(MapFunction):
    def open(self, runtime_context):
        raise RuntimeError(f"cannot connect from subtask {runtime_context.get_index_of_this_subtask()}")

    def map(self, value):
        return value


def test_exception_in_open_names_the_operator(env):
    env.set_parallelism(2)
    env.from_sequence(0, 10).map(FailsInOpen()).name("needs-db").sink_to(CollectSink())
    with pytest.raises(JobFailedError, match="needs-db.*cannot connect"):
        env.execute("open-fails")


def test_too_few_slots_fails_at_once_naming_the_number(env, spark):
    env.set_parallelism(5)
    env.from_sequence(0, 10).sink_to(CollectSink())
    with pytest.raises(InsufficientSlotsError, match="needs 5 Spark task slots.*offers 4") as caught:
        env.execute("too-wide")
    assert caught.value.needed == 5 and caught.value.available == 4
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []


def test_unpicklable_function_fails_at_execute(env, spark):
    lock = threading.Lock()
    env.from_sequence(0, 10).map(lambda x: (x, lock.locked())).name("uses-lock").sink_to(CollectSink())
    with pytest.raises(UnpicklableFunctionError, match="uses-lock.*open"):
        env.execute("unpicklable")


class SignalFirstRecord(MapFunction):
    """Creates ``path`` when the first record passes: lets the test wait for the job to be running."""

    def __init__(self, path):
        self.path = path

    def map(self, value):
        if not os.path.exists(self.path):
            open(self.path, "w").close()
        return value


def wait_for_file(path, timeout=120):
    wait_for(lambda: os.path.exists(path), timeout, what=f"{path} to appear")


def test_unbounded_job_runs_until_cancelled(env, spark, tmp_path):
    env.set_parallelism(2)
    marker = str(tmp_path / "running")
    env.from_source(SequenceSource(0, None), "endless").map(SignalFirstRecord(marker)) \
        .key_by(lambda x: x % 10).reduce(lambda a, b: b).sink_to(CollectSink())
    client = env.execute_async("endless")
    wait_for_file(marker)
    assert client.get_job_status() is JobStatus.RUNNING
    client.cancel()
    assert client.get_job_status() is JobStatus.CANCELED
    with pytest.raises(JobCancelledError):
        client.get_job_execution_result()
    assert_nothing_left_running(spark, client._run)


class KillSelfAt(MapFunction):
    def __init__(self, at):
        self.at = at

    def map(self, value):
        if value == self.at:
            os.kill(os.getpid(), signal.SIGKILL)
        return value


def test_a_killed_worker_fails_the_job_clearly(env, spark):
    env.set_parallelism(2)
    env.from_sequence(0, 50_000).map(KillSelfAt(30_000)).key_by(lambda x: x % 3).reduce(max) \
        .sink_to(CollectSink())
    client = env.execute_async("sigkill")
    with pytest.raises(JobFailedError, match=r"the slot [01] died without reporting an error") as caught:
        client.get_job_execution_result(timeout=120)
    assert caught.value.operator_name is None and caught.value.retryable
    assert_nothing_left_running(spark, client._run)


def test_a_module_missing_on_the_executors_is_named_with_the_fix(env, tmp_path, monkeypatch):
    module_dir = tmp_path / "driver_only"
    module_dir.mkdir()
    (module_dir / "driver_only_helpers.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(module_dir))
    import driver_only_helpers

    env.set_parallelism(2).set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_sequence(0, 10).map(driver_only_helpers.double).sink_to(CollectSink())
    client = env.execute_async("missing-module")
    with pytest.raises(JobFailedError, match="No module named 'driver_only_helpers'.*--py-files.*not restarted"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 0, "a module missing on the executors is missing on every attempt"


def test_unreachable_checkpoint_storage_fails_at_start(env, spark, tmp_path):
    from runtime.errors import StorageUnreachableError

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(blocker / "checkpoints"))
    env.from_sequence(0, 10).sink_to(CollectSink())
    with pytest.raises(StorageUnreachableError, match="not-a-directory/checkpoints"):
        env.execute("unreachable")
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []


class FailsInOpenOnEveryAttempt(MapFunction):
    def open(self, runtime_context):
        raise ConnectionRefusedError("database at db:5432 refused the connection")

    def map(self, value):
        return value


def test_an_operator_failing_the_same_way_in_open_twice_stops_the_restarts(env):
    env.set_parallelism(2).set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 0))
    env.from_sequence(0, 10).map(FailsInOpenOnEveryAttempt()).name("needs-db").uid("needs-db") \
        .sink_to(CollectSink())
    client = env.execute_async("open-fails-twice")
    with pytest.raises(JobFailedError, match=r"operator 'needs-db' \(subtask \d, uid 'needs-db'\) in open\(\) raised "
                                             r"ConnectionRefusedError.*same way in open\(\) on two attempts"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 1, "one restart, in case it was transient; not five"
    assert client.get_job_status() is JobStatus.FAILED


def test_a_record_that_does_not_fit_its_declared_type_fails_at_once(env, tmp_path):
    from runtime import Types

    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    # Every record is a str where LONG was declared; the rebalance sends some of them to the other slot, where
    # records travel encoded (within a slot they are handed over as they are, unchecked).
    env.from_sequence(0, 1000).map(str, output_type=Types.LONG()).name("typed") \
        .rebalance().map(lambda x: x).sink_to(CollectSink())
    client = env.execute_async("bad-type")
    with pytest.raises(JobFailedError, match=r"RecordEncodingError.*'typed' declared output_type=LONG.*not restarted"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 0


class HoldsALock(KeyedProcessFunction):
    """Keeps an unpicklable value in keyed state: no checkpoint of it can ever be written."""

    def open(self, runtime_context):
        from operators import ValueStateDescriptor

        self.state = runtime_context.get_state(ValueStateDescriptor("connection"))

    def process_element(self, value, ctx):
        self.state.update(threading.Lock())
        yield value


def test_unpicklable_state_fails_the_job_at_once_naming_the_state_and_operator(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(50)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_source(SequenceSource(0, None), "endless").key_by(lambda x: x % 10).process(HoldsALock()).uid("locker") \
        .sink_to(CollectSink())
    client = env.execute_async("unpicklable-state")
    with pytest.raises(JobFailedError, match=r"checkpoint \d+ failed.*operator uid 'locker': keyed state "
                                             r"'connection' cannot be checkpointed.*not restarted"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 0


def test_a_malformed_line_fails_the_job_without_restarts(env, tmp_path):
    from operators import FileSource

    source_dir = tmp_path / "in"
    source_dir.mkdir()
    (source_dir / "bad.jsonl").write_text('{"user": "a"}\n{"user": oops}\n')
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_source(FileSource(str(source_dir)), "events").sink_to(CollectSink())
    client = env.execute_async("malformed-fatal")
    with pytest.raises(JobFailedError, match=r"bad\.jsonl, line 2: malformed jsonl.*not restarted"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 0


class AlwaysFails(MapFunction):
    def map(self, value):
        raise RuntimeError("fails on every record")


def test_the_failure_rate_strategy_fails_the_job_on_too_many_failures_in_its_interval(env):
    env.set_parallelism(1).set_restart_strategy(RestartStrategies.failure_rate_restart(3, 600_000, 0))
    env.from_sequence(0, 10).map(AlwaysFails()).sink_to(CollectSink())
    client = env.execute_async("failure-rate")
    with pytest.raises(JobFailedError, match="3 failures within 600000 ms"):
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 2  # the third failure within ten minutes ends the job


def test_exponential_delay_restarts_with_growing_delays(env, caplog):
    env.set_parallelism(1).set_restart_strategy(
        RestartStrategies.exponential_delay_restart(10, 1_000, 4.0, 600_000, jitter_factor=0.0))
    env.from_sequence(0, 10).map(AlwaysFails()).sink_to(CollectSink())
    with caplog.at_level("WARNING", logger="runtime.driver.job"):  # it restarts for ever: cancelled after 4
        client = env.execute_async("exponential-delay")
        wait_for(lambda: sum("restarting in" in r.getMessage() for r in caplog.records) >= 4,
                 what="four restarts")
        client.cancel()
    delays = [r.getMessage().split("restarting in ")[1].split(" ms")[0] for r in caplog.records
              if "restarting in" in r.getMessage()]
    assert delays[:4] == ["10", "40", "160", "640"]


def test_a_cancel_during_the_restart_delay_goes_through_cancelling(env):
    env.set_parallelism(1).set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 600_000))  # 10 minutes
    env.from_sequence(0, 10).map(AlwaysFails()).sink_to(CollectSink())
    client = env.execute_async("cancel-while-restarting")
    wait_for(lambda: client.get_job_status() is JobStatus.RESTARTING, what="the restart delay")
    client.cancel()
    assert client.get_job_status() is JobStatus.CANCELED
    assert [status for status, _ in client._run.lifecycle.history] == [
        JobStatus.CREATED, JobStatus.INITIALIZING, JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.CANCELLING,
        JobStatus.CANCELED]
    with pytest.raises(JobCancelledError):
        client.get_job_execution_result()


def test_an_unpicklable_record_crossing_a_key_by_is_blamed_on_the_operator_that_emitted_it(env, tmp_path):
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    # Half of the keys live on the other slot, where records arrive pickled: a lock cannot be.
    env.from_sequence(0, 1000).map(lambda x: (x % 10, threading.Lock())).name("with-lock").uid("with-lock") \
        .key_by(lambda r: r[0]).map(lambda r: r[0]).sink_to(CollectSink())
    client = env.execute_async("unpicklable-record")
    with pytest.raises(JobFailedError) as failed:
        client.get_job_execution_result(timeout=120)
    message = str(failed.value)
    assert "operator 'with-lock'" in message and "uid 'with-lock'" in message, message
    assert "a record of type builtins.tuple that cannot be pickled" in message and "_thread.lock" in message, message
    assert client._run.restarts == 0, "the same record fails the same way again"


def test_an_unhashable_key_fails_at_once_naming_the_fix(env):
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_sequence(0, 100).map(lambda x: [x % 3, "a"]).name("lists").key_by(lambda r: r) \
        .map(lambda r: r).name("keyed").sink_to(CollectSink())
    client = env.execute_async("unhashable-key")
    # Blamed on the operator the key_by feeds, where the user wrote the key selector, not on 'lists'.
    with pytest.raises(JobFailedError, match=r"operator 'keyed'.*UnsupportedKeyError.*list.*tuple\(") as failed:
        client.get_job_execution_result(timeout=120)
    assert client._run.restarts == 0, str(failed.value)


def test_nan_keys_are_one_key_and_minus_zero_is_zero(env, tmp_path):
    from tests.integration.jobs import CountPerKey

    nan, n = float("nan"), 1000
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    values = [nan if i % 2 else (-0.0 if i % 4 == 0 else 0.0) for i in range(n)]
    counts, sums = CollectSink("counts"), CollectSink("sums")
    keyed = env.from_collection(values).key_by(lambda v: v)
    keyed.process(CountPerKey()).sink_to(counts)  # keyed state
    env.from_collection(values).map(lambda v: (v, 1)).key_by(lambda r: r[0]) \
        .reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(sums)  # the batched reduce
    result = env.execute("nan-keys")
    finals = {}
    for key, count in result.collected(counts):
        name = "nan" if key != key else str(abs(key))
        finals[name] = max(finals.get(name, 0), count)
    assert finals == {"nan": n // 2, "0.0": n // 2}, "every NaN is one key; -0.0 and 0.0 are one key"
    totals = {}
    for key, total in result.collected(sums):
        name = "nan" if key != key else str(abs(key))
        totals[name] = max(totals.get(name, 0), total)
    assert totals == {"nan": n // 2, "0.0": n // 2}


def test_restarts_wait_for_slots_and_fail_naming_them_when_they_never_come(env, monkeypatch):
    from runtime.errors import InsufficientSlotsError

    waits = []

    def cluster_lost_its_worker(spark, needed, stop):  # what require_slots says once its wait is over
        waits.append(needed)
        raise InsufficientSlotsError(needed, 1, "spark://lost-worker:7077")

    monkeypatch.setattr("runtime.driver.job.require_slots", cluster_lost_its_worker)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_sequence(0, 1000).map(explode_on_777).key_by(lambda x: x % 7).map(lambda x: x).sink_to(CollectSink())
    client = env.execute_async("lost-worker")
    with pytest.raises(JobFailedError, match=r"cannot restart: The job needs 2 Spark task slots.*offers 1"):
        client.get_job_execution_result(timeout=120)
    # Executors may come back, so each wait that ran out costs a restart; no stage is submitted meanwhile.
    assert waits == [2, 2, 2] and client._run.restarts == 3
    assert client._run.attempt == 3 and len(client._run.restored_from) == 1, "only attempt 0 ran a stage"


class StorageOutageAfterTwoCheckpoints(MapFunction):
    """Attempt 0, subtask 0: once two checkpoints completed, the job's checkpoint directory is moved away and a
    regular file put in its place, so that every read and write of it fails (not: finds nothing)."""

    def __init__(self, job_dir, moved, marker):
        self.job_dir, self.moved, self.marker = job_dir, moved, marker

    def open(self, runtime_context):
        self.active = runtime_context.get_attempt_number() == 0 and runtime_context.get_index_of_this_subtask() == 0
        self.completed = []

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed.append(checkpoint_id)
        if self.active and len(self.completed) == 2:
            self.active = False
            os.rename(self.job_dir, self.moved)
            with open(self.job_dir, "w") as f:
                f.write("the storage is down")
            with open(self.marker, "w") as f:
                f.write(str(checkpoint_id))

    def map(self, value):
        return value


def test_a_storage_outage_during_restarts_costs_restarts_not_the_job_and_never_its_checkpoints(env, tmp_path):
    from tests.integration.jobs import CountPerKey, final_counts

    url, job_dir, moved, marker = tmp_path / "ck", tmp_path / "ck" / "outage", tmp_path / "moved", tmp_path / "down"
    n = 20_000
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(url)).set_tolerable_checkpoint_failure_number(0)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(20, 200))
    sink = CollectSink("counts")
    env.from_source(SequenceSource(0, n - 1, records_per_second=2_000), "numbers").uid("numbers") \
        .map(StorageOutageAfterTwoCheckpoints(str(job_dir), str(moved), str(marker))).uid("outage") \
        .map(lambda x: x % 13).uid("modulo").key_by(lambda k: k).process(CountPerKey()).uid("count") \
        .sink_to(sink).uid("sink")
    client = env.execute_async("outage")
    wait_for(lambda: marker.exists(), what="the outage")
    # The failed checkpoint fails the attempt; then choosing a restore point fails while the storage is down:
    # each try costs a restart (the first is the attempt's failure).
    wait_for(lambda: client._run.restarts >= 3, what="restarts that could not read the storage")
    assert client.get_job_status().name == "RESTARTING"
    os.remove(job_dir)
    os.rename(moved, job_dir)  # the storage is back
    result = client.get_job_execution_result(timeout=300)
    before_outage = int(marker.read_text())
    assert result.restored_from[0] is None and all(r is not None for r in result.restored_from[1:]), \
        f"never from scratch once checkpoints exist: {result.restored_from}"
    assert result.restored_from[1] >= before_outage
    assert final_counts(result.collected(sink)) == dict(collections.Counter(x % 13 for x in range(n)))


def explode_on_50_000(x):
    if x == 50_000:
        raise ValueError(f"bad record {x}")
    return x


def test_a_record_that_fails_the_same_way_again_after_a_restart_fails_the_job(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path))
    env.from_sequence(0, 100_000).map(explode_on_50_000).name("validate").key_by(lambda x: x % 7) \
        .reduce(lambda a, b: a + b).sink_to(CollectSink())
    client = env.execute_async("same-record-twice")
    with pytest.raises(JobFailedError) as caught:
        client.get_job_execution_result(timeout=180)
    message = str(caught.value)
    assert "operator 'validate'" in message and "ValueError: bad record 50000" in message, message
    assert "raised the same ValueError on the same record (50000) on two attempts in a row" in message, message
    assert "choose a restart strategy" in message, message
    assert client._run.restarts == 1, "one restart, in case it was transient; not until the strategy gives up"


def test_a_restart_strategy_the_user_chose_retries_a_repeating_failure_as_it_says(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 0))
    env.from_sequence(0, 100_000).map(explode_on_50_000).name("validate").sink_to(CollectSink())
    client = env.execute_async("same-record-chosen-strategy")
    with pytest.raises(JobFailedError, match="ValueError: bad record 50000") as caught:
        client.get_job_execution_result(timeout=180)
    assert "on two attempts in a row" not in str(caught.value)
    assert client._run.restarts == 2


def parse_amount(text):
    return int(text)


def test_records_whose_function_raises_go_to_a_side_output_when_asked_and_the_job_goes_on(env):
    from runtime import OutputTag
    from runtime.side_outputs import FailedRecord

    env.set_parallelism(2)
    failed = OutputTag("unparsable")
    lines = [str(i) for i in range(1000)] + ["x", "12a", ""]
    amounts = env.from_collection(lines).rebalance().map(parse_amount).name("parse") \
        .side_output_failed_records(failed)
    main, side = CollectSink("amounts"), CollectSink("failed")
    amounts.sink_to(main)
    amounts.get_side_output(failed).sink_to(side)
    result = env.execute("failed-records")
    assert sorted(result.collected(main)) == list(range(1000))
    failures = result.collected(side)
    assert sorted(f.record for f in failures) == ["", "12a", "x"]
    assert all(isinstance(f, FailedRecord) and f.operator == "parse" and f.error_type == "ValueError"
               and "invalid literal for int()" in f.message and "parse_amount" in f.traceback for f in failures)
    assert result.restarts == 0


USER_SCRIPT = '''
def explode_on_777(x):
    if x == 777:
        raise ValueError("bad record 777")
    return x
'''


def test_the_users_traceback_names_the_users_file_and_line(env, tmp_path):
    script = tmp_path / "user_job.py"
    script.write_text(USER_SCRIPT)
    namespace = {"__name__": "user_job_not_importable"}  # as a script's __main__: its functions travel by value
    exec(compile(USER_SCRIPT, str(script), "exec"), namespace)
    env.set_parallelism(1)
    env.from_sequence(0, 1000).map(namespace["explode_on_777"]).sink_to(CollectSink())
    with pytest.raises(JobFailedError) as caught:
        env.execute("users-file")
    user_traceback = caught.value.user_traceback
    assert f'File "{script}", line 4, in explode_on_777' in user_traceback, user_traceback
    assert 'raise ValueError("bad record 777")' in user_traceback and "<dynamic-code>" not in user_traceback
