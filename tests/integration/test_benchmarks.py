"""The benchmarks' quick mode runs and reports well-formed, exact results (timings are not asserted)."""

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_benchmark_runs_and_every_variant_is_exact(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    (path,) = glob.glob(str(tmp_path / "throughput-quick-*.json"))
    report = json.load(open(path))
    assert report["machine"]["cores"] and report["machine"]["pyspark"]
    variants = {row["variant"]: row for row in report["results"]}
    assert set(variants) == {"chandy-record-api-no-checkpoints", "chandy-record-api-checkpoints-1s",
                             "chandy-columnar-no-checkpoints", "chandy-columnar-checkpoints-1s",
                             "spark-sss-jvm-groupby-count", "spark-sss-python-state-rocksdb"}
    # every variant computed exactly the reference's counts
    assert all(row["exact"] is True for row in report["results"])
    assert all(row["records_per_s"] > 0 for row in report["results"])
    assert [row["variant"] for row in report["latency"]] == ["chandy-record-api-checkpoints-1s",
                                                             "chandy-record-api-checkpoints-1s",
                                                             "spark-sss-jvm-groupby-count"]
    assert report["latency"][0]["rate"] > report["latency"][1]["rate"], "half of the peak, then a quarter"
    assert all(row["max_alignment_ms"] >= 0 for row in report["latency"][:2])
    checkpointed = variants["chandy-record-api-checkpoints-1s"]  # quick runs may end before the first checkpoint
    assert checkpointed["median_alignment_ms"] is None if checkpointed["checkpoints"] == 0 \
        else checkpointed["median_alignment_ms"] >= 0
    assert 0 < report["cpu_steadiness"]["before"]["loop_ms_min"] <= report["cpu_steadiness"]["before"]["loop_ms_max"]
    assert report["cpu_steadiness"]["verdict"].startswith(("steady", "NOT steady"))
    assert isinstance(report["checkpoint_overhead"], float) and report["checkpoint_overhead"] < 1
    assert all(row["samples"] > 0 and row["p50_ms"] <= row["p99_ms"] <= row["max_ms"] for row in report["latency"])
    assert [s["keys"] for s in report["snapshots"]] == [10_000, 100_000, 1_000, 10_000]
    assert report["recovery"]["restarts"] == 1 and report["recovery"]["first_record_after_kill_s"] > 0
    (dip,) = report["checkpoint_dip"]
    assert dip["checkpoints"] >= 1 and dip["state_bytes"] > 10_000 * 1024
    assert dip["buckets_during"] > 0 and dip["buckets_between"] > 0
    assert "vs SSS JVM" in out.stdout
