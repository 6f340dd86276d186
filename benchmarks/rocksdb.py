"""Large keyed state on RocksDB: what an incremental checkpoint costs, and the reference job's rate.

``python -m benchmarks.rocksdb [--quick] [--out DIR]`` measures, in one run:

- **incremental checkpoints of 1 GB of state** (1M keys x 1 KiB, one subtask's RocksDB backend, local checkpoint
  storage): the first checkpoint (everything uploaded), then one after 1% of the keys changed: synchronous
  part, asynchronous part, bytes uploaded against the state's full size; beside the heap backend's full snapshot
  of the same state (:func:`benchmarks.snapshot.measure_snapshot`) and its incremental checkpoints (1% of the
  keys changed across the key groups at max parallelism 128 and 4096, and within 1% of the key groups);
- **the record-API reference job** (a running count per key, 1,000 keys, parallelism 2, checkpoints every
  second) on the heap, on RocksDB and on the heap with incremental checkpoints, alternated, with Spark Structured Streaming's JVM count and its Python
  state on the RocksDB state store as baselines from the same run;
- **the throughput dip while 1 GB of state is checkpointed** (1M keys x 1 KiB, every record rewriting its key's
  entry, checkpoints every 5 s: :mod:`benchmarks.checkpoint_dip`), heap and RocksDB;
- **recovery after SIGKILL with 1 GB of state** (:mod:`benchmarks.recovery`): the first record and the full rate
  after the kill, on the heap, on RocksDB from the local recovery copy, and on RocksDB from the checkpoint store
  (here a local directory: a lower bound of a remote store);
- **state larger than memory** (``--large``, 10M keys x 1 KiB = 10 GB in one subtask's RocksDB with a 256 MB block
  cache and 128 MB of memtables, in a process of its own): incremental checkpoints as above, random reads,
  and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from runtime.executor.snapshotter import OperatorSnapshot, Snapshotter, SubtaskSnapshot
from runtime.keys.key_groups import key_group_range
from state_backends import ValueStateDescriptor
from state_backends.rocksdb import MemorySettings, RocksDBKeyedStateBackend
from state_backends.storage import CheckpointStorage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checkpoint(snapshotter: Snapshotter, sent: list, backend, checkpoint_id: int) -> dict:
    started, monotonic = time.perf_counter(), time.monotonic()
    snapshot = backend.snapshot()
    sync_ms = (time.perf_counter() - started) * 1000
    snapshotter.submit(SubtaskSnapshot(checkpoint_id, 0, 0, [OperatorSnapshot("count", snapshot, {})], sync_ms, 0.0,
                                       monotonic))
    while not any(m.checkpoint_id == checkpoint_id for m in sent):
        time.sleep(0.002)
    ack = next(m for m in sent if m.checkpoint_id == checkpoint_id)
    handle = ack.state[0]
    backend.notify_checkpoint_complete(checkpoint_id)
    return {"sync_ms": round(sync_ms, 1), "async_ms": round(ack.async_ms, 1),
            "uploaded_bytes": handle.uploaded_bytes(checkpoint_id), "full_bytes": handle.full_bytes}


def measure_incremental(keys: int, value_bytes: int = 1024, changed_share: float = 0.01,
                        settings: MemorySettings | None = None, reads: int = 0) -> dict:
    """Two incremental checkpoints of ``keys`` keys of ``value_bytes`` each: the first, and one after
    ``changed_share`` of the keys changed; then ``reads`` random keys read back (in batches of 1,000)."""
    directory = tempfile.mkdtemp(prefix="chandy-rocksdb-bench-")
    backend = RocksDBKeyedStateBackend(128, key_group_range(128, 1, 0), os.path.join(directory, "db"),
                                       settings=settings, incremental=True, local_root=os.path.join(directory, "local"))
    sent: list = []
    snapshotter = Snapshotter(CheckpointStorage(f"file://{directory}/ck", "bench"), 0, sent.append)
    read_rate = None
    try:
        backend.get_state(ValueStateDescriptor("value"))
        started = time.perf_counter()
        batch = 10_000
        noise = random.Random(17)  # values that do not compress: the bytes stored are the bytes of state
        for first in range(0, keys, batch):
            numbers = range(first, min(keys, first + batch))
            backend.put_many("value", list(numbers), [noise.randbytes(value_bytes) for _ in numbers])
        fill_s = time.perf_counter() - started
        settled_s = _settle(backend)
        first_checkpoint = _checkpoint(snapshotter, sent, backend, 1)
        step = max(1, int(1 / changed_share))
        changed = list(range(0, keys, step))
        for first in range(0, len(changed), batch):
            part = changed[first:first + batch]
            backend.put_many("value", part, [noise.randbytes(value_bytes) for _ in part])
        second = _checkpoint(snapshotter, sent, backend, 2)
        if reads:
            sample = [noise.randrange(keys) for _ in range(reads)]
            started = time.perf_counter()
            for first in range(0, reads, 1000):
                found = backend.get_many("value", sample[first:first + 1000])
                assert all(value is not None for value in found)
            read_rate = round(reads / (time.perf_counter() - started))
    finally:
        snapshotter.close(60)
        backend.close()
        shutil.rmtree(directory, ignore_errors=True)
    return {"keys": keys, "value_bytes": value_bytes, "changed_share": changed_share, "fill_s": round(fill_s, 1),
            "settled_after_s": settled_s,
            "first": first_checkpoint, "after_change": second,
            "uploaded_share": round(second["uploaded_bytes"] / max(1, second["full_bytes"]), 4),
            "random_reads_per_s": read_rate, "peak_rss_bytes": peak_rss_bytes(),
            "memory": None if settings is None else {"block_cache_bytes": settings.block_cache_bytes,
                                                      "write_buffer_bytes": settings.write_buffer_bytes}}


def measure_heap_incremental(keys: int, value_bytes: int = 1024, changed_share: float = 0.01,
                             max_parallelism: int = 128, clustered: bool = False) -> dict:
    """Incremental heap checkpoints of ``keys`` keys: the first, and one after ``changed_share`` of the keys
    changed, spread over every key group, or ``clustered`` in that share of the key groups."""
    from runtime.keys.key_groups import assign_to_key_group
    from state_backends.heap import HeapKeyedStateBackend

    directory = tempfile.mkdtemp(prefix="chandy-heap-bench-")
    backend = HeapKeyedStateBackend(max_parallelism, key_group_range(max_parallelism, 1, 0), incremental=True,
                                    operator_uid="bench")
    sent: list = []
    snapshotter = Snapshotter(CheckpointStorage(f"file://{directory}/ck", "bench"), 0, sent.append)
    try:
        backend.get_state(ValueStateDescriptor("value"))
        noise = random.Random(17)
        for first in range(0, keys, 10_000):
            numbers = list(range(first, min(keys, first + 10_000)))
            backend.put_many("value", numbers, [noise.randbytes(value_bytes) for _ in numbers])
        first_checkpoint = _checkpoint(snapshotter, sent, backend, 1)
        if clustered:
            groups = max(1, round(max_parallelism * changed_share))
            changed = [key for key in range(keys) if assign_to_key_group(key, max_parallelism) < groups]
        else:
            changed = list(range(0, keys, max(1, int(1 / changed_share))))
        backend.put_many("value", changed, [noise.randbytes(value_bytes) for _ in changed])
        second = _checkpoint(snapshotter, sent, backend, 2)
    finally:
        snapshotter.close(60)
        shutil.rmtree(directory, ignore_errors=True)
    return {"keys": keys, "max_parallelism": max_parallelism, "changed_keys": len(changed), "clustered": clustered,
            "first": first_checkpoint, "after_change": second,
            "uploaded_share": round(second["uploaded_bytes"] / max(1, second["full_bytes"]), 4)}


def _settle(backend, timeout_s: float = 300.0) -> float | None:
    """Wait until RocksDB has no flush or compaction left to do (state built long ago, as in a job that runs):
    seconds waited, None past ``timeout_s``. Right after a bulk fill, compactions still rewrite files, and a
    checkpoint then uploads what they wrote."""
    started = time.perf_counter()
    while any(backend.background_work().values()):
        if time.perf_counter() - started > timeout_s:
            return None
        time.sleep(0.2)
    return round(time.perf_counter() - started, 1)


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory (Linux's VmHWM)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def measure_larger_than_memory(keys: int, block_cache_bytes: int = 256 << 20,
                               write_buffer_bytes: int = 128 << 20) -> dict:
    """:func:`measure_incremental` in a process of its own (its peak resident memory is the state backend's):
    1 KiB a key, the block cache and the memtables capped, random reads after."""
    code = ("import json; from benchmarks.rocksdb import measure_incremental; "
            "from state_backends.rocksdb import MemorySettings; "
            f"print(json.dumps(measure_incremental({keys}, settings=MemorySettings({block_cache_bytes}, "
            f"{write_buffer_bytes}, {min(32 << 20, write_buffer_bytes // 4)}), reads=100_000)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _shown(value, spec: str) -> str:
    """``value`` formatted by ``spec``, or "none" when it was not measured.

    >>> _shown(1234567, ","), _shown(None, ".1%")
    ('1,234,567', 'none')
    """
    return "none" if value is None else format(value, spec)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rocksdb", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs, measures nothing")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--large", action="store_true", help="also 10 GB of state on RocksDB (several minutes)")
    args = parser.parse_args(argv)

    from benchmarks.reporting import median_run, ratio, steadiness_verdict, write_report
    from benchmarks.session import spark_session
    from benchmarks.checkpoint_dip import run_checkpoint_dip
    from benchmarks.machine import cpu_steadiness, describe_machine
    from benchmarks.recovery import run_recovery
    from benchmarks.snapshot import measure_snapshot
    from benchmarks.spark_baseline import run_jvm_groupby_count, run_python_state_count
    from benchmarks.throughput import run_chandy_reference_job
    from state_backends import HashMapStateBackend
    from state_backends.rocksdb import EmbeddedRocksDBStateBackend

    steadiness = [cpu_steadiness()]
    state_keys = 20_000 if args.quick else 1_000_000
    incremental = measure_incremental(state_keys)
    heap = measure_snapshot(state_keys, value_bytes=1024)
    heap_incremental = [measure_heap_incremental(state_keys, max_parallelism=p, clustered=c)
                        for p, c in ((128, False), (128, True), (4096, False))]
    records = 50_000 if args.quick else 4_000_000
    repeats = args.repeats or (1 if args.quick else 2)
    with spark_session(args.parallelism) as spark:
        run_chandy_reference_job(spark, 10_000, args.keys, args.parallelism)  # warm-up
        backends = {"heap": HashMapStateBackend, "rocksdb": lambda: EmbeddedRocksDBStateBackend(True),
                    "heap-incremental": lambda: HashMapStateBackend(True)}
        runs: dict[str, list] = {name: [] for name in backends}
        for repeat in range(repeats):
            for name in (list(backends) if repeat % 2 == 0 else list(backends)[::-1]):  # alternated
                with tempfile.TemporaryDirectory(prefix="chandy-bench-ck-") as checkpoints:
                    row = run_chandy_reference_job(spark, records, args.keys, args.parallelism, checkpoints,
                                                   state_backend=backends[name]())
                row["variant"] += f"-{name}"
                runs[name].append(row)
        results = {name: median_run(rows) for name, rows in runs.items()}
        jvm = run_jvm_groupby_count(spark, args.keys, rows_per_batch=20_000 if args.quick else 200_000,
                                    seconds=6 if args.quick else 20)
        python_state = run_python_state_count(spark, args.keys, rows_per_batch=2_000 if args.quick else 20_000,
                                              seconds=15 if args.quick else 30)
        dips, recoveries = [], []
        for name, make in (("heap", HashMapStateBackend), ("rocksdb", lambda: EmbeddedRocksDBStateBackend(True))):
            # state_keys passes to fill the state, then 5 more: ~1 min on RocksDB, ~20 s on the heap
            dips.append(run_checkpoint_dip(spark, state_keys, 1024, 6, state_keys, args.parallelism, interval_s=5,
                                           state_backend=make()))
        for name, make in (("heap", HashMapStateBackend), ("rocksdb-local", lambda: EmbeddedRocksDBStateBackend(True)),
                           ("rocksdb-store", lambda: EmbeddedRocksDBStateBackend(True, local_recovery=False))):
            # quick: 20 passes over the keys, so that a checkpoint completes before the job ends (then a worker dies)
            row = run_recovery(spark, (20 if args.quick else 4) * state_keys, state_keys, args.parallelism,
                               state_backend=make(),
                               value_bytes=1024, kill_after_share=0.5, interval_ms=200 if args.quick else 2000)
            row["variant"] = name
            recoveries.append(row)
    large = measure_larger_than_memory(100_000 if args.quick else 10_000_000) if args.large else None
    steadiness.append(cpu_steadiness())
    report = {"benchmark": "rocksdb", "quick": args.quick, "machine": describe_machine(),
              "cpu_steadiness": {"before": steadiness[0], "after": steadiness[1],
                                 "verdict": steadiness_verdict(steadiness)},
              "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "incremental": incremental, "heap_snapshot": heap, "heap_incremental": heap_incremental,
              "checkpoint_dip": dips, "recovery": recoveries, "larger_than_memory": large,
              "results": [results["heap"], results["rocksdb"], results["heap-incremental"], jvm, python_state]}
    print(f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}")
    first, second = incremental["first"], incremental["after_change"]
    print(f"RocksDB, {state_keys:,} keys x 1 KiB, incremental checkpoints: first sync {first['sync_ms']} ms, async "
          f"{first['async_ms']} ms, {first['uploaded_bytes']:,} bytes; after {incremental['changed_share']:.0%} of "
          f"the keys changed: sync {second['sync_ms']} ms, async {second['async_ms']} ms, "
          f"{second['uploaded_bytes']:,} of {second['full_bytes']:,} bytes uploaded "
          f"({incremental['uploaded_share']:.1%})")
    print(f"heap full snapshot of the same state: sync {heap['sync_ms']} ms, async {heap['async_ms']} ms, "
          f"{heap['bytes']:,} bytes")
    for row in heap_incremental:
        second = row["after_change"]
        print(f"heap incremental, max parallelism {row['max_parallelism']}, {row['changed_keys']:,} keys changed "
              f"{'in 1% of the key groups' if row['clustered'] else 'across the key groups'}: sync "
              f"{second['sync_ms']} ms, async {second['async_ms']} ms, {second['uploaded_bytes']:,} of "
              f"{second['full_bytes']:,} bytes ({row['uploaded_share']:.1%})")
    for row in dips:  # a quick run may see no checkpoint at all: then its rates are None
        print(f"throughput while checkpointing {row['keys']:,} keys x 1 KiB every {row['interval_s']} s, "
              f"{row['state_backend']}: {_shown(row['rate_between_checkpoints'], ',')} records/s between "
              f"checkpoints, {_shown(row['rate_during_checkpoints'], ',')} during (dip {_shown(row['dip'], '.1%')}); "
              f"max sync {row['max_sync_ms']} ms, max async {row['max_async_ms']} ms")
    for row in recoveries:
        print(f"recovery after SIGKILL, {state_keys:,} keys x 1 KiB, {row['variant']}: first record after "
              f"{row['first_record_after_kill_s']} s, full rate ({_shown(row['full_rate'], ',')}/s) after "
              f"{row['full_rate_after_kill_s']} s")
    if large:
        first, second = large["first"], large["after_change"]
        memory = large["memory"]
        print(f"larger than memory, {large['keys']:,} keys x 1 KiB (block cache {memory['block_cache_bytes']:,} B,"
              f" memtables {memory['write_buffer_bytes']:,} B): filled in {large['fill_s']} s; first "
              f"checkpoint sync {first['sync_ms']} ms, async {first['async_ms']} ms; after 1% changed sync "
              f"{second['sync_ms']} ms, async {second['async_ms']} ms, {second['uploaded_bytes']:,} of "
              f"{second['full_bytes']:,} bytes; {large['random_reads_per_s']:,} random reads/s; peak resident "
              f"memory {large['peak_rss_bytes']:,} B")
    for row in report["results"]:
        versus = [ratio(row["records_per_s"], base["records_per_s"]) for base in (jvm, python_state)]
        text = ", ".join("n/a" if v is None else f"{v:.2f}x" for v in versus)
        print(f"{row['variant']:52} {row['records_per_s'] or 0:>12,}/s  (vs SSS JVM, vs SSS Python state on "
              f"RocksDB: {text}) exact={row['exact']}")
    write_report(args.out, "rocksdb", args.quick, report)
    return 0 if all(row["exact"] for row in report["results"][:3]) else 1


if __name__ == "__main__":
    sys.exit(main())
