"""Running as users deploy: separate executor JVMs, and spark-submit with our packages in --py-files.

Each runs in a subprocess: a process holds one SparkContext, and the test session's is local[4].
"""

import os
import subprocess
import sys
import textwrap

import pyspark
import pytest

from runtime.tools.packaging import build_pyfiles_zip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLUSTER_JOB = textwrap.dedent("""
    import collections, os, socket, sys
    from pyspark.sql import SparkSession
    from runtime import StreamExecutionEnvironment
    from runtime.tools.demo import CountPerKey, final_counts
    from operators import CollectSink

    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.chandy.slotWaitSeconds", "180").getOrCreate())
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    sink = CollectSink()
    env.from_sequence(0, 29_999).map(lambda x: (x % 101, os.getpid())).key_by(lambda kv: kv[0]) \\
        .process(CountPerKey()).sink_to(sink)
    pids = CollectSink()
    env.from_sequence(0, 1).map(lambda x: os.getppid()).sink_to(pids)
    result = env.execute("two-executors")
    counts = final_counts(result.collected(sink))
    expected = dict(collections.Counter(x % 101 for x in range(30_000)))
    executors = set(result.collected(pids))
    print("EXACT" if counts == expected else "WRONG", "EXECUTOR_JVMS", len(executors))
    spark.stop()
""")


def run(command, timeout, **kwargs):
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    environment.update(kwargs.pop("env", {}))
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, **kwargs)


@pytest.mark.cluster
def test_exact_answer_across_two_executor_jvms(tmp_path):
    script = tmp_path / "cluster_job.py"
    script.write_text(CLUSTER_JOB)
    out = run([sys.executable, str(script)], timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-5000:]
    # Each barrier task ran in a Python worker whose parent is a different executor JVM.
    assert "EXACT EXECUTOR_JVMS 2" in out.stdout, out.stdout + out.stderr[-3000:]


def test_demo_job_through_spark_submit_with_py_files(tmp_path):
    zip_path = build_pyfiles_zip(str(tmp_path / "chandy.zip"))
    demo = tmp_path / "demo_job.py"
    demo.write_text(open(os.path.join(ROOT, "runtime", "tools", "demo.py")).read())
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = run([spark_submit, "--master", "local[2]", "--py-files", zip_path, str(demo),
               "--records", "50000", "--keys", "100"], timeout=600, cwd=tmp_path,
              env={"PYTHONPATH": ""})
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    assert "result: exact" in out.stdout
