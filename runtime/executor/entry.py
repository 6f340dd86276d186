"""The function Spark runs in every barrier task of a job attempt: load the job, run the slot, return results.

A job that cannot even be loaded on the executor (its functions need a module the executor lacks) is
reported to the driver before the task raises, with the fix in the message.
"""

from __future__ import annotations

import logging
import pickle
import traceback

import cloudpickle

from runtime.executor.executor_stdout import printing_to_the_executors_stdout
from runtime.executor.slot import SlotRunner, report_before_registering
from runtime.ids import Attempt, SlotIndex, SubtaskIndex
from runtime.network.security import ConnectionSecurity
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


def barrier_task(payload: bytes, coordinator: tuple[str, int], security: ConnectionSecurity, attempt: Attempt,
                 restore_payload: bytes | None = None, stop_sources: StopSources | None = None):
    """The function Spark runs in every barrier task: ``rdd.barrier().mapPartitions(barrier_task(...))``.
    ``security`` (the attempt's secret, TLS material) travels inside the task, over Spark's own channel.
    ``stop_sources``: the job is stopping with a savepoint, so its sources read nothing in this attempt."""

    def run(_partition):
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        slot = SlotIndex(context.partitionId())
        host = context.getTaskInfos()[slot].address.rsplit(":", 1)[0]
        try:
            graph = cloudpickle.loads(payload)
            restore_storage, restore = pickle.loads(restore_payload) if restore_payload else (None, None)
        except Exception as exc:
            _report_unloadable_job(coordinator, security, attempt, slot, exc)
            raise
        with printing_to_the_executors_stdout():  # as Flink's TaskManagers print, not to Spark's stderr
            results = SlotRunner(graph, coordinator, attempt, slot, host, security, restore, restore_storage,
                                 stop_sources).run()
        if results is not None:  # None: cancelled
            yield cloudpickle.dumps(results)

    return run
