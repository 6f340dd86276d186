"""The windowed reference job, beside Spark Structured Streaming's windowed count.

Chandy: a sequence with event timestamps (1,000 events per ms of event time, 1% out of order by up to 1 s),
key = x % 10,000, 10 s tumbling event-time windows counting per key, bounded out-of-orderness 1 s,
checkpoints every second, parallelism 2. Its result is checked against a plain-Python reference.

Spark: ``rate-micro-batch`` rows with event time advancing 1 ms per 1,000 rows, ``withWatermark("1 second")``,
``groupBy(window(10 seconds), value % 10000).count()`` in append mode. Rate: rows over summed micro-batch time.

Latency, event time = wall clock: a window's result reaching the sink, measured from the window's end (its
watermark cannot pass it earlier: monotonous timestamps, no bound). Chandy's watermarks go out every 5 ms, so at
most 5 ms of that is waiting for the watermark; a Spark window closes in the micro-batch after the one that moved
its watermark past the end.
"""

from __future__ import annotations

import collections
import tempfile
import time

from benchmarks.latency import percentiles
from benchmarks.spark_baseline import MIN_MEASURED_BATCHES, _rate, query_checkpoint_dir, run_for
from operators import AggregateFunction, Sink, SinkWriter, TumblingEventTimeWindows, WindowFunction
from operators.sources import SequenceSource
from runtime import Duration, StreamExecutionEnvironment, WatermarkStrategy

KEYS = 10_000
WINDOW_MS = 10_000


def event_time(n: int) -> int:
    """1,000 events per ms; every 100th is up to 1 s late (by a spread of 0..999 ms).

    >>> event_time(5_001), event_time(5_100)
    (5, -895)
    """
    t = n // 1000
    return t - (n * 7919) % 1000 if n % 100 == 0 else t


def reference(records: int) -> dict:
    counts: collections.Counter = collections.Counter()
    for n in range(records):
        counts[(n % KEYS, event_time(n) // WINDOW_MS * WINDOW_MS)] += 1
    return counts


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class KeyAndWindow(WindowFunction):
    def apply(self, key, window, inputs):
        for count in inputs:
            yield key, window.start, count


class _WindowWriter(SinkWriter):
    """Keeps the counts and, per result, how long after its window's end (wall clock) it arrived."""

    def __init__(self):
        self.counts: dict = {}
        self.after_end_ms: list[float] = []
        self.first = self.last = None

    def write_batch(self, records: list) -> None:
        now = time.time()
        self.first = self.first or now
        self.last = now
        for key, start, count in records:
            self.counts[(key, start)] = self.counts.get((key, start), 0) + count
            self.after_end_ms.append(now * 1000 - (start + self.window_ms))

    def result(self):
        return self.counts, self.after_end_ms, self.first, self.last


class WindowSink(Sink):
    name = "windows"

    def __init__(self, window_ms: int):
        self.window_ms = window_ms

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        writer = _WindowWriter()
        writer.window_ms = self.window_ms
        return writer

    def merge_results(self, results: list):
        counts: dict = {}
        latencies: list = []
        for part, after_end, _, _ in results:
            counts.update(part)
            latencies.extend(after_end)
        return counts, sorted(latencies)


def run_chandy_windowed(spark, records: int, parallelism: int, checkpoint_dir: str | None, expected=None) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    if checkpoint_dir is not None:
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage(checkpoint_dir)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
                .with_timestamp_assigner(lambda n, _: event_time(n)))
    (env.from_source(SequenceSource(0, records - 1), strategy, "events")
        .key_by(lambda n: n % KEYS).window(TumblingEventTimeWindows.of(WINDOW_MS))
        .aggregate(Count(), window_function=KeyAndWindow())
        .sink_to(WindowSink(WINDOW_MS)))
    started = time.perf_counter()
    result = env.execute("benchmark-windows")
    elapsed = time.perf_counter() - started
    (counts, _), = result.sink_results.values()
    exact = counts == (expected if expected is not None else reference(records))
    return {"variant": "chandy-record-api-window-" + ("checkpoints-1s" if checkpoint_dir else "no-checkpoints"),
            "measured": elapsed > 0 and bool(counts), "exact": exact, "records": records, "wall_s": round(elapsed, 3),
            "records_per_s": round(records / elapsed), "checkpoints": len(result.checkpoints)}


def run_sss_windowed(spark, rows_per_batch: int, seconds: float, min_batches: int = MIN_MEASURED_BATCHES) -> dict:
    """``min_batches``: micro-batches to measure after the warm-up one, at the least (see :func:`run_for`)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    closed: dict = {}

    def gather(batch, batch_id):
        for row in batch.groupBy("start").agg(F.sum("count").alias("rows")).collect():
            closed[row["start"]] = closed.get(row["start"], 0) + row["rows"]

    with query_checkpoint_dir("chandy-sss-window-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
                  .option("numPartitions", 2).option("startTimestamp", 0)
                  .option("advanceMillisPerBatch", max(1, rows_per_batch // 1000)).load())
        counts = (stream.withWatermark("timestamp", "1 second")
                  .groupBy(F.window("timestamp", "10 seconds"), (F.col("value") % KEYS).alias("k")).count()
                  .select(F.col("window.start").cast("long").alias("start"), "k", "count"))
        query = (counts.writeStream.outputMode("append").foreachBatch(gather)
                 .option("checkpointLocation", checkpoint).start())
        progress = run_for(query, seconds, min_batches)
    rate = _rate("spark-sss-jvm-window-count", progress)
    # Every closed window holds all rows of its 10 s of event time: 10,000 ms x 1,000 rows. (A short run may close
    # none: then nothing was wrong, and closed_windows says how much was checked.)
    exact = all(rows == WINDOW_MS * 1000 for rows in closed.values())
    return {**rate, "exact": rate["measured"] and exact, "closed_windows": len(closed)}


def run_chandy_window_latency(spark, rate: float, seconds: float, parallelism: int) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.get_config().set_auto_watermark_interval(5)
    env.enable_checkpointing(1000)
    with tempfile.TemporaryDirectory(prefix="chandy-window-latency-") as checkpoints:
        env.get_checkpoint_config().set_checkpoint_storage(checkpoints)
        total = int(rate * seconds)
        strategy = (WatermarkStrategy.for_monotonous_timestamps()
                    .with_timestamp_assigner(lambda n, _: time.time_ns() // 1_000_000))
        (env.from_source(SequenceSource(0, total - 1, records_per_second=rate), strategy, "paced")
            .key_by(lambda n: n % KEYS).window(TumblingEventTimeWindows.of(1000))
            .aggregate(Count(), window_function=KeyAndWindow())
            .sink_to(WindowSink(1000)))
        result = env.execute("benchmark-window-latency")
    (_, after_end), = result.sink_results.values()
    # The last window fires at the end of the input, not because time passed its end: leave it out.
    samples = [x for x in after_end if x < 900]
    return {"variant": "chandy-window-1s-watermark-5ms", "rate": round(rate), "measured": bool(samples),
            "samples": len(samples), **percentiles(samples)}


def run_sss_window_latency(spark, rate: float, seconds: float, min_batches: int = MIN_MEASURED_BATCHES) -> dict:
    """``min_batches``: micro-batches with rows after the first, at the least (see :func:`run_for`)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    samples: list[float] = []

    def gather(batch, batch_id):
        now_ms = time.time() * 1000
        for row in batch.select("end").distinct().collect():
            samples.append(now_ms - row["end"])

    with query_checkpoint_dir("chandy-sss-window-latency-") as checkpoint:
        stream = spark.readStream.format("rate").option("rowsPerSecond", int(rate)).option("numPartitions", 2).load()
        counts = (stream.withWatermark("timestamp", "0 seconds")
                  .groupBy(F.window("timestamp", "1 second"), (F.col("value") % KEYS).alias("k")).count()
                  .select((F.col("window.end").cast("double") * 1000).alias("end"), "k", "count"))
        query = (counts.writeStream.outputMode("append").foreachBatch(gather)
                 .option("checkpointLocation", checkpoint).start())
        run_for(query, seconds, min_batches)
    return {"variant": "spark-sss-window-1s-watermark-0s", "rate": round(rate), "measured": bool(samples),
            "samples": len(samples), **percentiles(sorted(samples))}
