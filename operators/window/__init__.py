"""Window building blocks with Flink's semantics and PyFlink's names: windows, assigners, triggers,
evictors, the merging window set of session windows, and the window functions' base classes.

>>> from runtime.settings.durations import Time
>>> assigner = TumblingEventTimeWindows.of(Time.minutes(1))
>>> assigner.assign_windows("click", 90_000, None), assigner.get_default_trigger()
([TimeWindow(start=60000, end=120000)], EventTimeTrigger())
"""

from operators.window.assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    count_window_parts,
)
from operators.window.evictors import CountEvictor, Evictor, TimeEvictor, TimestampedValue
from operators.window.functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from operators.window.merging import MergingWindowSet
from operators.window.testing import InMemoryTriggerContext
from operators.window.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from operators.window.windows import CountWindow, GlobalWindow, TimeWindow, Window

__all__ = [
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "WindowAssigner",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "SessionWindowTimeGapExtractor",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "count_window_parts",
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "PurgingTrigger",
    "NeverTrigger",
    "TimestampedValue",
    "Evictor",
    "CountEvictor",
    "TimeEvictor",
    "MergingWindowSet",
    "WindowFunction",
    "AllWindowFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "InMemoryTriggerContext",
]
