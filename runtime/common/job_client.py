"""PyFlink's ``pyflink.common.job_client``: the handle ``execute_async`` returns.

>>> from runtime.common.job_client import JobClient
>>> JobClient.__name__
'JobClient'
"""

from runtime.driver.result import JobClient

__all__ = ["JobClient"]
