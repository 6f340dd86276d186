"""The benchmarks' quick mode runs and reports well-formed, exact results (timings are not asserted).

The shape is asserted, not that a busy machine produced a rate: a Spark baseline may measure nothing in its
window (then it says so: not exact, no rate); Chandy's own variants must always measure, and exactly."""

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


CHANDY_VARIANTS = {"chandy-record-api-no-checkpoints", "chandy-record-api-checkpoints-1s",
                   "chandy-columnar-no-checkpoints", "chandy-columnar-checkpoints-1s",
                   "chandy-record-api-checkpoints-1s-unaligned"}


def test_quick_benchmark_runs_and_every_measured_variant_is_exact(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    (path,) = glob.glob(str(tmp_path / "throughput-quick-*.json"))
    report = json.load(open(path))
    assert report["machine"]["cores"] and report["machine"]["pyspark"]
    variants = {row["variant"]: row for row in report["results"]}
    assert set(variants) == CHANDY_VARIANTS | {"spark-sss-jvm-groupby-count", "spark-sss-python-state-rocksdb"}
    for row in report["results"]:
        assert {"measured", "exact", "records_per_s"} <= set(row), row["variant"]
        if row["measured"]:  # it computed exactly the reference's counts
            assert row["exact"] is True and row["records_per_s"] > 0, row
        else:  # a baseline that saw no records in its window on a busy machine says so
            assert row["exact"] is False and row["records_per_s"] is None, row
            assert any(line.startswith(row["variant"]) and "measured nothing" in line
                       for line in out.stdout.splitlines()), out.stdout
    assert all(variants[v]["measured"] for v in CHANDY_VARIANTS), "Chandy's own variants always measure"
    assert [row["variant"] for row in report["latency"]] == ["chandy-record-api-checkpoints-1s",
                                                             "chandy-record-api-checkpoints-1s",
                                                             "spark-sss-jvm-groupby-count",
                                                             "chandy-record-api-checkpoints-1s"]
    assert report["latency"][0]["rate"] > report["latency"][1]["rate"], "half of the peak, then a quarter"
    own = report["latency"][3]
    assert own["basis"].startswith("half of its own peak") and own["rate"] > 0 and own["measured"], own
    assert f"({own['basis']})" in out.stdout
    assert all(isinstance(row["max_alignment_ms"], (int, float)) for row in report["latency"][:2])
    checkpointed = variants["chandy-record-api-checkpoints-1s"]  # quick runs may end before the first checkpoint
    assert checkpointed["median_alignment_ms"] is None if checkpointed["checkpoints"] == 0 \
        else isinstance(checkpointed["median_alignment_ms"], (int, float))
    assert 0 < report["cpu_steadiness"]["before"]["loop_ms_min"] <= report["cpu_steadiness"]["before"]["loop_ms_max"]
    assert report["cpu_steadiness"]["verdict"].startswith(("steady", "NOT steady"))
    assert isinstance(report["checkpoint_overhead"], float) and report["checkpoint_overhead"] < 1
    for row in report["latency"]:
        assert row["measured"] is (row["samples"] > 0)
        if row["measured"]:
            assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], row
        else:
            assert row["p50_ms"] is row["p99_ms"] is row["max_ms"] is None, row
    assert report["latency"][0]["measured"] and report["latency"][1]["measured"], "Chandy's latency is measured"
    assert [s["keys"] for s in report["snapshots"]] == [10_000, 100_000, 1_000, 10_000]
    assert report["recovery"]["restarts"] == 1 and report["recovery"]["first_record_after_kill_s"] > 0
    dip, rocksdb_dip = report["checkpoint_dip"]
    assert dip["state_backend"].startswith("HashMapStateBackend")
    assert rocksdb_dip["state_backend"].startswith("EmbeddedRocksDBStateBackend")
    for row in (dip, rocksdb_dip):
        assert row["checkpoints"] >= 1 and row["state_bytes"] > 10_000 * 1024, row
        assert row["buckets_during"] > 0 and row["buckets_between"] > 0, row
        assert isinstance(row["lost_share"], float), "what checkpoints took of the job's capacity is measured"
    assert dip["pickle_core_s"] > 0 and dip["write_core_s"] > 0 and 0 < dip["dip_floor"] < 1
    assert rocksdb_dip["dip_floor"] is None, "the floor is the heap's (pickling), not RocksDB's"
    assert "EmbeddedRocksDBStateBackend" in out.stdout and "bytes of state checkpointed every" in out.stdout
    assert "vs SSS JVM" in out.stdout
    plain, debloated, unaligned, both, switching = report["backpressure"]
    assert switching["variant"] == "aligned, unaligned after 300 ms, buffer debloating (1 s)"
    assert "no debloating" in plain["variant"] and "debloating (1 s)" in debloated["variant"]
    assert unaligned["variant"].startswith("unaligned") and both["variant"] == "unaligned, buffer debloating (1 s)"
    assert all(1 <= row["checkpoints"] <= row["triggered"] for row in report["backpressure"]), \
        "each variant's window lasts until a checkpoint completed under backpressure"
    assert plain["max_persisted_bytes"] == 0, "aligned checkpoints store no records in flight"
    (savepoint,) = report["savepoints"]
    assert savepoint["savepoint_bytes"] > savepoint["state_bytes"] > 0
    startup = report["startup"]  # execute() to the first record at the sink, and its parts; SSS's first output
    assert startup["exact"] and startup["parts"]["total"]["runs"] == 2 and startup["parts"]["total"]["median_ms"] > 0
    assert startup["parts"]["rendezvous"]["runs"] == 2 and len(startup["sss"]["runs"]) == 1
    assert "execute() to the first record at the sink" in out.stdout
    batch, streaming = report["batch"]["results"]
    assert batch["exact"] is streaming["exact"] is True
    assert batch["records_emitted"] == 1000 and streaming["records_emitted"] == streaming["records"], \
        "batch mode emits each key's final value only; streaming mode every running value"
    assert batch["checkpoints"] == 0
