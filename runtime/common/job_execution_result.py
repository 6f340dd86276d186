"""PyFlink's ``pyflink.common.job_execution_result``: what a finished job returns.

>>> from runtime.common.job_execution_result import JobExecutionResult
>>> JobExecutionResult.__name__
'JobResult'
"""

from runtime.driver.result import JobResult

JobExecutionResult = JobResult

__all__ = ["JobExecutionResult", "JobResult"]
