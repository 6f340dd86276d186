"""PyFlink's ``pyflink.common.watermark_strategy`` (defined in :mod:`operators.watermark_strategy`).

>>> from runtime.common.watermark_strategy import WatermarkStrategy
>>> WatermarkStrategy.for_monotonous_timestamps()
WatermarkStrategy(monotonous timestamps)
"""

from operators.watermark_strategy import (
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)

__all__ = ["WatermarkStrategy", "TimestampAssigner", "WatermarkGenerator", "WatermarkOutput"]
