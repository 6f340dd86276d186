"""What security costs: the reference job (record API, checkpoints every second, parallelism 2) with its internal
connections authenticated only (the default), in TLS (``spark.chandy.network.encryption=true``), and
authenticated while 1,000 junk connections arrive in a burst at its data and control ports; Spark Structured
Streaming's JVM count in the same run for scale. Besides wall-clock rates, each run measures the CPU time the job's
processes spent per record (the driver and every PySpark worker, from /proc), which the machine's load moves
much less.

The variants alternate, run after run, and each TLS or burst run is compared with the plain run next to it, so
that a drift of the machine's speed cancels out of each pair (wall-clock rates on a shared 2-core machine move
by more than these costs at times). Every run's answer is checked against the plain-Python reference.

    python -m benchmarks.security [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["main", "junk_burst"]

VARIANTS = ("plain", "tls", "burst")


def junk_burst(targets: list[tuple[str, int]], connections: int) -> None:
    """``connections`` connections in a burst, spread over ``targets``, each sending 64 random bytes and closing."""
    for i in range(connections):
        try:
            with socket.create_connection(targets[i % len(targets)], timeout=10) as sock:
                sock.sendall(os.urandom(64))
        except OSError:  # refused while the backlog was full: part of a burst
            pass


def _burst_once_running(connections: int):
    """Once the job's first checkpoint completed (its channels are connected and records flow: a burst during the
    rendezvous would measure TCP's retry of a connection that found a full backlog, not the job's rate), a burst
    at both data servers and the control server."""
    def burst(client) -> None:
        master = client._run
        deadline = time.monotonic() + 120
        while not master.coordinator.completed_checkpoints():
            if master.ended or time.monotonic() > deadline:
                return
            time.sleep(0.01)
        ports = [(r.host, r.port) for r in master.control.registrations.values()] + [master.control.address]
        junk_burst(ports, connections)
    return burst


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.security", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each variant (alternated)")
    parser.add_argument("--burst", type=int, default=1000, help="junk connections in the burst variant")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from benchmarks.reporting import ratio, steadiness_verdict, write_report
    from benchmarks.session import spark_session
    from benchmarks.machine import cpu_steadiness, describe_machine
    from benchmarks.spark_baseline import run_jvm_groupby_count
    from benchmarks.throughput import alternated_reference_runs, run_chandy_reference_job
    from runtime.driver.security_settings import ENCRYPTION_CONF

    records = args.records or (50_000 if args.quick else 4_000_000)
    repeats = args.repeats or (1 if args.quick else 5)
    steadiness = [cpu_steadiness()]
    with spark_session(args.parallelism) as spark:
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up
        def prepare(variant: str):
            spark.conf.set(ENCRYPTION_CONF, "true" if variant == "tls" else "false")
            return _burst_once_running(args.burst) if variant == "burst" else None

        runs = alternated_reference_runs(spark, VARIANTS, repeats, records, args.keys, args.parallelism, prepare)
        spark.conf.unset(ENCRYPTION_CONF)
        jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                    seconds=6 if args.quick else 20)
    steadiness.append(cpu_steadiness())

    rates = {v: [row["records_per_s"] for row in rows if row["records_per_s"]] for v, rows in runs.items()}
    medians = {v: statistics.median(values) if values else None for v, values in rates.items()}

    def pairs(variant: str, measure: str = "records_per_s") -> list[float]:
        return [round(other[measure] / plain[measure], 4) for other, plain in zip(runs[variant], runs["plain"])
                if other[measure] and plain[measure]]

    report = {
        "benchmark": "security", "quick": args.quick, "machine": describe_machine(),
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1],
                           "verdict": steadiness_verdict(steadiness)},
        "records": records, "parallelism": args.parallelism, "repeats": repeats, "burst_connections": args.burst,
        "runs": runs, "median_records_per_s": medians, "spark_sss_jvm": jvm,
        "over_sss_jvm": {v: ratio(medians[v], jvm["records_per_s"]) for v in VARIANTS},
        "tls_over_plain_pairs": pairs("tls"), "burst_over_plain_pairs": pairs("burst"),
        "cpu_us_per_record": {v: statistics.median(row["cpu_us_per_record"] for row in rows) for v, rows in runs.items()},
        "tls_over_plain_cpu_pairs": pairs("tls", "cpu_us_per_record"),
        "burst_over_plain_cpu_pairs": pairs("burst", "cpu_us_per_record"),
        "exact": all(row["exact"] for rows in runs.values() for row in rows),
    }
    for variant in ("tls", "burst"):
        for kind in ("", "_cpu"):
            values = report[f"{variant}_over_plain{kind}_pairs"]
            report[f"{variant}_over_plain{kind}_median"] = round(statistics.median(values), 4) if values else None
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    for variant in VARIANTS:
        print(f"{variant:6}: runs {rates[variant]} records/s, median {medians[variant] or 0:,.0f}/s = "
              f"{report['over_sss_jvm'][variant] or 0:.2f}x SSS JVM ({jvm['records_per_s'] or 0:,}/s)")
    print(f"TLS / plain per pair {report['tls_over_plain_pairs']} (median {report['tls_over_plain_median']}); "
          f"burst / plain per pair {report['burst_over_plain_pairs']} (median {report['burst_over_plain_median']}); "
          f"exact: {report['exact']}")
    print(f"CPU per record: {report['cpu_us_per_record']} us; TLS / plain per pair {report['tls_over_plain_cpu_pairs']} "
          f"(median {report['tls_over_plain_cpu_median']}); burst / plain per pair "
          f"{report['burst_over_plain_cpu_pairs']} (median {report['burst_over_plain_cpu_median']})")
    write_report(args.out, "security", args.quick, report)
    return 0 if report["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
