"""What every benchmark's report shares: the median of repeated runs, ratios against a baseline, the header with
the machine and its steadiness, and the JSON file it is written to.

>>> format_ratio(ratio(250, 100)), steadiness_verdict([{"loop_ms_min": 50, "loop_ms_max": 55}])
('2.50x', 'steady')
"""

from __future__ import annotations

import datetime
import json
import os
import statistics

__all__ = ["describe_run", "format_rate", "format_ratio", "median_run", "paired_overhead", "ratio", "report_header",
           "results_ok", "steadiness_verdict", "write_report"]


def median_run(runs: list[dict]) -> dict:
    """The run with the median rate among those that measured something, with every run's rate attached;
    exact when every run that measured was. When none measured, the first run (``measured`` False, rate None).

    >>> runs = [{"records_per_s": r, "measured": r is not None, "exact": r is not None} for r in (300, None, 100)]
    >>> median = median_run(runs)
    >>> median["records_per_s"], median["measured"], median["exact"], median["all_records_per_s"]
    (300, True, True, [300, None, 100])
    >>> median_run([runs[1]])["records_per_s"], median_run([runs[1]])["exact"]
    (None, False)
    """
    measured = [r for r in runs if r["measured"] and r["records_per_s"] is not None]
    ordered = sorted(measured, key=lambda r: r["records_per_s"])
    median = dict(ordered[len(ordered) // 2] if ordered else runs[0])
    median["all_records_per_s"] = [r["records_per_s"] for r in runs]
    median["measured"] = bool(measured)
    median["exact"] = bool(measured) and all(r["exact"] for r in measured)
    return median


def paired_overhead(plain: list[dict], checkpointed: list[dict]) -> float | None:
    """The median over run pairs of ``1 - rate with checkpoints / rate without``. Each pair ran back to back,
    so a drift of the machine's speed between pairs (2x at times on a shared VM) cancels out; a ratio of
    the two medians would take them from different minutes. Pairs with a run that measured nothing are left
    out; None when no pair is left.

    >>> rates = lambda *r: [{"records_per_s": x} for x in r]
    >>> paired_overhead(rates(100, 50, 80), rates(98, 49, 60))
    0.02
    >>> paired_overhead(rates(100, None), rates(None, 49)) is None
    True
    """
    ratios = [1 - c["records_per_s"] / p["records_per_s"] for p, c in zip(plain, checkpointed)
              if p["records_per_s"] and c["records_per_s"] is not None]
    return round(statistics.median(ratios), 4) if ratios else None


def write_report(out: str, name: str, quick: bool, report: dict) -> str:
    """Write ``report`` as ``<out>/<name>-[quick-]<local time>.json``, say where, and return the path."""
    os.makedirs(out, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    path = os.path.join(out, f"{name}-{'quick-' if quick else ''}{stamp}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"written: {path}")
    return path


def ratio(rate: float | None, baseline: float | None) -> float | None:
    """``rate / baseline``, or None when either side measured nothing.

    >>> ratio(300, 100), ratio(300, None), ratio(None, 100), ratio(300, 0)
    (3.0, None, None, None)
    """
    return rate / baseline if rate is not None and baseline else None


def format_ratio(value: float | None) -> str:
    """
    >>> format_ratio(ratio(250, 100)), format_ratio(ratio(250, None))
    ('2.50x', 'n/a')
    """
    return "n/a" if value is None else f"{value:.2f}x"


def format_rate(row: dict) -> str:
    """A variant's rate for the table: "measured nothing" when it did (a busy machine, a window too short).

    >>> format_rate({"measured": True, "records_per_s": 1234567}), format_rate({"measured": False})
    ('1,234,567', 'measured nothing')
    """
    return f"{row['records_per_s']:,}" if row.get("measured") and row.get("records_per_s") is not None \
        else "measured nothing"


def results_ok(results: list[dict]) -> bool:
    """Whether the run succeeded: every variant that measured was exact, and every Chandy variant measured
    (Spark's baselines may measure nothing on a busy machine: reported, not a failure).

    >>> ok = {"variant": "chandy-x", "measured": True, "exact": True}
    >>> spark = {"variant": "spark-sss-x", "measured": False, "exact": False}
    >>> results_ok([ok, spark]), results_ok([ok, {**spark, "variant": "chandy-y"}])
    (True, False)
    >>> results_ok([{**ok, "exact": False}])
    False
    """
    return all(row["exact"] if row["measured"] else not row["variant"].startswith("chandy-") for row in results)


def report_header(name: str, quick: bool, steadiness: list[dict]) -> dict:
    """The fields every benchmark's report opens with: what ran, on which machine, when, and how steady the machine
    was between ``steadiness``'s first and last samples (``cpu_steadiness()`` before and after the runs)."""
    from benchmarks.machine import describe_machine

    return {"benchmark": name, "quick": quick, "machine": describe_machine(),
            "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu_steadiness": {"before": steadiness[0], "after": steadiness[-1],
                               "verdict": steadiness_verdict(steadiness)}}


def describe_run(report: dict) -> str:
    """The line a benchmark prints first: the machine and its steadiness."""
    return f"machine: {report['machine']}; steadiness: {report['cpu_steadiness']['verdict']}"


def steadiness_verdict(samples: list[dict]) -> str:
    """Whether a fixed loop took about as long before the run as after it, i.e. whether rates measured in
    between can be compared with each other."""
    fastest = min(s["loop_ms_min"] for s in samples)
    slowest = max(s["loop_ms_max"] for s in samples)
    if slowest <= 1.2 * fastest:
        return "steady"
    return f"NOT steady: {slowest / fastest:.1f}x spread, the machine's speed varied and the rates with it"
