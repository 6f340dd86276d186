"""The demo job: the reference job that the benchmarks also run, checked against a plain-Python answer.

    sequence source -> map(x % keys) -> key_by -> running count per key (keyed state) -> sink

with exactly-once checkpoints every second into ``--checkpoint-dir`` (``checkpoints`` under the current
directory; ``checkpoints/chandy-demo/chk-<n>`` each). Run it with ``python -m runtime.tools.demo`` (local Spark,
sized to the job), with ``chandy demo``, or on a cluster: ``spark-submit --master <url> --py-files chandy.zip
runtime/tools/demo.py --checkpoint-dir <storage every executor reaches>`` (``chandy pyfiles chandy.zip`` builds the
zip). It prints the time from ``execute()`` to the result, the steady rate (from the first record at the sink to
the last), the checkpoints, and whether the counts equal the reference.

>>> from operators import DiscardingSink
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> build_reference_job(env, records=1000, keys=10, sink=DiscardingSink())
>>> [node.name for node in env.get_job_graph("demo").operators]
['Sequence Source', 'modulo', 'count per key', 'Sink: discard']
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

from operators import KeyedProcessFunction, ValueStateDescriptor
from runtime.datastream.stream_execution_environment import StreamExecutionEnvironment
from runtime.driver.launcher import obtain_spark_session
from runtime.tools.count_sink import FinalCountSink
from runtime.types import Types

__all__ = ["CountPerKey", "final_counts", "build_reference_job", "main"]


class CountPerKey(KeyedProcessFunction):
    """A running count per key, kept in keyed state."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n


def final_counts(pairs) -> dict:
    """The last (largest) running count emitted per key.

    >>> final_counts([("a", 1), ("b", 1), ("a", 2)])
    {'a': 2, 'b': 1}
    """
    result: dict = {}
    for key, n in pairs:
        if n > result.get(key, 0):
            result[key] = n
    return result


def build_reference_job(env: StreamExecutionEnvironment, records: int, keys: int, sink) -> None:
    (env.from_sequence(0, records - 1)
        .map(lambda x: x % keys, output_type=Types.LONG()).name("modulo")
        .key_by(lambda x: x)
        .process(CountPerKey()).name("count per key").uid("count-per-key")
        .sink_to(sink))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chandy demo", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-dir", default="checkpoints",
                        help="where checkpoints go, every second (default: ./checkpoints)")
    args = parser.parse_args(argv)

    spark = obtain_spark_session(args.parallelism)  # started before the clock: its startup is not the job's
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(args.parallelism)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(args.checkpoint_dir)
    sink = FinalCountSink()
    build_reference_job(env, args.records, args.keys, sink)
    started = time.perf_counter()
    result = env.execute("chandy-demo")
    elapsed = time.perf_counter() - started
    (_, counts, first, last), = result.sink_results.values()
    expected = dict(collections.Counter(x % args.keys for x in range(args.records)))
    exact = counts == expected
    steady = f"{args.records / (last - first):,.0f} records/s" if last and last > first else "not measured"
    print(f"chandy demo: {args.records:,} records, {len(counts):,} keys, parallelism {args.parallelism}: "
          f"{elapsed:.1f} s from execute() to the result ({args.records / elapsed:,.0f} records/s end to end, "
          f"launch included); steady rate {steady} (first to last record at the sink)")
    checkpoints = result.checkpoints
    if checkpoints:
        newest = checkpoints[-1]
        print(f"checkpoints: {len(checkpoints)} completed, every 1 s, exactly once, in "
              f"{os.path.join(os.path.abspath(args.checkpoint_dir), 'chandy-demo')}; the last, "
              f"chk-{newest.checkpoint_id}, holds {newest.bytes:,} bytes of state")
    else:
        print("checkpoints: none completed (the job ended within its first second)")
    print("result: " + ("exact (matches the plain-Python reference)" if exact else "WRONG: differs from reference"))
    return 0 if exact else 1

if __name__ == "__main__":
    sys.exit(main())
