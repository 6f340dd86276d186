"""Deciding, from everything the driver heard, what made a job attempt fail, and whether to restart. Pure.

When one slot fails, its peers fail too (their channels break), and Spark fails the stage. The user needs
the first cause, so evidence is ranked: an operator's own exception; else a runtime error that says it would
repeat (the job could not be loaded, a checkpoint could not be restored); else a slot that died without a
word (SIGKILL, out of memory, lost executor); else another runtime error a slot reported; else Spark's error.

A restart is worth it only when the cause may not repeat: :func:`decide_restart` refuses one for errors that
say they would (a malformed record, an undeclared type, a module missing on the executors ...), and for an
operator that failed the same way in ``open()`` on two attempts in a row.

>>> evidence = FailureEvidence(disconnected_slots=[1])
>>> diagnosis = diagnose("job", evidence)
>>> "slot 1 died without reporting an error" in str(diagnosis.error), diagnosis.error.retryable
(True, True)
>>> decide_restart(diagnosis, None, restarts_used=0, max_restarts=3).restart
True
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from runtime.errors import JobFailedError
from runtime.ids import SlotIndex
from runtime.protocol.messages import FailurePhase, SlotFailed

__all__ = ["FailureEvidence", "Diagnosis", "diagnose", "RestartDecision", "decide_restart"]


@dataclass
class FailureEvidence:
    reports: list[SlotFailed] = field(default_factory=list)
    disconnected_slots: list[SlotIndex] = field(default_factory=list)
    stage_error: BaseException | None = None

    @property
    def has_operator_error(self) -> bool:
        return any(r.operator_name is not None for r in self.reports)


@dataclass(frozen=True)
class Diagnosis:
    """The error to raise for a failed attempt, with what the restart decision needs to know."""

    error: JobFailedError
    phase: FailurePhase = FailurePhase.RUNTIME
    signature: tuple = ()  # (operator uid, error type, message): the same failure again has the same one


def _from_report(job_name: str, report: SlotFailed) -> Diagnosis:
    if report.operator_name:
        uid = f", uid '{report.operator_uid}'" if report.operator_uid else ""
        where = f"operator '{report.operator_name}' (subtask {report.subtask}{uid})"
    else:
        where = f"the Chandy runtime (slot {report.slot})"
    if report.phase is FailurePhase.OPEN:
        where += " in open()"
    error = JobFailedError(
        f"Job '{job_name}' failed: {where} raised {report.error_type}: {report.error_message}",
        operator_name=report.operator_name, subtask=report.subtask, user_traceback=report.traceback,
        operator_uid=report.operator_uid, retryable=report.retryable)
    if report.exception is not None:
        try:
            error.__cause__ = pickle.loads(report.exception)
        except Exception:  # the exception's class may not exist on the driver
            pass
    return Diagnosis(error, report.phase, (report.operator_uid, report.error_type, report.error_message))


def diagnose(job_name: str, evidence: FailureEvidence) -> Diagnosis:
    """The error to raise for a failed attempt."""
    for report in evidence.reports:
        if report.operator_name is not None:
            return _from_report(job_name, report)
    for report in evidence.reports:  # e.g. a module missing on one executor: Spark may kill its peers silently
        if not report.retryable:
            return _from_report(job_name, report)
    reporting = {r.slot for r in evidence.reports}
    silent = [s for s in evidence.disconnected_slots if s not in reporting]
    if silent:
        silent = sorted(set(silent))
        which = f"slot {silent[0]}" if len(silent) == 1 else f"slots {', '.join(str(s) for s in silent)}"
        error = JobFailedError(
            f"Job '{job_name}' failed: the {which} died without reporting an error (its Python "
            "worker was killed or crashed, ran out of memory, or its executor was lost). Check the executor "
            "logs for the reason.")
        error.__cause__ = evidence.stage_error
        return Diagnosis(error)
    if evidence.reports:
        return _from_report(job_name, evidence.reports[0])
    text = str(evidence.stage_error or "unknown error").strip().splitlines()
    summary = next((line for line in text if "Exception" in line or "Error" in line), text[0] if text else "")
    error = JobFailedError(f"Job '{job_name}' failed in Spark before any slot reported an error: {summary[:500]}")
    error.__cause__ = evidence.stage_error
    return Diagnosis(error)


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    reason: str = ""  # why not, for the user


def decide_restart(failure: Diagnosis, previous: Diagnosis | None, restarts_used: int,
                   max_restarts: int) -> RestartDecision:
    """Whether to restart after ``failure``; ``previous`` is the failure of the attempt before, if any.

    >>> bad = Diagnosis(JobFailedError("bad record", retryable=False))
    >>> decide_restart(bad, None, 0, 3)
    RestartDecision(restart=False, reason='the failure would happen again on a restart, so the job was not restarted')
    >>> in_open = Diagnosis(JobFailedError("no db"), FailurePhase.OPEN, ("sink", "OSError", "refused"))
    >>> decide_restart(in_open, None, 0, 3).restart, decide_restart(in_open, in_open, 1, 3).restart
    (True, False)
    """
    if not failure.error.retryable:
        return RestartDecision(False, "the failure would happen again on a restart, so the job was not restarted")
    if (failure.phase is FailurePhase.OPEN and previous is not None and previous.phase is FailurePhase.OPEN
            and previous.signature == failure.signature):
        return RestartDecision(False, "the operator failed the same way in open() on two attempts in a row, so "
                                      "the job was not restarted again")
    if restarts_used >= max_restarts:
        if restarts_used == 0:
            return RestartDecision(False, "")
        return RestartDecision(False, f"after {restarts_used} restart(s); the restart strategy allows "
                                      f"{max_restarts}")
    return RestartDecision(True)
