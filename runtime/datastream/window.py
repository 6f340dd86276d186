"""PyFlink's ``pyflink.datastream.window``: windows, assigners, triggers and evictors (defined in
:mod:`operators.window`).

>>> from runtime.datastream.window import TumblingEventTimeWindows, TimeWindow
>>> from runtime.common import Time
>>> TumblingEventTimeWindows.of(Time.seconds(10)).assign_windows(None, 12_345, None)
[TimeWindow(start=10000, end=20000)]
"""

from operators.window import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    Evictor,
    GlobalWindow,
    GlobalWindows,
    MergingWindowAssigner,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    Window,
    WindowAssigner,
)
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

__all__ = [
    "Window", "TimeWindow", "CountWindow", "GlobalWindow", "WindowAssigner", "MergingWindowAssigner",
    "TumblingEventTimeWindows", "TumblingProcessingTimeWindows", "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows", "SessionWindowTimeGapExtractor", "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows", "DynamicEventTimeSessionWindows", "DynamicProcessingTimeSessionWindows",
    "GlobalWindows", "CountTumblingWindowAssigner", "CountSlidingWindowAssigner", "TriggerResult", "Trigger",
    "EventTimeTrigger", "ProcessingTimeTrigger", "CountTrigger", "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger", "PurgingTrigger", "NeverTrigger", "TimestampedValue", "Evictor",
    "CountEvictor", "TimeEvictor", "WindowFunction", "AllWindowFunction", "ProcessWindowFunction",
    "ProcessAllWindowFunction",
]
