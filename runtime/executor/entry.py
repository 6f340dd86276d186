"""The function Spark runs in every barrier task of a job attempt: load the job, run the slot, return results.

A job that cannot even be loaded on the executor (its functions need a module the executor lacks) is
reported to the driver before the task raises, with the fix in the message.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
import traceback

import cloudpickle

from runtime.executor.cpu_affinity import allowed_cpus, cpu_for_slot, pinned_to
from runtime.executor.executor_stdout import printing_to_the_executors_stdout
from runtime.executor.slot import SlotRunner, report_before_registering
from runtime.ids import Attempt, SlotIndex, SubtaskIndex
from runtime.network.security import ConnectionSecurity
from runtime.protocol import startup as marks
from runtime.protocol.messages import FailurePhase, SlotFailed, StopSources

__all__ = ["barrier_task"]

log = logging.getLogger(__name__)


def _report_unloadable_job(coordinator: tuple[str, int], security: ConnectionSecurity, attempt: Attempt,
                           slot: SlotIndex, exc: BaseException) -> None:
    """The job's functions do not load here (usually: a module the driver has and the executor lacks)."""
    message = (f"the job could not be loaded on the executor: {type(exc).__name__}: {exc}. Modules your "
               "functions use must exist on the executors too: ship them with spark-submit --py-files "
               "(or SparkContext.addPyFile), or install them there.")
    # A module missing here is missing on every attempt: restarting cannot help.
    report_before_registering(coordinator, security, SlotFailed(
        attempt, slot, None, None, SubtaskIndex(slot), type(exc).__name__, message,
        "".join(traceback.format_exception(exc)), retryable=False, phase=FailurePhase.LOAD))


def process_started_at() -> float | None:
    """When this process started (a Python worker forked for the task, or long before when Spark reused it), in
    ``time.time()`` seconds to a clock tick (10 ms); None where ``/proc`` does not say (not Linux)."""
    try:
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        with open(f"/proc/{os.getpid()}/stat") as f:
            # field 22, the start time in clock ticks since boot; the name (field 2) may hold spaces: skip past it
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def barrier_task(payload: bytes, coordinator: tuple[str, int], security: ConnectionSecurity, attempt: Attempt,
                 restore_payload: bytes | None = None, stop_sources: StopSources | None = None):
    """The function Spark runs in every barrier task: ``rdd.barrier().mapPartitions(barrier_task(...))``.
    ``security`` (the attempt's secret, TLS material) travels inside the task, over Spark's own channel.
    ``stop_sources``: the job is stopping with a savepoint, so its sources read nothing in this attempt."""

    def run(_partition):
        startup = {marks.TASK_STARTED: time.time()}
        worker_started = process_started_at()
        if worker_started is not None:
            startup[marks.WORKER_STARTED] = worker_started
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        slot = SlotIndex(context.partitionId())
        addresses = [info.address for info in context.getTaskInfos()]
        host = addresses[slot].rsplit(":", 1)[0]
        try:
            graph = cloudpickle.loads(payload)
            restore_storage, restore = pickle.loads(restore_payload) if restore_payload else (None, None)
        except Exception as exc:
            _report_unloadable_job(coordinator, security, attempt, slot, exc)
            raise
        startup[marks.LOADED] = time.time()
        colocated = [i for i, address in enumerate(addresses) if address == addresses[slot]]  # this executor's
        cpu = cpu_for_slot(graph.cpu_affinity, colocated.index(slot), len(colocated), allowed_cpus())
        with printing_to_the_executors_stdout(), pinned_to(cpu):  # print as Flink's TaskManagers do, not to stderr
            results = SlotRunner(graph, coordinator, attempt, slot, host, security, restore, restore_storage,
                                 stop_sources, startup).run()
        if results is not None:  # None: cancelled
            yield cloudpickle.dumps(results)

    return run
