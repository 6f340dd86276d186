"""PyFlink's ``pyflink.datastream.timerservice``: the timer service a process function's context gives.

>>> hasattr(TimerService, "register_event_time_timer")
True
"""

from operators.functions import TimerService

__all__ = ["TimerService"]
