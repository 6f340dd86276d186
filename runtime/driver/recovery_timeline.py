"""A restart's timeline: from a failure to the first record at a sink again, in phases (benchmarks.recovery's).

The job master marks each step of handling a failed attempt on the wall clock (``time.time()``, comparable with the
slots' marks on one machine); the restarted attempt's slots then mark their start-up as any attempt's do
(:mod:`runtime.protocol.startup`). The phases between the marks add up to the total, each ending at a milestone:

- failure noticed: from the failure (a benchmark knows when it killed a worker; else the notice itself) to the job
  master taking the first event that tells of it (a control connection closed, a slot's report, Spark's error);
- failure grace: waiting for more reports, since a peer's lost connection can overtake the real cause
  (:data:`runtime.driver.job.FAILURE_GRACE_S`; an operator's own error ends it at once);
- stage ended: the slots told to cancel, Spark's barrier stage cancelled and its job returned;
- slots disconnected: every slot's control connection closed (the slots' sockets are closed last);
- restart decision: the restart strategy's delay, and the checkpoint to restore chosen;
- then the new attempt's start-up from its launch on, as :data:`runtime.protocol.startup.PHASES` names it.

>>> driver = {NOTICED: 10.2, DIAGNOSED: 11.2, STAGE_ENDED: 11.25, DISCONNECTED: 11.25, RELAUNCHED: 11.3,
...           marks.SUBMITTED: 11.31}
>>> slot = {marks.WORKER_STARTED: 11.4, marks.TASK_STARTED: 11.5, marks.LOADED: 11.51, marks.BUILT: 11.6,
...         marks.CONNECTED: 11.62, marks.FIRST_SOURCE_RECORD: 11.63}
>>> phases = recovery_phases(driver, [slot], failed_at=10.0, first_sink_record=11.65)
>>> {name: round(ms) for name, ms in phases.items()}  # doctest: +NORMALIZE_WHITESPACE
{'failure noticed': 200, 'failure grace': 1000, 'stage ended': 50, 'slots disconnected': 0,
 'restart decision': 50, 'launch': 10, 'stage submission': 90, 'worker start': 100, 'unpickling': 10,
 'slot setup': 90, 'rendezvous': 20, 'first record at source': 10, 'first record at sink': 20, 'total': 1650}
"""

from __future__ import annotations

from runtime.protocol import startup as marks

__all__ = ["FAILED", "NOTICED", "DIAGNOSED", "STAGE_ENDED", "DISCONNECTED", "RELAUNCHED", "PHASES",
           "recovery_phases"]

FAILED = "failed"  # when the failure happened, if someone knows (a benchmark that killed a worker)
NOTICED = "failure noticed"  # the job master took the first event telling of the failure
DIAGNOSED = "diagnosed"  # the grace for further reports is over: the cause is chosen
STAGE_ENDED = "stage ended"  # the old attempt's Spark job returned after the cancel
DISCONNECTED = "slots disconnected"  # every slot of the old attempt closed its control connection
RELAUNCHED = "relaunched"  # the restart was decided, its delay waited and its checkpoint chosen

PHASES = (
    ("failure noticed", NOTICED, None),
    ("failure grace", DIAGNOSED, None),
    ("stage ended", STAGE_ENDED, None),
    ("slots disconnected", DISCONNECTED, None),
    ("restart decision", RELAUNCHED, None),
) + tuple(phase for phase in marks.PHASES if phase[0] not in ("compile", "pickling"))


def recovery_phases(driver: dict[str, float], slots: list[dict[str, float]], failed_at: float | None = None,
                    first_sink_record: float | None = None) -> dict[str, float | None]:
    """Milliseconds of each phase of :data:`PHASES` and their ``total``: ``driver``, the job master's marks of one
    restart (with the new attempt's :data:`~runtime.protocol.startup.SUBMITTED`), ``slots`` the new attempt's
    slots' start-up marks; from ``failed_at`` (else from the notice) to ``first_sink_record`` (else the slots'
    own mark)."""
    timeline = dict(driver)
    timeline[FAILED] = failed_at if failed_at is not None else driver[NOTICED]
    return marks.startup_phases(timeline, slots, first_sink_record, origin=FAILED, phases_marked=PHASES)
