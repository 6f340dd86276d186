"""PyFlink's ``pyflink.common.time``: ``Time`` and ``Duration``.

>>> from runtime.common.time import Duration, Time
>>> Time.seconds(10).to_milliseconds(), Duration.of_minutes(1).to_milliseconds()
(10000, 60000)
"""

from runtime.settings.durations import Duration, Time

__all__ = ["Duration", "Time"]
