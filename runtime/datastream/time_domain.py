"""PyFlink's ``pyflink.datastream.time_domain``.

>>> TimeDomain.EVENT_TIME.name
'EVENT_TIME'
"""

from operators.functions import TimeDomain

__all__ = ["TimeDomain"]
