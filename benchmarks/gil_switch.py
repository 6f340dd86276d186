"""The GIL's switch interval against latency tails: A/B in one run, variants alternated.

Each variant sets the executors' switch interval (``spark.chandy.gilSwitchInterval``, None: Python's 5 ms) and the
driver's own (this process's, where the REST API and the control server run). Per round, each variant in turn:

1. peak: the reference job (record API, exactly-once checkpoints every second), unthrottled, with the CPU time its
   processes spent per record;
2. record latency at half of the round's median peak (the same load for every variant of a round):
   ``benchmarks.latency``'s job, event to sink;
3. lookups of queryable state at that rate: ``benchmarks.queryable_state``'s job, a lookup every 10 ms.

Rounds alternate the variants' order. Each round says how steady the machine was (a fixed loop's time before and
after it), and each phase which share of the machine's CPU other processes took meanwhile and which the job did.
The summary gives every variant's median over the rounds with the range.

    python -m benchmarks.gil_switch [--quick] [--repeats 3] [--variants default,exec-1ms,exec-0.5ms]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONF = "spark.chandy.gilSwitchInterval"

# name -> (executors' interval in ms, driver's interval in ms); None: Python's own
VARIANTS = {
    "default": (None, None),
    "exec-2ms": (2.0, None),
    "exec-1ms": (1.0, None),
    "exec-0.5ms": (0.5, None),
    "exec-0.5ms+driver-0.5ms": (0.5, 0.5),
    "exec-0.2ms": (0.2, None),
    "driver-0.5ms": (None, 0.5),
}


def _apply(spark, variant: str, python_default: float) -> None:
    executors, driver = VARIANTS[variant]
    if executors is None:
        spark.conf.unset(CONF)
    else:
        spark.conf.set(CONF, f"{executors} ms")
    sys.setswitchinterval(python_default if driver is None else driver / 1000.0)


def _tree_ticks(root: int) -> int:
    """CPU ticks used by process ``root`` and its descendants (the driver, its JVM, the JVM's Python workers)."""
    parents, ticks = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(pid)] = int(fields[1])
        ticks[int(pid)] = sum(int(v) for v in fields[11:15])
    mine, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in mine:
                mine.add(pid)
                frontier.append(pid)
    return sum(ticks.get(pid, 0) for pid in mine)


def _machine_ticks() -> tuple[int, int]:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class OthersLoad:
    """The share of the machine's CPU that processes other than this benchmark's used between start and stop
    (0.5 on 2 cores: one core's worth): what a shared machine took from the measurement."""

    def __init__(self):
        self.busy, self.total = _machine_ticks()
        self.mine = _tree_ticks(os.getpid())

    def share(self) -> float:
        busy, total = _machine_ticks()
        mine = _tree_ticks(os.getpid())
        elapsed = total - self.total
        self.mine_share = round((mine - self.mine) / elapsed, 3) if elapsed else 0.0  # this benchmark's own
        return round(max(0.0, (busy - self.busy) - (mine - self.mine)) / elapsed, 3) if elapsed else 0.0


def _spread(values: list) -> dict:
    """Median and range of the runs that measured something.

    >>> _spread([30.0, None, 10.0, 20.0])
    {'median': 20.0, 'min': 10.0, 'max': 30.0}
    """
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gil_switch", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default="default,exec-1ms,exec-0.5ms,exec-0.5ms+driver-0.5ms")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--skip", default="", help="comma-separated phases to leave out: peak, latency, lookups")
    parser.add_argument("--rate", type=float, default=None, help="the load of phases 2 and 3 (default: half peak)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}: choose from {sorted(VARIANTS)}")
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if "peak" in skip and args.rate is None:
        parser.error("--skip peak needs --rate: the load is half of the round's peak otherwise")

    from benchmarks.reporting import describe_run, report_header, write_report
    from benchmarks.session import spark_session
    from benchmarks.latency import run_chandy_latency
    from benchmarks.machine import cpu_steadiness, job_cpu_seconds
    from benchmarks.queryable_state import run_queryable_job
    from benchmarks.throughput import run_chandy_reference_job

    python_default = sys.getswitchinterval()
    records = 50_000 if args.quick else 3_000_000
    seconds = 3 if args.quick else 12
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark:
        rows: dict[str, list[dict]] = {v: [] for v in variants}
        rounds = []
        try:
            run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up: Python workers
            for repeat in range(args.repeats):
                order = variants if repeat % 2 == 0 else variants[::-1]
                before = cpu_steadiness(4)
                round_rows = {variant: {"variant": variant, "round": repeat} for variant in variants}
                if "peak" not in skip:
                    for variant in order:
                        _apply(spark, variant, python_default)
                        row = round_rows[variant]
                        cpu_before, others = job_cpu_seconds(), OthersLoad()
                        with tempfile.TemporaryDirectory(prefix="chandy-bench-gil-") as checkpoints:
                            peak = run_chandy_reference_job(spark, records, args.keys, args.parallelism, checkpoints)
                        row["peak"] = peak
                        row["peak_records_per_s"] = peak["steady_records_per_s"] or peak["records_per_s"]
                        row["cpu_us_per_record"] = round((job_cpu_seconds() - cpu_before) / records * 1e6, 3)
                        row["others_during_peak"] = others.share()
                # the load of this round: half of the peaks just measured (the machine's speed drifts between rounds)
                rate = args.rate or statistics.median(r["peak_records_per_s"] for r in round_rows.values()) / 2
                for variant in order[::-1]:
                    _apply(spark, variant, python_default)
                    row = round_rows[variant]
                    row["rate"] = round(rate)
                    if "latency" not in skip:
                        others = OthersLoad()
                        row["latency"] = run_chandy_latency(spark, rate, seconds, args.keys, args.parallelism)
                        row["others_during_latency"] = others.share()
                        row["cpu_share_during_latency"] = others.mine_share
                    if "lookups" not in skip:
                        others = OthersLoad()
                        row["lookups"] = run_queryable_job(spark, rate, seconds, args.keys, args.parallelism)
                        row["others_during_lookups"] = others.share()
                        row["cpu_share_during_lookups"] = others.mine_share
                for variant in variants:
                    rows[variant].append(round_rows[variant])
                    print(_line(round_rows[variant]), flush=True)
                after = cpu_steadiness(4)
                rounds.append({"round": repeat, "rate": round(rate), "before": before, "after": after})
                print(f"round {repeat} at {rate:,.0f}/s: fixed loop {before['loop_ms_min']}-{before['loop_ms_max']} ms "
                      f"before, {after['loop_ms_min']}-{after['loop_ms_max']} ms after", flush=True)
        finally:
            sys.setswitchinterval(python_default)
    steadiness.append(cpu_steadiness())
    summary = {}
    for variant, runs in rows.items():
        summary[variant] = {
            "peak_records_per_s": _spread([r.get("peak_records_per_s") for r in runs]),
            "cpu_us_per_record": _spread([r.get("cpu_us_per_record") for r in runs]),
            **{f"latency_{q}": _spread([r["latency"][f"{q}_ms"] for r in runs if "latency" in r])
               for q in ("p50", "p99", "max")},
            **{f"lookup_{q}": _spread([r["lookups"][f"{q}_ms"] for r in runs if "lookups" in r])
               for q in ("p50", "p99", "max")},
            "others_cpu_share": _spread([100 * r[k] for r in runs for k in r if k.startswith("others_during")]),
            "exact": all(r[k]["exact"] for r in runs for k in ("peak", "lookups") if k in r),
        }
    report = {**report_header("gil_switch", args.quick, steadiness), "rounds": rounds,
              "summary": summary, "runs": rows}
    print(describe_run(report))
    print(f"{'variant':26} {'peak/s':>22} {'cpu us/rec':>16} {'lat p99':>16} {'lat max':>16} {'lookup p50':>16} "
          f"{'lookup p99':>16} {'lookup max':>16}")
    cell = lambda s: "-" if s["median"] is None else f"{s['median']:g} ({s['min']:g}-{s['max']:g})"
    for variant, s in summary.items():
        print(f"{variant:26} {cell(s['peak_records_per_s']):>22} {cell(s['cpu_us_per_record']):>16} "
              f"{cell(s['latency_p99']):>16} {cell(s['latency_max']):>16} {cell(s['lookup_p50']):>16} "
              f"{cell(s['lookup_p99']):>16} {cell(s['lookup_max']):>16}  exact {s['exact']}")
    write_report(args.out, "gil_switch", args.quick, report)
    return 0 if all(s["exact"] for s in summary.values()) else 1


def _line(row: dict) -> str:
    parts = [f"round {row['round']} {row['variant']:26} at {row.get('rate', 0):,}/s, others' CPU share "
             + "/".join(str(row.get(f"others_during_{p}", "-")) for p in ("peak", "latency", "lookups"))]
    if "peak" in row:
        parts.append(f"peak {row['peak_records_per_s']:,}/s ({row['cpu_us_per_record']} us cpu/rec, "
                     f"exact {row['peak']['exact']})")
    if "latency" in row:
        lat = row["latency"]
        parts.append(f"machine {row['cpu_share_during_latency']:.0%} busy with the job; latency p50 {lat['p50_ms']} "
                     f"p99 {lat['p99_ms']} max {lat['max_ms']} ms")
    if "lookups" in row:
        look = row["lookups"]
        parts.append(f"lookups ({look['lookups']}) p50 {look['p50_ms']} p99 {look['p99_ms']} max {look['max_ms']} ms "
                     f"(exact {look['exact']})")
    return "; ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
