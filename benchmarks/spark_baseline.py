"""Spark Structured Streaming running the reference job's logic, for ratios measured in the same run.

JVM variant: ``rate-micro-batch`` source -> ``value % keys`` -> ``groupBy().count()`` in update mode to a
``noop`` sink, checkpointing every micro-batch (Structured Streaming always does). Throughput is rows
over the summed micro-batch execution time, after a warm-up batch.
"""

from __future__ import annotations

import tempfile
import time


def run_jvm_groupby_count(spark, keys: int, rows_per_batch: int, seconds: float) -> dict:
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    with tempfile.TemporaryDirectory(prefix="chandy-sss-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                  .option("numPartitions", 2).load())
        query = (stream.select((F.col("value") % keys).alias("k")).groupBy("k").count()
                 .writeStream.outputMode("update").format("noop")
                 .option("checkpointLocation", checkpoint).start())
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and query.isActive:
                time.sleep(0.25)
            progress = list(query.recentProgress)
        finally:
            query.stop()
    batches = [p for p in progress if p.get("numInputRows")][1:]  # the first batch warms the JVM up
    rows = sum(p["numInputRows"] for p in batches)
    millis = sum(p["durationMs"]["triggerExecution"] for p in batches)
    return {
        "variant": "spark-sss-jvm-groupby-count",
        "records": rows,
        "micro_batches": len(batches),
        "mean_batch_ms": round(millis / len(batches), 1) if batches else None,
        "records_per_s": round(rows / (millis / 1000)) if millis else None,
    }
