"""Spark Structured Streaming running the reference job's logic, for ratios measured in the same run.

JVM variant: ``rate-micro-batch`` source -> ``value % keys`` -> ``groupBy().count()`` in update mode,
checkpointing every micro-batch (Structured Streaming always does). Throughput is rows over the summed
micro-batch execution time, after a warm-up batch. Both variants hand each micro-batch's updated counts to
the driver (a collect of at most ``keys`` rows), so their final counts are checked against the reference.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from typing import Iterator

MIN_MEASURED_BATCHES = 2  # after the warm-up batch: a rate needs at least this many (quick runs ask for 1)
PATIENCE = 10  # a busy machine may take this many times the planned duration to get there
MIN_PATIENCE_S = 60.0  # and at least this long: a session's first query with Python state takes over 10 s


@contextlib.contextmanager
def query_checkpoint_dir(prefix: str) -> Iterator[str]:
    """A temporary checkpoint directory for one Structured Streaming query, removed afterwards. A stopped query's
    last tasks may still be writing state files into it (its stream thread can end first: Spark logs a
    StackOverflowError there when our benchmarks stop their queries), so removal is tried again for up to 10 s, and
    whatever then remains is left in the system's temporary directory rather than failing the benchmark."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        for _ in range(40):
            try:
                shutil.rmtree(path)
                break
            except FileNotFoundError:
                break
            except OSError:  # a file appeared while the directory was being removed
                time.sleep(0.25)
        else:
            print(f"left {path}: a stopped Spark query kept writing into it", file=sys.stderr)


def _batches_with_input(query) -> int:
    return sum(1 for p in query.recentProgress if p.get("numInputRows"))


def run_for(query, seconds: float, min_batches: int = MIN_MEASURED_BATCHES) -> list:
    """Let a started query run ``seconds`` (longer if it has not yet completed a warm-up batch and
    ``min_batches`` more, so that a busy machine still yields a rate: up to ``PATIENCE`` times ``seconds``, and at
    least ``MIN_PATIENCE_S``), stop it, and return every progress report. A query that failed meanwhile measured
    nothing: it says why on stderr and returns no report (its batches before the failure are not a result)."""
    failure = None
    try:
        started = time.monotonic()
        patience = max(seconds * PATIENCE, MIN_PATIENCE_S)
        while query.isActive:
            elapsed = time.monotonic() - started
            if elapsed >= patience or (elapsed >= seconds and _batches_with_input(query) > min_batches):
                break
            time.sleep(0.25)
        if not query.isActive:
            failure = query.exception()
    finally:
        query.stop()
    if failure is not None:
        first_line = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
        print(f"the Spark Structured Streaming query failed, so it measured nothing: {first_line[:300]}",
              file=sys.stderr)
        return []
    return list(query.recentProgress)


def _rate(variant: str, progress: list) -> dict:
    """Rows over summed micro-batch time, skipping the first (warm-up) batch. A window with no batch after
    the warm-up one (a busy machine) measured nothing: ``measured`` is False and the rate None."""
    batches = [p for p in progress if p.get("numInputRows")][1:]
    rows = sum(p["numInputRows"] for p in batches)
    millis = sum(p["durationMs"]["triggerExecution"] for p in batches)
    return {
        "variant": variant,
        "measured": bool(rows and millis),
        "records": rows,
        "micro_batches": len(batches),
        "mean_batch_ms": round(millis / len(batches), 1) if batches else None,
        "records_per_s": round(rows / (millis / 1000)) if rows and millis else None,
    }


def _gatherer(updates: dict):
    def gather(batch, batch_id):
        updates[batch_id] = {row["k"]: row["count"] for row in batch.collect()}
    return gather


def _counts_are_exact(updates: dict, progress: list, keys: int) -> bool:
    """Final counts, from the micro-batches Spark reported as done, against ``value % keys`` over the
    consecutive values those batches read (a batch cut short by stop() may have reached the sink unreported).
    A window without a record checked nothing, so it is not exact."""
    reported = [p for p in progress if p.get("numInputRows")]
    final: dict = {}
    for p in sorted(reported, key=lambda p: p["batchId"]):
        final.update(updates.get(p["batchId"], {}))
    total = sum(p["numInputRows"] for p in reported)
    if total == 0:
        return False
    return final == {k: total // keys + (1 if k < total % keys else 0) for k in range(min(keys, total))}


def _result(variant: str, progress: list, updates: dict, keys: int) -> dict:
    """A baseline's result: its rate, and whether its counts were exact (never when it measured nothing)."""
    rate = _rate(variant, progress)
    return {**rate, "exact": rate["measured"] and _counts_are_exact(updates, progress, keys)}


def run_jvm_groupby_count(spark, keys: int, rows_per_batch: int, seconds: float,
                          min_batches: int = MIN_MEASURED_BATCHES) -> dict:
    """``min_batches``: micro-batches to measure after the warm-up one, at the least (see :func:`run_for`)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    updates: dict = {}
    with query_checkpoint_dir("chandy-sss-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                  .option("numPartitions", 2).load())
        query = (stream.select((F.col("value") % keys).alias("k")).groupBy("k").count()
                 .writeStream.outputMode("update").foreachBatch(_gatherer(updates))
                 .option("checkpointLocation", checkpoint).start())
        progress = run_for(query, seconds, min_batches)
    return _result("spark-sss-jvm-groupby-count", progress, updates, keys)


def _python_state_processor():
    """The reference job's per-key count as a transformWithStateInPandas StatefulProcessor (made lazily:
    pyspark's streaming classes need pandas, which only the benchmark installs)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class CountPerKey(StatefulProcessor):
        def init(self, handle):
            self.count = handle.getValueState("count", StructType([StructField("count", LongType())]))

        def handleInputRows(self, key, rows, timerValues):
            n = self.count.get()[0] if self.count.exists() else 0
            for frame in rows:
                n += len(frame)
            self.count.update((n,))
            yield pd.DataFrame({"k": [key[0]], "count": [n]})

        def close(self):
            pass

    return CountPerKey()


def run_python_state_count(spark, keys: int, rows_per_batch: int, seconds: float,
                           min_batches: int = MIN_MEASURED_BATCHES) -> dict:
    """Structured Streaming with Python state: transformWithStateInPandas on the RocksDB state store
    (``min_batches`` as in :func:`run_jvm_groupby_count`).

    Final counts are gathered per micro-batch (a small collect) and checked against the reference for the
    rows processed: the rate source's values are consecutive, so the expected counts are known.
    """
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    updates: dict = {}
    with query_checkpoint_dir("chandy-sss-py-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                  .option("numPartitions", 2).load().select((F.col("value") % keys).alias("k")))
        query = (stream.groupBy("k").transformWithStateInPandas(
                    statefulProcessor=_python_state_processor(), outputStructType="k long, count long",
                    outputMode="Update", timeMode="None")
                 .writeStream.outputMode("update").foreachBatch(_gatherer(updates))
                 .option("checkpointLocation", checkpoint).start())
        progress = run_for(query, seconds, min_batches)
    return _result("spark-sss-python-state-rocksdb", progress, updates, keys)
