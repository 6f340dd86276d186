"""What the driver's terminal shows without any logging setup: Chandy's own lifecycle lines.

A job that runs for hours must say what it is doing: when it starts (parallelism, slots, checkpoint
storage), each restart with its cause and the checkpoint it restores, when checkpointing stops, and how it
ended. Those lines are logged at INFO and WARNING by the ``runtime`` loggers; Python shows only WARNING and
above when nothing is configured, so :func:`show_chandy_logs` gives them a concise handler of their own,
unless the application configured logging itself (then its configuration decides).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys

from runtime.driver.restore_plan import RESTORE_CONF, RESTORE_ENV, RESTORE_JOB_ENV

__all__ = ["show_chandy_logs", "resume_hint", "CHANDY_LOGGERS"]

CHANDY_LOGGERS = ("runtime", "operators", "state_backends")
_FORMAT = "%(asctime)s chandy %(levelname)s %(message)s"


def show_chandy_logs(stream=None) -> bool:
    """Print Chandy's INFO lines to ``stream`` (stderr) if nobody configured logging; True when it did."""
    if logging.getLogger().handlers:
        return False
    installed = False
    for name in CHANDY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.handlers or logger.level != logging.NOTSET:
            continue  # configured by the application
        handler = _ClearingHandler(stream or sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        installed = True
    return installed


class _ClearingHandler(logging.StreamHandler):
    """Clears the live status line (:mod:`runtime.driver.progress`) before a log line takes the terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        from runtime.driver.progress import active_line

        line = active_line()
        if line is not None:
            line.clear()
        super().emit(record)


def resume_hint(job_name: str, newest: tuple[int, str] | None, argv: list[str] | None = None) -> str:
    """The one line printed when Ctrl-C cancels a job: the newest checkpoint and how to resume from it.
    ``argv`` is the program's command line (default: as Python was started, ``sys.orig_argv``). The command
    names the job, so that a program running several jobs resumes only this one from the checkpoint.

    >>> print(resume_hint("clicks", (7, "/data/ck/clicks/chk-7"), ["python", "job.py", "--day", "2026-11-24"]))
    Cancelled job 'clicks'. Newest completed checkpoint: 7 (/data/ck/clicks/chk-7). Resume from it with: CHANDY_RESTORE_JOB=clicks CHANDY_RESTORE_FROM=/data/ck/clicks/chk-7 python job.py --day 2026-11-24
    >>> print(resume_hint("clicks", None))
    Cancelled job 'clicks'. No checkpoint was completed: running the program again starts from scratch.
    """
    if newest is None:
        return (f"Cancelled job '{job_name}'. No checkpoint was completed: running the program again starts from "
                "scratch.")
    checkpoint_id, url = newest
    if os.environ.get("SPARK_ENV_LOADED"):  # started by spark-submit, whose own command line Python cannot see
        command = (f"spark-submit --conf {RESTORE_CONF}={shlex.quote(url)} followed by the arguments you gave "
                   "spark-submit this time")
    else:
        program = shlex.join(argv or getattr(sys, "orig_argv", None) or sys.argv)
        command = f"{RESTORE_JOB_ENV}={shlex.quote(job_name)} {RESTORE_ENV}={shlex.quote(url)} {program}"
    return (f"Cancelled job '{job_name}'. Newest completed checkpoint: {checkpoint_id} ({url}). "
            f"Resume from it with: {command}")
