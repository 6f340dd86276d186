"""Where a record's time goes: the reference job profiled on its executors by py-spy, sample by sample.

``python -m benchmarks.profile [--records N] [--parallelism P] [--out DIR] [--gil]`` runs the reference job (record API,
exactly-once checkpoints every second), samples every PySpark Python worker with py-spy while it runs (in
non-blocking mode, so the job is not paused to be sampled), and attributes each sample to the part of the engine
that was running: the innermost frame of this repository's code names it (a user function, the key's hash,
keyed state, the batch codec, the network, ...); a sample in no frame of ours (the interpreter between calls, a
library called from outside our code) counts as ``other``. Shares are of the samples; multiplied by the job's CPU
time per record (measured around the run, every worker and the driver) they give core-nanoseconds per record per
part, the breakdown issue 36 asks for beside ``benchmarks.floor``. The raw stacks are written to ``--out``
(py-spy's collapsed format: ``flamegraph.pl`` or speedscope draw them).

``--gil`` samples only the thread holding the interpreter lock: the Python work a record costs, without the
threads that wait (for a queue with room, for credits, for bytes on a socket), which py-spy's non-blocking mode
counts as running when they wait inside a lock or a read (13% of the samples in one run, all shown as the network),
and without the work done with the lock released (Arrow, sockets).

py-spy is not a dependency of Chandy: ``pip install py-spy`` (it needs the right to trace the workers: the same
user, or root).

>>> part_of("run (runtime/executor/subtask.py:400);value (state_backends/heap/states.py:80)")
'keyed state'
>>> part_of("run (runtime/executor/subtask.py:400);<lambda> (benchmarks/throughput.py:24)")
'user functions'
>>> part_of("_bootstrap (threading.py:995);wait (threading.py:320)")
'other'
>>> breakdown({"keyed state": 30, "user functions": 10}, cpu_ns_per_record=1000.0)
[('keyed state', 75.0, 750.0), ('user functions', 25.0, 250.0)]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (path fragment, part), tried on a sample's frames from the innermost outwards: the first frame of ours decides
_PARTS = (
    ("benchmarks/throughput.py", "user functions"),
    ("runtime/tools/demo.py", "user functions"),
    ("runtime/tools/count_sink.py", "sink"),
    ("runtime/keys/", "key hash and key groups"),
    ("state_backends/storage", "checkpoint writing"),
    ("runtime/executor/snapshotter.py", "checkpoint writing"),
    ("state_backends/", "keyed state"),
    ("runtime/network/codec.py", "batch encode and decode"),
    ("runtime/network/", "network (writers, channels, gates)"),
    ("operators/sources.py", "source"),
    ("runtime/executor/", "subtask loop and chaining"),
    ("operators/", "operator framework"),
    ("runtime/", "runtime, other"),
)
_FRAME = re.compile(r"\(([^():]+):\d+\)")


def part_of(stack: str) -> str:
    """The part of the engine a sampled stack (py-spy's collapsed frames, outermost first) was running."""
    for path in reversed(_FRAME.findall(stack)):
        for fragment, part in _PARTS:
            if fragment in path:
                return part
    return "other"


def breakdown(samples: dict[str, int], cpu_ns_per_record: float | None) -> list[tuple[str, float, float | None]]:
    """``(part, share %, core-ns per record)`` of each part, largest first."""
    total = sum(samples.values()) or 1
    rows = []
    for part, count in sorted(samples.items(), key=lambda item: -item[1]):
        share = 100.0 * count / total
        rows.append((part, round(share, 1),
                     None if cpu_ns_per_record is None else round(cpu_ns_per_record * share / 100.0, 1)))
    return rows


def _worker_pids() -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"pyspark.daemon" in command or b"pyspark.worker" in command or b"worker_daemon" in command:
            pids.append(int(pid))
    return pids


def _record(pids: list[int], seconds: float, out: str, gil: bool = False) -> dict[str, int]:
    """py-spy on each pid for ``seconds`` (``gil``: only the thread holding the GIL); the samples of all, by part."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    running = []
    for pid in pids:
        path = os.path.join(out, f"worker-{pid}.txt")
        running.append((path, subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "250", "--nonblocking",
             *(["--gil"] if gil else []), "--format", "raw", "--output", path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    samples: collections.Counter = collections.Counter()
    for path, process in running:
        process.wait()
        try:
            with open(path) as raw:
                for line in raw:
                    stack, _, count = line.rstrip("\n").rpartition(" ")
                    if count.isdigit():
                        samples[part_of(stack)] += int(count)
        except OSError:  # a worker that ran nothing of the job (an idle daemon) writes no file
            continue
    return dict(samples)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=30_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to sample, once the job runs")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "profile"))
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    args = parser.parse_args(argv)
    if shutil.which("py-spy") is None and not os.path.exists(os.path.join(os.path.dirname(sys.executable), "py-spy")):
        raise SystemExit("benchmarks.profile needs py-spy: pip install py-spy")

    from benchmarks.session import spark_session
    from benchmarks.machine import job_cpu_seconds
    from benchmarks.throughput import run_chandy_reference_job

    os.makedirs(args.out, exist_ok=True)
    samples: dict[str, int] = {}

    def sample(client) -> None:
        started = time.monotonic()
        while client.get_job_status().name != "RUNNING" and time.monotonic() - started < 60:
            time.sleep(0.05)
        time.sleep(2.0)  # past the start-up, into the steady rate
        samples.update(_record(_worker_pids(), args.seconds, args.out, args.gil))

    with spark_session(args.parallelism) as spark, \
            tempfile.TemporaryDirectory(prefix="chandy-bench-profile-ck-") as checkpoints:
        run_chandy_reference_job(spark, 200_000, args.keys, args.parallelism)  # warm: workers forked, modules imported
        cpu_before = job_cpu_seconds()
        run = run_chandy_reference_job(spark, args.records, args.keys, args.parallelism, checkpoints,
                                       while_running=sample)
        cpu_ns = (job_cpu_seconds() - cpu_before) / args.records * 1e9
    print(f"reference job: {run['records_per_s']:,} records/s end to end, exact: {run['exact']}, "
          f"{cpu_ns:,.0f} core-ns per record (every worker and the driver); {sum(samples.values()):,} samples")
    print(f"{'part':40} {'share':>7} {'core-ns/record':>15}")
    for part, share, ns in breakdown(samples, cpu_ns):
        print(f"{part:40} {share:6.1f}% {ns:15,.0f}")
    print(f"raw stacks: {args.out}")


if __name__ == "__main__":
    main()
