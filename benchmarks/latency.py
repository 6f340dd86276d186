"""Event-to-sink latency at half of the measured peak rate.

Chandy: each record is stamped right after the source and measured when its running count reaches the
sink (checkpoints every second, exactly-once); a sample of every 8th record is kept.

Spark Structured Streaming (micro-batch, JVM groupBy count): the rows of a micro-batch arrive during the
interval before it starts and leave when it ends, so a row's latency lies between the batch's duration and
the batch's duration plus the previous interval. Percentiles are computed over that per-batch spread,
weighted by rows, from Spark's own progress reports (start time, duration, rows).
"""

from __future__ import annotations

import datetime
import random
import tempfile
import time

from benchmarks.spark_baseline import MIN_MEASURED_BATCHES, query_checkpoint_dir, run_for
from operators import KeyedProcessFunction, Sink, SinkWriter, ValueStateDescriptor
from operators.sources import SequenceSource
from runtime import StreamExecutionEnvironment

SAMPLE_EVERY = 8


class CountKeepingTimestamp(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value[0], n, value[1]


class _LatencyWriter(SinkWriter):
    def __init__(self):
        self.samples: list[float] = []
        self.seen = 0

    def write_batch(self, records: list) -> None:
        now = time.time()
        start = (-self.seen) % SAMPLE_EVERY
        self.samples.extend(now - r[2] for r in records[start::SAMPLE_EVERY])
        self.seen += len(records)

    def result(self):
        return self.samples


class LatencySink(Sink):
    name = "latency"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _LatencyWriter()

    def merge_results(self, results: list) -> list:
        return sorted(x for part in results for x in part)


def percentiles(sorted_ms: list[float]) -> dict:
    if not sorted_ms:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    pick = lambda q: sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]
    return {"p50_ms": round(pick(0.5), 1), "p99_ms": round(pick(0.99), 1), "max_ms": round(sorted_ms[-1], 1)}


def run_latency_job(spark, records_per_second: float, seconds: float, keys: int, parallelism: int, sink,
                    name: str = "benchmark-latency", paced: bool = True):
    """The latency job (a rate-limited source, each record stamped with its wall time, a running count per key,
    checkpoints every second) into ``sink``; its JobExecutionResult. ``paced=False``: the same number of records,
    as fast as the job takes them (its peak)."""
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    with tempfile.TemporaryDirectory(prefix="chandy-latency-ck-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        total = int(records_per_second * seconds)
        (env.from_source(SequenceSource(0, total - 1, records_per_second=records_per_second if paced else None),
                         "rate-limited")
            .map(lambda x: (x % keys, time.time()))
            .key_by(lambda r: r[0]).process(CountKeepingTimestamp())
            .sink_to(sink))
        return env.execute(name)


def run_chandy_latency(spark, records_per_second: float, seconds: float, keys: int, parallelism: int,
                       basis: str = "") -> dict:
    """``basis``: what the rate is a share of, for the report (half of the reference job's peak, say)."""
    result = run_latency_job(spark, records_per_second, seconds, keys, parallelism, LatencySink())
    (samples,) = result.sink_results.values()
    alignments = [s.alignment_ms for s in result.checkpoints]
    return {"variant": "chandy-record-api-checkpoints-1s", "rate": round(records_per_second), "basis": basis,
            "measured": bool(samples), "samples": len(samples), **percentiles([x * 1000 for x in samples]),
            "max_alignment_ms": max(alignments, default=None)}


def run_latency_job_peak(spark, records: int, keys: int, parallelism: int) -> float:
    """The latency job's own peak, records/s: ``records`` of it unpaced, over the wall time of ``execute()``.

    Its records are tuples stamped with their time, which cost more per record than the reference job's typed
    ints, so half of the reference job's peak is a larger share of this job's: the report gives latency at half
    of either."""
    started = time.perf_counter()
    run_latency_job(spark, records, 1, keys, parallelism, LatencySink(), "benchmark-latency-peak", paced=False)
    return records / (time.perf_counter() - started)


def run_sss_latency(spark, records_per_second: float, seconds: float, keys: int,
                    min_batches: int = MIN_MEASURED_BATCHES) -> dict:
    """``min_batches``: micro-batches with rows after the first, at the least (see :func:`run_for`)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    with query_checkpoint_dir("chandy-sss-latency-") as checkpoint:
        stream = spark.readStream.format("rate").option("rowsPerSecond", int(records_per_second)) \
            .option("numPartitions", 2).load()
        query = (stream.select((F.col("value") % keys).alias("k")).groupBy("k").count()
                 .writeStream.outputMode("update").format("noop").option("checkpointLocation", checkpoint).start())
        progress = run_for(query, seconds, min_batches)
    rng = random.Random(0)
    samples: list[float] = []
    previous_start = None
    for p in progress:
        start = datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        duration = p["durationMs"]["triggerExecution"] / 1000.0
        rows = p.get("numInputRows", 0)
        if previous_start is not None and rows:
            interval = start - previous_start
            samples.extend(duration + rng.random() * interval for _ in range(min(rows, 2000)))
        previous_start = start
    return {"variant": "spark-sss-jvm-groupby-count", "rate": round(records_per_second), "measured": bool(samples),
            "samples": len(samples), **percentiles(sorted(x * 1000 for x in samples))}
