"""Operator test harnesses: unit-test a function in the operator a job runs it in, without Spark or a cluster.

Python's counterpart of Flink's operator test harnesses. A harness declares the operator on a stream and takes
the one the job graph builds, then drives it as a subtask does: feed records with timestamps and watermarks, move
processing time, read the output, the side outputs and the watermarks, snapshot, and restore into a new harness
at the same or another parallelism. :class:`OperatorHarness` drives operators of streams that are not keyed,
:class:`KeyedOperatorHarness` keyed ones (``process``, ``reduce``, windows).

>>> from runtime.testing import KeyedOperatorHarness
>>> from operators.functions import KeyedProcessFunction
>>> class Timeout(KeyedProcessFunction):   # a key silent for 1 s of processing time times out
...     def process_element(self, value, ctx):
...         ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1000)
...     def on_timer(self, timestamp, ctx):
...         yield f"{ctx.get_current_key()} timed out at {timestamp}"
>>> harness = KeyedOperatorHarness.for_process_function(Timeout(), key_selector=lambda r: r)
>>> harness.open(); harness.process_element("sensor-1")
>>> harness.set_processing_time(999); harness.output()
[]
>>> harness.set_processing_time(1000); harness.output()
['sensor-1 timed out at 1000']
"""

from runtime.testing.errors import HarnessError
from runtime.testing.harness import Lifecycle, OperatorHarness
from runtime.testing.keyed import KeyedOperatorHarness
from runtime.testing.snapshots import HarnessSnapshot

__all__ = ["OperatorHarness", "KeyedOperatorHarness", "HarnessSnapshot", "HarnessError", "Lifecycle"]
