"""How many checkpoint failures in a row a job tolerates: Flink's ``CheckpointFailureManager``.

>>> from runtime.checkpoint_config import CheckpointConfig
>>> failures = CheckpointFailureManager(CheckpointConfig().set_tolerable_checkpoint_failure_number(1), "orders")
>>> failures.failed(4, "timed out") is None
True
>>> print(failures.failed(5, "timed out"))
Job 'orders': checkpoint 5 failed (timed out), 2 consecutive checkpoint failure(s), more than the 1 tolerated \
(set_tolerable_checkpoint_failure_number).
>>> failures.succeeded(); failures.consecutive
0
"""

from __future__ import annotations

from runtime.errors import JobFailedError

__all__ = ["CheckpointFailureManager"]


class CheckpointFailureManager:
    """Counts the failures of ``config``'s job (its ``tolerable_failures`` is read at each failure)."""

    def __init__(self, config, job_name: str):
        self.config = config
        self.job_name = job_name
        self.consecutive = 0

    def succeeded(self) -> None:
        self.consecutive = 0

    def failed(self, checkpoint_id: int, reason: str) -> JobFailedError | None:
        """Count a failure: the error that fails the job when it is one too many, else None."""
        self.consecutive += 1
        tolerable = self.config.tolerable_failures
        if self.consecutive > tolerable:
            return JobFailedError(
                f"Job '{self.job_name}': checkpoint {checkpoint_id} failed ({reason}), {self.consecutive} consecutive "
                f"checkpoint failure(s), more than the {tolerable} tolerated "
                "(set_tolerable_checkpoint_failure_number).")
        return None
