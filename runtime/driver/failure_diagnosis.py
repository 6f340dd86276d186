"""Deciding, from everything the driver heard, what made a job attempt fail, and whether to restart. Pure.

When one slot fails, its peers fail too (their channels break), and Spark fails the stage. The user needs
the first cause, so evidence is ranked: an operator's own exception; else a runtime error that says it would
repeat (the job could not be loaded, a checkpoint could not be restored); else a slot that died without a
word (SIGKILL, out of memory, lost executor); else another runtime error a slot reported; else a report of a
broken data connection (a consequence: see :func:`_is_secondary`); else Spark's error. Within a rank, the
first report to arrive wins; a consequence never outranks a cause, whatever the order of arrival.

A restart is worth it only when the cause may not repeat: :func:`decide_restart` refuses one for errors that
say they would (a malformed record, an undeclared type, a module missing on the executors ...), for an
operator that failed the same way in ``open()`` on two attempts in a row, and for an operator that raised the
same exception on the same record on two attempts in a row (the next attempt restores a checkpoint taken before
that record, reads it again and fails again) unless the user chose the restart strategy. Whether a checkpoint
completed in between says nothing here: a checkpoint of the other subtasks' progress still sits before the record.

>>> evidence = FailureEvidence(disconnected_slots=[1])
>>> diagnosis = diagnose("job", evidence)
>>> "slot 1 died without reporting an error" in str(diagnosis.error), diagnosis.error.retryable
(True, True)
>>> decide_restart(diagnosis, None, refusal=None).restart
True
>>> from runtime.driver.control_server import SlotUnresponsive
>>> print(diagnose("job", FailureEvidence(unresponsive=[SlotUnresponsive(0, 1, 31.2, 30.0)])).error.message[:99])
Job 'job' failed: nothing came, not even a heartbeat, from slot 1 for 31.2 s, longer than the heart
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
    unresponsive: list = field(default_factory=list)  # runtime.driver.control_server.SlotUnresponsive
    stage_error: BaseException | None = None

    @property
    def has_operator_error(self) -> bool:
        """An operator's own failure arrived: no need to wait for other reports (a broken channel an operator
        reports is not its own failure: the cause may still be on its way)."""
        return any(r.operator_name is not None and not _is_secondary(r) for r in self.reports)


@dataclass(frozen=True)
class Diagnosis:
    """The error to raise for a failed attempt, with what the restart decision needs to know."""

    error: JobFailedError
    phase: FailurePhase = FailurePhase.RUNTIME
    signature: tuple = ()  # (operator uid, error type, message): the same failure again has the same one
    record: str | None = None  # the repr of the record being processed, when the traceback showed it


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
    return Diagnosis(error, report.phase, (report.operator_uid, report.error_type, report.error_message),
                     report.record)


# What a slot raises when a peer's data channel breaks (runtime.network.channels: an Arrow stream cut short
# surfaces as "data connection from subtask N broke: ArrowInvalid: ..."), or its own connection to the driver
# does (runtime.protocol.wire): consequences of a failure elsewhere, never its cause.
_CONNECTION_ERROR_TYPES = frozenset({
    "ConnectionError", "ConnectionResetError", "ConnectionAbortedError", "ConnectionRefusedError",
    "BrokenPipeError", "EOFError", "ConnectionClosed"})
_CHANNEL_BROKE = ("data connection to subtask", "data connection from subtask", "the consumer closed the connection",
                  "connection closed before its header", "stream ended without end-of-input")
_CONNECTION_LOST = _CHANNEL_BROKE + ("closed by peer", "connection lost", "connection was lost", "connection reset",
                                     "broken pipe", "peer is gone", "peer was lost")


def _is_secondary(report: SlotFailed) -> bool:
    """Whether ``report`` tells of a broken connection to a peer slot (or the driver) rather than of a cause.

    A runtime report (no operator named) counts when its error type is a connection error or its message says
    a connection was lost; an operator's report only when its message is one of Chandy's own channel errors
    (an operator's own ``ConnectionError``, from its database client say, is that operator's cause). Nothing
    reported while the slot was loading counts: there are no data connections yet, and a checkpoint storage
    that cannot be reached then is a cause.

    >>> _is_secondary(SlotFailed(0, 1, None, None, 1, "ConnectionError",
    ...               "data connection from subtask 0 broke: ArrowInvalid: Expected to read 8 bytes", ""))
    True
    >>> _is_secondary(SlotFailed(0, 1, None, None, 1, "RecordEncodingError", "cannot pickle '_thread.lock'", ""))
    False
    >>> _is_secondary(SlotFailed(0, 1, "Sink", "db", 1, "ConnectionResetError", "Connection reset by peer", ""))
    False
    """
    if report.phase is FailurePhase.LOAD:
        return False
    message = report.error_message.lower()
    if report.operator_name is not None:
        return any(phrase in message for phrase in _CHANNEL_BROKE)
    return report.error_type in _CONNECTION_ERROR_TYPES or any(phrase in message for phrase in _CONNECTION_LOST)


def diagnose(job_name: str, evidence: FailureEvidence) -> Diagnosis:
    """The error to raise for a failed attempt."""
    causes = [r for r in evidence.reports if not _is_secondary(r)]
    consequences = [r for r in evidence.reports if _is_secondary(r)]
    for report in causes:
        if report.operator_name is not None:
            return _from_report(job_name, report)
    for report in causes:  # e.g. a module missing on one executor: Spark may kill its peers silently
        if not report.retryable:
            return _from_report(job_name, report)
    reporting = {r.slot for r in evidence.reports}
    hung = [u for u in evidence.unresponsive if u.slot not in reporting]
    if hung:
        which = ", ".join(f"slot {u.slot} for {u.silent_s:.1f} s" for u in hung)
        error = JobFailedError(
            f"Job '{job_name}' failed: nothing came, not even a heartbeat, from {which}, longer than the heartbeat "
            f"timeout of {hung[0].timeout_s:g} s: its process is stopped or deadlocked, or its executor cannot be "
            "reached. Check the executor logs; raise heartbeat.timeout (or spark.chandy.heartbeatTimeout) if the "
            "slot is only slow (a very long garbage collection, a swapping machine).")
        error.__cause__ = evidence.stage_error
        return Diagnosis(error)
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
    if causes or consequences:
        return _from_report(job_name, (causes or consequences)[0])
    text = str(evidence.stage_error or "unknown error").strip().splitlines()
    summary = next((line for line in text if "Exception" in line or "Error" in line), text[0] if text else "")
    error = JobFailedError(f"Job '{job_name}' failed in Spark before any slot reported an error: {summary[:500]}")
    error.__cause__ = evidence.stage_error
    return Diagnosis(error)


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    reason: str = ""  # why not, for the user


def decide_restart(failure: Diagnosis, previous: Diagnosis | None, refusal: str | None,
                   strategy_chosen: bool = False) -> RestartDecision:
    """Whether to restart after ``failure``; ``previous`` is the failure of the attempt before, if any;
    ``refusal`` is why the restart strategy allows no more restarts (None: it allows one);
    ``strategy_chosen``: the user set the
    restart strategy (then it alone decides how often a failure that repeats is retried).

    >>> bad = Diagnosis(JobFailedError("bad record", retryable=False))
    >>> decide_restart(bad, None, None)
    RestartDecision(restart=False, reason='the failure would happen again on a restart, so the job was not restarted')
    >>> in_open = Diagnosis(JobFailedError("no db"), FailurePhase.OPEN, ("sink", "OSError", "refused"))
    >>> decide_restart(in_open, None, None).restart, decide_restart(in_open, in_open, None).restart
    (True, False)
    >>> decide_restart(in_open, None, "after 3 restart(s); the restart strategy allows 3")
    RestartDecision(restart=False, reason='after 3 restart(s); the restart strategy allows 3')
    >>> bad_record = Diagnosis(JobFailedError("x"), FailurePhase.RUN, ("parse", "ValueError", "bad"), "'x'")
    >>> decide_restart(bad_record, bad_record, None).reason[:70]
    "operator 'parse' raised the same ValueError on the same record ('x') o"
    >>> decide_restart(bad_record, bad_record, None, strategy_chosen=True).restart
    True
    """
    if not failure.error.retryable:
        return RestartDecision(False, "the failure would happen again on a restart, so the job was not restarted")
    if (failure.phase is FailurePhase.OPEN and previous is not None and previous.phase is FailurePhase.OPEN
            and previous.signature == failure.signature):
        return RestartDecision(False, "the operator failed the same way in open() on two attempts in a row, so "
                                      "the job was not restarted again")
    if (failure.phase is FailurePhase.RUN and failure.record is not None and previous is not None
            and previous.phase is FailurePhase.RUN and previous.signature == failure.signature
            and previous.record == failure.record and not strategy_chosen):
        uid, error_type, _ = failure.signature
        operator = getattr(failure.error, "operator_name", None) or uid
        return RestartDecision(False, (
            f"operator '{operator}' raised the same {error_type} on the same record ({failure.record}) on two "
            "attempts in a row: a restart would read that record again and fail "
            "again, so the job was not restarted. Handle such records in the function (catch the error, or filter "
            "them out before it), or choose a restart strategy (env.set_restart_strategy(...)) to retry anyway."))
    if refusal is not None:
        return RestartDecision(False, refusal)
    return RestartDecision(True)
