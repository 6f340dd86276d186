"""How the benchmarks report a variant that measured nothing (a busy machine): not exact, no rate, "measured
nothing" in the table, "n/a" for ratios against it. Pure: no Spark."""

from __future__ import annotations

import pytest

from benchmarks.reporting import format_rate, format_ratio, median_run, paired_overhead, ratio, results_ok
from benchmarks.spark_baseline import _counts_are_exact, _rate, _result


def batch(batch_id, rows, millis=100):
    return {"batchId": batch_id, "numInputRows": rows, "durationMs": {"triggerExecution": millis}}


# -- Spark baselines ------------------------------------------------------------------------------------


@pytest.mark.parametrize("progress", [
    [],  # not even a warm-up batch in the window
    [batch(0, 0), batch(1, 0)],  # batches without input
    [batch(0, 20_000)],  # only the warm-up batch, which the rate skips
], ids=["no batch", "empty batches", "warm-up only"])
def test_a_baseline_window_that_measured_nothing_is_not_exact_and_has_no_rate(progress):
    updates = {0: {k: 10_000 for k in range(2)}} if progress and progress[0]["numInputRows"] else {}
    result = _result("spark-sss-jvm-groupby-count", progress, updates, keys=2)
    assert result["measured"] is False and result["exact"] is False and result["records_per_s"] is None
    assert result["records"] == 0 and result["micro_batches"] == 0 and result["mean_batch_ms"] is None


def test_empty_counts_of_an_empty_window_are_not_exact():
    assert _counts_are_exact({}, [], keys=10) is False  # {} == {} checked nothing
    assert _counts_are_exact({}, [batch(0, 0)], keys=10) is False


def test_a_baseline_that_measured_is_exact_with_a_rate():
    progress = [batch(0, 4), batch(1, 6, millis=200), batch(2, 4, millis=300)]
    updates = {0: {0: 2, 1: 2}, 1: {0: 5, 1: 5}, 2: {0: 7, 1: 7}}
    result = _result("spark-sss-jvm-groupby-count", progress, updates, keys=2)
    assert result["measured"] is True and result["exact"] is True
    assert result["records"] == 10 and result["micro_batches"] == 2 and result["records_per_s"] == 20
    wrong = _result("v", progress, {**updates, 2: {0: 8, 1: 6}}, keys=2)
    assert wrong["measured"] is True and wrong["exact"] is False


def test_a_batch_too_fast_to_time_measured_nothing():
    rate = _rate("v", [batch(0, 5), batch(1, 5, millis=0)])
    assert rate["measured"] is False and rate["records_per_s"] is None


# -- medians, ratios, the table and the exit status --------------------------------------------------------


def run(rate, exact=True):
    return {"variant": "chandy-record-api-no-checkpoints", "measured": rate is not None,
            "exact": exact and rate is not None, "records_per_s": rate}


def test_median_run_skips_runs_that_measured_nothing():
    median = median_run([run(300), run(None), run(100), run(200)])
    assert median["records_per_s"] == 200 and median["measured"] is True and median["exact"] is True
    assert median["all_records_per_s"] == [300, None, 100, 200]


def test_median_run_of_runs_that_all_measured_nothing():
    median = median_run([run(None), run(None)])
    assert median["measured"] is False and median["exact"] is False and median["records_per_s"] is None
    assert median["all_records_per_s"] == [None, None]


def test_median_run_is_inexact_when_a_measured_run_was():
    assert median_run([run(300), run(100, exact=False), run(None)])["exact"] is False


def test_paired_overhead_leaves_out_pairs_that_measured_nothing():
    assert paired_overhead([run(100), run(None), run(80)], [run(90), run(50), run(None)]) == 0.1
    assert paired_overhead([run(None)], [run(50)]) is None


def test_ratios_against_an_unmeasured_baseline_are_none_and_printed_as_n_a():
    unmeasured = _result("spark-sss-jvm-groupby-count", [], {}, keys=2)
    assert ratio(1_000_000, unmeasured["records_per_s"]) is None
    assert format_ratio(ratio(1_000_000, unmeasured["records_per_s"])) == "n/a"
    assert format_ratio(ratio(None, 500_000)) == "n/a"
    assert format_ratio(ratio(1_000_000, 400_000)) == "2.50x"


def test_the_table_says_measured_nothing():
    assert format_rate(_result("spark-sss-python-state-rocksdb", [], {}, keys=2)) == "measured nothing"
    assert format_rate(run(None)) == "measured nothing"
    assert format_rate(run(1_234_567)) == "1,234,567"


def test_an_unmeasured_spark_baseline_does_not_fail_the_run_but_an_unmeasured_chandy_variant_does():
    spark = _result("spark-sss-jvm-groupby-count", [], {}, keys=2)
    assert results_ok([run(1000), spark]) is True
    assert results_ok([run(1000), run(None)]) is False  # Chandy's own variants must measure
    assert results_ok([run(1000, exact=False), spark]) is False


class _FailedQuery:
    """A streaming query whose stream thread died after two batches (as one did with a StackOverflowError)."""

    isActive = False
    recentProgress = [batch(0, 20_000), batch(1, 20_000), batch(2, 20_000)]

    def __init__(self):
        self.stopped = False

    def exception(self):
        return RuntimeError("java.lang.StackOverflowError\n\tat java.util.regex.Pattern$Loop.match")

    def stop(self):
        self.stopped = True


def test_a_baseline_whose_query_failed_measured_nothing_and_says_why(capsys):
    from benchmarks.spark_baseline import run_for

    query = _FailedQuery()
    progress = run_for(query, seconds=1)
    assert progress == [] and query.stopped
    assert _rate("spark-sss-jvm-window-count", progress)["measured"] is False
    assert "query failed, so it measured nothing: java.lang.StackOverflowError" in capsys.readouterr().err
