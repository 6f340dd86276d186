"""What a user sees in the terminal running ``python job.py``: Chandy's own lines without any logging setup,
and Ctrl-C: a clean cancel, one line naming the newest checkpoint and the command that resumes from it, exit
status 130, no traceback; the printed command then resumes the job exactly.

Each run is a subprocess of its own, as a user's program is (its own SparkContext), in its own process group
so that the SIGINT reaches every process of the program as a terminal's Ctrl-C does.
"""

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap

from tests.integration.waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 3_000

JOB = textwrap.dedent(f"""
    import os, sys
    from operators import CollectSink, MapFunction, SequenceSource
    from runtime import StreamExecutionEnvironment
    from tests.integration.paced import FileExists, PacedSource

    class SignalCheckpoints(MapFunction):
        def __init__(self, path):
            self.path = path

        def notify_checkpoint_complete(self, checkpoint_id):
            # the test waits for a completed checkpoint; it also reads whether the worker's daemon preloaded Chandy
            with open(self.path + ".tmp", "w") as f:
                f.write(os.environ.get("CHANDY_WORKER_PRELOADED", "no"))
            os.replace(self.path + ".tmp", self.path)  # whole when the test sees it

        def map(self, value):
            return value

    env = StreamExecutionEnvironment.get_execution_environment().enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(sys.argv[1])
    sink = CollectSink("numbers")
    # 500 records per checkpoint, and the end held until the test releases it: the first run is interrupted
    # after its first checkpoint, whatever the machine's speed; the resumed one reads the rest.
    here = os.path.dirname(os.path.abspath(sys.argv[1]))
    numbers = PacedSource(SequenceSource(0, {N - 1}), per_checkpoint=500,
                          end_when=FileExists(os.path.join(here, "release")), together=os.path.join(here, "paced"))
    env.from_source(numbers, "numbers").uid("numbers") \\
        .map(SignalCheckpoints(sys.argv[2])).uid("signal").sink_to(sink).uid("sink")
    result = env.execute("ctrl-c")
    print("EXACT" if sorted(result.collected(sink)) == list(range({N})) else "WRONG", flush=True)
""")


@contextlib.contextmanager
def running(arguments, tmp_path, extra_env=None):
    """The program started as :func:`start` does; its whole process group is killed if it outlives the block."""
    process, stderr = start(arguments, tmp_path, extra_env)
    try:
        yield process, stderr
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def start(arguments, tmp_path, extra_env=None):
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    environment.pop("PYSPARK_GATEWAY_PORT", None)
    environment.update(extra_env or {})
    stderr = open(tmp_path / f"stderr-{len(list(tmp_path.glob('stderr-*')))}.txt", "w+")
    process = subprocess.Popen(arguments, cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=stderr,
                               text=True, start_new_session=True)
    return process, stderr


def output(stderr):
    stderr.flush()
    return open(stderr.name).read()


def test_ctrl_c_cancels_prints_how_to_resume_and_the_command_resumes_exactly(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    checkpointed = tmp_path / "checkpointed"
    arguments = [sys.executable, "job.py", str(tmp_path / "ck"), str(checkpointed)]
    with running(arguments, tmp_path) as (process, stderr):
        wait_for(lambda: checkpointed.exists() or process.poll() is not None, timeout=300,
                 what="the job's first completed checkpoint")
        assert process.poll() is None, output(stderr)
        assert checkpointed.read_text() == "1", "the local session's workers come from Chandy's preloading daemon"
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        stdout, _ = process.communicate(timeout=300)
    text = output(stderr)
    assert process.returncode == 130, text[-5000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-5000:]
    assert "Exception in task" not in text and "was cancelled" not in text, "a cancel is no error:\n" + text[-5000:]
    assert "EXACT" not in stdout and "WRONG" not in stdout, "the job was cancelled before its end"
    started = re.search(r"chandy INFO Job 'ctrl-c' \(\w+\) starting: parallelism 1, 1 slots, checkpoints every "
                        r"200 ms to \S+", text)
    assert started, "Chandy's start line shows without any logging setup:\n" + text[-3000:]
    hint = re.search(r"Cancelled job 'ctrl-c'\. Newest completed checkpoint: (\d+) \((\S+)\)\. Resume from it "
                     r"with: (.*)$", text, re.MULTILINE)
    assert hint, text[-3000:]
    checkpoint_id, url, command = hint.group(1), hint.group(2), shlex.split(hint.group(3))
    assert url.removeprefix("file://") == str(tmp_path / "ck" / "ctrl-c" / f"chk-{checkpoint_id}"), url
    assert command[:2] == ["CHANDY_RESTORE_JOB=ctrl-c", f"CHANDY_RESTORE_FROM={url}"] and command[2:] == arguments

    # The printed command, as a user would paste it: the job resumes from that checkpoint and ends exactly.
    (tmp_path / "release").touch()
    variables = dict(assignment.split("=", 1) for assignment in command[:2])
    with running(command[2:], tmp_path, variables) as (process, stderr):
        stdout, _ = process.communicate(timeout=300)
    text = output(stderr)
    assert process.returncode == 0, text[-5000:]
    assert stdout.strip() == "EXACT", stdout + text[-3000:]
    assert re.search(rf"chandy INFO Job 'ctrl-c' attempt 0 restores checkpoint {checkpoint_id} of \S+ \(taken "
                     r"[\d-]+ [\d:]+ at parallelism 1; now 1\)", text), text[-3000:]
    assert re.search(r"chandy INFO Job 'ctrl-c' finished in [\d.]+ s: \d+ checkpoints, 0 restarts", text), text[-3000:]


PROGRESS_JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    from operators import DiscardingSink, SequenceSource
    from runtime import StreamExecutionEnvironment

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    env = StreamExecutionEnvironment.get_execution_environment(spark).enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(sys.argv[1])
    # About 4 s of input: the status line is redrawn every second meanwhile.
    env.from_source(SequenceSource(0, 1999, records_per_second=500), "numbers").uid("numbers") \\
        .sink_to(DiscardingSink()).uid("sink")
    env.execute("progress")
""")


def test_a_terminal_shows_a_live_status_line_and_one_info_line_per_checkpoint(tmp_path):
    import pty
    import select

    (tmp_path / "job.py").write_text(PROGRESS_JOB)
    controller, terminal = pty.openpty()
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    environment.pop("PYSPARK_GATEWAY_PORT", None)
    for size in ("COLUMNS", "LINES"):  # the new terminal's size is its own (a test runner may set these, xdist does)
        environment.pop(size, None)
    process = subprocess.Popen([sys.executable, "job.py", str(tmp_path / "ck")], cwd=tmp_path, env=environment,
                               stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    shown = b""
    try:
        while True:  # read until the program closed the terminal (EIO) or it ended and nothing is left
            ready, _, _ = select.select([controller], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                shown += chunk
            elif process.poll() is not None:
                break
        assert process.wait(timeout=300) == 0, shown.decode(errors="replace")[-3000:]
    finally:
        os.close(controller)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    text = shown.decode(errors="replace")
    lines = re.findall(r"\r\x1b\[Kprogress (?:RUNNING|FINISHED) \d+:\d\d:\d\d \| in [\d.]+k?/s out [\d.]+k?/s"
                       r"(?: \| checkpoint \d+: \d+ ms, [\d.]+ \w?i?B)? \| restarts 0", text)
    assert len(lines) >= 2, text[-3000:]
    assert re.search(r"\r\x1b\[Kprogress FINISHED [^\r\n]*\r?\n", text), "the final line stays: " + text[-2000:]
    checkpoint_line = (r"chandy INFO Checkpoint \d+ of job 'progress' complete in \d+ ms: [\d.]+ \w?i?B stored "
                       r"\(sync [\d.]+ ms, async \d+ ms, alignment [\d.]+ ms, start delay [\d.]+ ms\)")
    assert re.search(checkpoint_line, text), text[-3000:]
    assert re.search(r"chandy INFO Job 'progress' \(\w+\) starting: .*; dashboard http://[\w.]+:\d+/#/jobs/\w+",
                     text), text[-3000:]


PRINT_JOB = textwrap.dedent("""
    import pyarrow.compute as pc
    from pyspark.sql import SparkSession
    from runtime import StreamExecutionEnvironment

    def shout(word):
        print("user print:", word)  # a user's own print() in a function on the executors
        return word.upper()

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(2)
    env.from_collection(["ant", "bee", "cat"]).map(shout).print("rows")
    env.from_sequence(1, 4, columnar=True).map_batches(lambda b: {"tenfold": pc.multiply(b["value"], 10)}) \\
        .print("columns")
    env.execute("printing")
""")


def test_print_goes_to_stdout_as_in_pyflink_on_the_record_and_the_columnar_path(tmp_path):
    """Spark copies its Python workers' stdout to stderr; Chandy's slots print to the executor's stdout, which in
    local mode is the terminal's stdout (``python job.py > out.txt`` keeps the records in ``out.txt``)."""
    (tmp_path / "job.py").write_text(PRINT_JOB)
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    environment.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=environment, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.findall(r"^((?:rows|columns):\d> .*|user print: \w+)$", done.stdout, re.MULTILINE)
    assert sorted(line for line in printed if line.startswith("user")) == \
        ["user print: ant", "user print: bee", "user print: cat"], done.stdout[-3000:]
    assert sorted(line.split("> ")[1] for line in printed if line.startswith("rows")) == ["ANT", "BEE", "CAT"], \
        done.stdout[-3000:]
    assert sorted(line.split("> ")[1] for line in printed if line.startswith("columns")) == \
        ["10", "20", "30", "40"], done.stdout[-3000:]
    assert not re.search(r"(rows|columns):\d> |user print:", done.stderr), done.stderr[-3000:]
