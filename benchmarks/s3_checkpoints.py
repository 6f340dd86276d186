"""Checkpoint duration and throughput dip with large heap state: checkpoints on a local S3-protocol server against
the local disk, in one run.

The job of :mod:`benchmarks.checkpoint_dip` (a payload per key, updated by every record, exactly-once checkpoints
every few seconds) runs twice per state size, alternating: checkpoints to a temporary local directory, then to a
bucket on moto's S3 server (started as the tests start it, tests/s3_server.py, and reached through
``AWS_ENDPOINT_URL`` as a user's executors would). moto answers in Python and keeps objects in memory: it measures
what S3's request path costs Chandy (one PUT per state file, multipart above s3fs's block size), not a network.

    python -m benchmarks.s3_checkpoints [--quick] [--repeats N] [--keys N ...]

>>> compare({"max_duration_ms": 400.0, "dip": 0.1}, {"max_duration_ms": 1000.0, "dip": 0.25})
{'duration_s3_over_disk': 2.5, 'dip_disk': 0.1, 'dip_s3': 0.25}
"""

from __future__ import annotations

import argparse
import datetime
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORAGES = ("disk", "s3")


def compare(disk: dict, s3: dict) -> dict:
    """The S3 run beside the disk run: how much longer its slowest checkpoint took, and both dips."""
    slower = (round(s3["max_duration_ms"] / disk["max_duration_ms"], 2)
              if s3["max_duration_ms"] and disk["max_duration_ms"] else None)
    return {"duration_s3_over_disk": slower, "dip_disk": disk["dip"], "dip_s3": s3["dip"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.s3_checkpoints", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each storage per size (alternated)")
    parser.add_argument("--keys", type=int, action="append", help="state sizes to run, in keys of 1 KiB (repeatable)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args(argv)

    from tests.s3_server import configure_environment, start_server

    configure_environment()  # before Spark starts: its executors inherit the endpoint and the credentials
    from benchmarks.reporting import steadiness_verdict, write_report
    from benchmarks.session import spark_session
    from benchmarks.checkpoint_dip import run_checkpoint_dip
    from benchmarks.machine import cpu_steadiness, describe_machine

    sizes = args.keys or ((10_000,) if args.quick else (100_000, 1_000_000))  # of 1 KiB: 10 MB; 100 MB and 1 GB
    steadiness = [cpu_steadiness()]
    server = start_server()
    with spark_session(args.parallelism) as spark:
        runs = []
        try:
            bucket = server.bucket("bench-checkpoints")
            for keys in sizes:
                for repeat in range(args.repeats):
                    for storage in STORAGES if repeat % 2 == 0 else tuple(reversed(STORAGES)):
                        url = f"s3://{bucket}/{keys}-{repeat}" if storage == "s3" else None
                        row = run_checkpoint_dip(spark, keys, 1024, 3 if args.quick else 30,
                                                 300_000 if args.quick else 150_000, args.parallelism,
                                                 interval_s=1 if args.quick else 5, storage=url, paced=args.quick)
                        runs.append({"storage": storage, **row})
                        print(f"{storage:5} keys={keys:>9,} state={row['state_bytes'] / 1e6:8.1f} MB "
                              f"checkpoints={row['checkpoints']:3} max duration={row['max_duration_ms']} ms "
                              f"dip={row['dip']}")
        finally:
            server.stop()
    steadiness.append(cpu_steadiness())
    by_size = {}
    for keys in sizes:
        rows = {storage: [r for r in runs if r["keys"] == keys and r["storage"] == storage] for storage in STORAGES}
        by_size[keys] = compare(rows["disk"][0], rows["s3"][0])
    report = {
        "benchmark": "s3_checkpoints", "quick": args.quick, "machine": describe_machine(),
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1], "verdict": steadiness_verdict(steadiness)},
        "server": "CHANDY_TEST_S3" if os.environ.get("CHANDY_TEST_S3") else "moto_server (in memory)",
        "runs": runs, "s3_against_disk": by_size,
    }
    write_report(args.out, "s3_checkpoints", args.quick, report)
    for keys, row in by_size.items():
        print(f"keys={keys:>9,}: slowest checkpoint {row['duration_s3_over_disk']}x the disk's on S3; "
              f"dip {row['dip_disk']} on disk, {row['dip_s3']} on S3")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
