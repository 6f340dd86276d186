"""Running as users deploy: separate executor JVMs, and spark-submit with our packages in --py-files.

Each runs in a subprocess: a process holds one SparkContext, and the test session's is local[4].
"""

import os
import subprocess
import sys
import textwrap
import time

import pyspark
import pytest

from runtime.tools.packaging import build_pyfiles_zip
from tests.integration.test_state_api_spark_writer import STATE_API_ON_A_CLUSTER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLUSTER_JOB = textwrap.dedent("""
    import collections, os, socket, sys, time
    from pyspark.sql import SparkSession
    from runtime import StreamExecutionEnvironment
    from runtime.tools.demo import CountPerKey, final_counts
    from operators import CollectSink, SequenceSource
    from tests.integration.attack import attack, listening_ports
    from tests.integration.paced import FileExists, PacedSource

    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.chandy.network.encryption", "true")
             .config("spark.chandy.slotWaitSeconds", "180").getOrCreate())
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.abspath("ck"))
    sink = CollectSink()
    # Runs until the attack is over (the file "end"), paced by its checkpoints.
    numbers = PacedSource(SequenceSource(0, 29_999), per_checkpoint=2_000, end_when=FileExists(os.path.abspath("end")),
                          together=os.path.abspath("paced"))
    env.from_source(numbers, "numbers").map(lambda x: (x % 101, os.getpid())).key_by(lambda kv: kv[0]) \\
        .process(CountPerKey()).sink_to(sink)
    pids = CollectSink()
    env.from_sequence(0, 1).map(lambda x: os.getppid()).sink_to(pids)
    client = env.execute_async("two-executors")
    master = client._run
    while not master.coordinator.completed_checkpoints():
        time.sleep(0.05)
    registrations = list(master.control.registrations.values())
    ours = {master.control.address, *master.web_server.addresses} | {(r.host, r.port) for r in registrations}
    ports = listening_ports([os.getpid()] + [r.pid for r in registrations])
    closed = attack(ports, os.path.abspath("code-ran"), ours)
    open("end", "w").close()
    result = client.get_job_execution_result()
    counts = final_counts(result.collected(sink))
    expected = dict(collections.Counter(x % 101 for x in range(30_000)))
    executors = set(result.collected(pids))
    harmless = ours <= ports and all(closed[p] for p in ours) and not os.path.exists("code-ran") \\
        and result.restarts == 0
    print("EXACT" if counts == expected else "WRONG", "EXECUTOR_JVMS", len(executors),
          "ATTACK", "HARMLESS" if harmless else f"HARMFUL {ours} {ports} {closed} {result.restarts}", flush=True)
""")


STOPPED_DRIVER = textwrap.dedent("""
    import os
    from pyspark.sql import SparkSession
    from runtime import StreamExecutionEnvironment
    from operators import DiscardingSink, SequenceSource
    from tests.integration.paced import FileExists, PacedSource

    spark = (SparkSession.builder.master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.chandy.network.encryption", "true").getOrCreate())
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.abspath("ck"))
    # Runs until it is stopped: nobody creates the file "end".
    numbers = PacedSource(SequenceSource(0, 999_999), per_checkpoint=1_000, end_when=FileExists(os.path.abspath("end")),
                          together=os.path.abspath("paced"))
    env.from_source(numbers, "numbers").uid("numbers").sink_to(DiscardingSink()).uid("sink")
    result = env.execute("stopped-driver")
    print("ENDED", result.restarts, flush=True)
    # The program, and with it the driver, ends here: at once after the job.
""")


def run(command, timeout, **kwargs):
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    environment.update(kwargs.pop("env", {}))
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, **kwargs)


def test_demo_job_through_spark_submit_with_py_files(tmp_path):
    zip_path = build_pyfiles_zip(str(tmp_path / "chandy.zip"))
    demo = tmp_path / "demo_job.py"
    demo.write_text(open(os.path.join(ROOT, "runtime", "tools", "demo.py")).read())
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = run([spark_submit, "--master", "local[2]", "--py-files", zip_path, str(demo),
               "--records", "50000", "--keys", "100"], timeout=600, cwd=tmp_path,
              env={"PYTHONPATH": ""})
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    assert "result: exact" in out.stdout and "checkpoints: " in out.stdout


def test_chandy_savepoint_and_stop_reach_a_driver_of_its_own_in_https_and_stop_hears_the_savepoint_as_it_exits(
        tmp_path):
    """As users run it: the job's program in one process, ``chandy`` in others, finding the driver through the
    job's directory (``_job.json``); the job encrypts, so the REST API speaks HTTPS with the certificate pinned
    from there. A stopped job ends its program, which waits until ``chandy stop`` has heard where the savepoint
    is."""
    from state_backends.storage import CheckpointStorage

    script = tmp_path / "stopped_driver.py"
    script.write_text(STOPPED_DRIVER)
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    driver = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=environment, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "stopped-driver")
    try:
        deadline = time.monotonic() + 300
        while not storage.checkpoint_ids():
            assert driver.poll() is None, driver.communicate()[1][-5000:]
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.2)
        assert storage.read_job_control()["url"].startswith("https://")
        taken = run([sys.executable, "-m", "runtime.tools.cli", "savepoint", storage.job_dir], 300, cwd=tmp_path)
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.strip().startswith(storage.default_savepoint_url() + "/savepoint-")
        stopped = run([sys.executable, "-m", "runtime.tools.cli", "stop", storage.job_dir, "--path", "savepoints"],
                      300, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        savepoint = stopped.stdout.strip()
        assert savepoint.startswith(f"file://{tmp_path}/savepoints/savepoint-"), "a relative path: from the CLI's"
        assert os.path.exists(os.path.join(savepoint[len("file://"):], "_metadata"))
        out, err = driver.communicate(timeout=300)
        assert driver.returncode == 0 and "ENDED 0" in out, out + err[-5000:]
        assert not os.path.exists(os.path.join(storage.job_dir, "_job.json"))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()


EXECUTOR_LOSS_JOB = textwrap.dedent("""
    import signal
    from runtime import RestartStrategies
    from operators import MapFunction

    class KillMyExecutorOnce(MapFunction):
        '''Attempt 0, subtask 0, after a completed checkpoint: SIGKILL the executor JVM this worker runs
        under (its ancestor process), as a machine loss would. Attempt 1 notes when it reads again.'''

        def __init__(self, directory):
            self.directory = directory

        def open(self, runtime_context):
            self.attempt = runtime_context.get_attempt_number()
            self.killer = self.attempt == 0 and runtime_context.get_index_of_this_subtask() == 0
            self.checkpointed = False
            self.noted = False

        def notify_checkpoint_complete(self, checkpoint_id):
            self.checkpointed = True

        def map(self, value):
            if self.attempt > 0 and not self.noted:
                self.noted = True
                with open(os.path.join(self.directory, f"running-{self.attempt}"), "w") as f:
                    f.write(repr(time.time()))
            if self.killer and self.checkpointed:
                pid = os.getpid()
                while pid > 1:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"CoarseGrainedExecutorBackend" in f.read():
                            break
                    with open(f"/proc/{pid}/stat") as f:
                        pid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(os.path.join(self.directory, "killed"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(pid, signal.SIGKILL)
                time.sleep(60)  # the executor is gone: this worker dies with it
            return value

    directory = os.path.abspath("loss")
    os.makedirs(directory)
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(os.path.join(directory, "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    n = 20_000
    sink = CollectSink()
    env.from_source(SequenceSource(0, n - 1, records_per_second=4_000), "numbers") \\
        .map(KillMyExecutorOnce(directory)).map(lambda x: x % 101).key_by(lambda k: k) \\
        .process(CountPerKey()).sink_to(sink)
    result = env.execute("executor-loss")
    exact = final_counts(result.collected(sink)) == dict(collections.Counter(x % 101 for x in range(n)))
    killed = float(open(os.path.join(directory, "killed")).read())
    running = float(open(os.path.join(directory, "running-1")).read())
    print("EXACT" if exact else "WRONG", "RESTARTS", result.restarts, "RUNNING_AGAIN_AFTER_S", round(running - killed, 1))
    spark.stop()
""")


@pytest.mark.cluster
def test_two_executor_jvms_in_tls_an_outsiders_attack_and_a_lost_executor_jvm(tmp_path):
    """One cluster of two executor JVMs (starting one takes a while), two jobs: the first exact across both JVMs in
    TLS while an outsider attacks every port; the second exact after one executor JVM is SIGKILLed and replaced.
    Between them, the state API's writer and Spark reader run on those executors."""
    script = tmp_path / "cluster_jobs.py"
    script.write_text(CLUSTER_JOB + STATE_API_ON_A_CLUSTER + EXECUTOR_LOSS_JOB)
    out = run([sys.executable, str(script)], timeout=900, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    # Each barrier task ran in a Python worker whose parent is a different executor JVM; its connections were in
    # TLS, and an outsider's attack on every port of the driver and the workers ran nothing and changed nothing.
    assert "EXACT EXECUTOR_JVMS 2 ATTACK HARMLESS" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "EXACT RESTARTS 1 " in out.stdout, out.stdout + out.stderr[-3000:]
    # The savepoint written from a DataFrame on two executor JVMs reads back as its input there, in the files the
    # driver writes for the same data.
    assert "STATE_API EXACT SAME_FILES EXECUTORS 2 PARTITIONS 3" in out.stdout, out.stdout + out.stderr[-3000:]
    # How long recovery took is measured by the benchmarks, never asserted here; print it for the record.
    print(out.stdout.strip().splitlines()[-1])
