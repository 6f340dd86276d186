"""Where record latency's tail comes from: the latency job of ``benchmarks.latency``, with each sampled record's
arrival time, every garbage collection in the workers (when, how long, which generation) and every checkpoint
(when triggered, how long), so that the slowest records can be set beside what happened when they were slow.

    python -m benchmarks.tail_probe [--rate 250000] [--seconds 12] [--repeats 3] [--conf key=value]

Prints, for the records above the p99: how many arrived during a checkpoint (trigger to completion, plus 50 ms),
how many within 20 ms after a collection of the second generation, and the collections' pauses by generation and
by the kind of thread that ran them (a chain's subtask, a channel's reader, ...).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import threading
import time

from benchmarks.latency import SAMPLE_EVERY, percentiles, run_latency_job
from operators import Sink, SinkWriter

_PAUSES: list = []  # (wall start, seconds, generation, thread kind) of every collection in this worker process
_STARTED: list = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _STARTED[0] = time.perf_counter()
    else:
        _PAUSES.append((time.time(), time.perf_counter() - _STARTED[0], info["generation"],
                        thread_kind(threading.current_thread().name)))


def thread_kind(name: str) -> str:
    """What a worker thread does, from its name: a chain's subtask, a channel's reader, ...

    >>> thread_kind("chandy-1.0"), thread_kind("chandy-read"), thread_kind("Thread-3")
    ('subtask of chain 1', 'chandy-read', 'Thread-3')
    """
    chain = re.fullmatch(r"chandy-(\d+)\.\d+", name)
    return f"subtask of chain {chain.group(1)}" if chain else name


def _watch_collections() -> None:
    """Time every collection in this process from now on (once per process, however many writers it has).

    >>> _watch_collections(); _watch_collections(); gc.callbacks.count(_on_gc)
    1
    >>> gc.callbacks.remove(_on_gc)
    """
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
    _PAUSES.clear()


class _ProbeWriter(SinkWriter):
    def __init__(self):
        self.samples: list = []  # (arrival wall time, latency s)
        self.seen = 0
        _watch_collections()

    def write_batch(self, records: list) -> None:
        now = time.time()
        start = (-self.seen) % SAMPLE_EVERY
        self.samples.extend((now, now - r[2]) for r in records[start::SAMPLE_EVERY])
        self.seen += len(records)

    def result(self):
        return {"pid": os.getpid(), "samples": self.samples, "pauses": list(_PAUSES),
                "switch_interval": sys.getswitchinterval(), "gc_frozen": gc.get_freeze_count()}  # frozen by the slot


class ProbeSink(Sink):
    name = "tail-probe"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _ProbeWriter()

    def merge_results(self, results: list) -> list:
        return results


def run_probe(spark, rate: float, seconds: float, keys: int, parallelism: int) -> dict:
    result = run_latency_job(spark, rate, seconds, keys, parallelism, ProbeSink(), "benchmark-tail-probe")
    (parts,) = result.sink_results.values()
    samples = sorted(s for part in parts for s in part["samples"])
    pauses = sorted(p for part in parts for p in part["pauses"])
    checkpoints_ = [(c.completed_at - c.duration_ms / 1000.0, c.completed_at, c) for c in result.checkpoints]
    latencies = sorted(s[1] * 1000 for s in samples)
    stats = percentiles(latencies)
    threshold = latencies[int(0.99 * len(latencies))] if latencies else 0
    slow = [s for s in samples if s[1] * 1000 >= threshold]
    in_checkpoint = sum(any(t0 <= s[0] <= t1 + 0.05 for t0, t1, _ in checkpoints_) for s in slow)
    after_gen2 = sum(any(0 <= s[0] - p[0] <= 0.02 + p[1] for p in pauses if p[2] == 2) for s in slow)
    by_gen, by_thread = {}, {}
    for _, seconds_, generation, kind in pauses:
        by_gen.setdefault(generation, []).append(seconds_ * 1000)
        by_thread.setdefault(kind, []).append(seconds_ * 1000)
    return {"rate": round(rate), **stats, "samples": len(samples), "slow": len(slow),
            "slow_during_checkpoint": in_checkpoint, "slow_after_gen2": after_gen2,
            "gc": {g: {"count": len(v), "max_ms": round(max(v), 2), "total_ms": round(sum(v), 1)}
                   for g, v in sorted(by_gen.items())},
            "gc_by_thread": {k: {"count": len(v), "total_ms": round(sum(v), 1)} for k, v in sorted(by_thread.items())},
            "checkpoints": [{"sync_ms": round(c.sync_ms, 2), "alignment_ms": round(c.alignment_ms, 2),
                             "start_delay_ms": round(c.start_delay_ms, 2), "duration_ms": round(c.duration_ms, 1)}
                            for _, _, c in checkpoints_],
            "switch_intervals": sorted({p["switch_interval"] for p in parts}),
            "gc_frozen": [p["gc_frozen"] for p in parts],
            "slowest": [(round(s[0] % 100, 3), round(s[1] * 1000, 1)) for s in sorted(slow, key=lambda s: -s[1])[:15]],
            "checkpoint_windows": [(round(t0 % 100, 3), round(t1 % 100, 3)) for t0, t1, _ in checkpoints_],
            "gen2_after_first_sample_s_ms": [(round(p[0] - samples[0][0], 2), round(p[1] * 1000, 1))
                                             for p in pauses if p[2] == 2] if samples else []}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tail_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=250_000)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--conf", action="append", default=[], help="a Spark conf key=value for the runs")
    args = parser.parse_args(argv)

    import json

    from benchmarks.session import spark_session
    from benchmarks.machine import steadied

    with spark_session(args.parallelism) as spark:
        for pair in args.conf:
            key, value = pair.split("=", 1)
            spark.conf.set(key, value)
        run_probe(spark, 10_000, 1, args.keys, args.parallelism)  # warm-up
        for _ in range(args.repeats):
            row = steadied(lambda: run_probe(spark, args.rate, args.seconds, args.keys, args.parallelism))
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
