"""PyFlink's ``pyflink.common.job_status``.

>>> from runtime.common.job_status import JobStatus
>>> JobStatus.FINISHED.is_globally_terminal_state()
True
"""

from runtime.driver.result import JobStatus

__all__ = ["JobStatus"]
