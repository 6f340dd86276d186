"""Deciding, from everything the driver heard, what made a job attempt fail. Pure: no I/O.

When one task fails, its peers fail too (their channels break), and Spark fails the stage. The user needs
the first cause, so evidence is ranked: an operator's own exception; else a task that died without a word
(SIGKILL, out of memory, lost executor); else a runtime error a task reported; else Spark's error.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from runtime.errors import JobFailedError
from runtime.protocol.messages import TaskFailed

__all__ = ["FailureEvidence", "diagnose"]


@dataclass
class FailureEvidence:
    reports: list[TaskFailed] = field(default_factory=list)
    disconnected_slots: list[int] = field(default_factory=list)
    stage_error: BaseException | None = None

    @property
    def has_operator_error(self) -> bool:
        return any(r.operator_name is not None for r in self.reports)


def _from_report(job_name: str, report: TaskFailed) -> JobFailedError:
    where = f"operator '{report.operator_name}'" if report.operator_name else "the Chandy runtime"
    error = JobFailedError(
        f"Job '{job_name}' failed: {where} (subtask {report.subtask}) raised "
        f"{report.error_type}: {report.error_message}",
        operator_name=report.operator_name, subtask=report.subtask, user_traceback=report.traceback)
    if report.exception is not None:
        try:
            error.__cause__ = pickle.loads(report.exception)
        except Exception:  # the exception's class may not exist on the driver
            pass
    return error


def diagnose(job_name: str, evidence: FailureEvidence) -> JobFailedError:
    """The error to raise for a failed attempt."""
    for report in evidence.reports:
        if report.operator_name is not None:
            return _from_report(job_name, report)
    reporting = {r.slot for r in evidence.reports}
    silent = [s for s in evidence.disconnected_slots if s not in reporting]
    if silent:
        slots = ", ".join(str(s) for s in sorted(set(silent)))
        error = JobFailedError(
            f"Job '{job_name}' failed: the task in slot {slots} died without reporting an error (its Python "
            "worker was killed or crashed, ran out of memory, or its executor was lost). Check the executor "
            "logs for the reason.")
        error.__cause__ = evidence.stage_error
        return error
    if evidence.reports:
        return _from_report(job_name, evidence.reports[0])
    text = str(evidence.stage_error or "unknown error").strip().splitlines()
    summary = next((line for line in text if "Exception" in line or "Error" in line), text[0] if text else "")
    error = JobFailedError(f"Job '{job_name}' failed in Spark before any task reported an error: {summary[:500]}")
    error.__cause__ = evidence.stage_error
    return error
