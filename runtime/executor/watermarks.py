"""A task's input watermark: the minimum over its input channels, moving only forward.

Each channel carries the watermarks of one producer subtask. The task's input watermark is the smallest of
the channels' watermarks; a channel that ended (end of input) no longer holds it back, nor does one marked
idle (a source partition with nothing to say, ``WatermarkStrategy.with_idleness``) until it speaks again. A
watermark is handed to the operators only when it advanced: the same value twice, or a channel going back,
changes nothing (Flink's ``StatusWatermarkValve``). The maximum watermark a producer sends at its end counts as
that channel's end (unlike Flink, where it also passed idle channels by, so their records came late). A channel that comes back from idleness behind the input
watermark is left out of the minimum until it catches up, so it never holds back what others already passed. When every channel ended, the input watermark is
:data:`MAX_WATERMARK`, so every event-time timer and window fires at the end of a bounded input.

>>> valve = InputWatermarks(2)
>>> valve.on_watermark(0, 100) is None      # channel 1 has said nothing yet: the minimum is unknown
True
>>> valve.on_watermark(1, 80)
80
>>> valve.on_watermark(1, 120), valve.on_watermark(0, 90)  # 100 is the new minimum; 90 goes back: ignored
(100, None)
>>> valve.on_idle(0), valve.idle, valve.on_idle(1), valve.idle   # every open channel idle: the task is
(120, False, None, True)
>>> valve.on_watermark(0, 110), valve.idle   # back, but behind 120: left out of the minimum until it catches up
(None, False)
>>> valve.on_end_of_input(0), valve.on_end_of_input(1) == MAX_WATERMARK
(None, True)
"""

from __future__ import annotations

from runtime.protocol.events import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["InputWatermarks"]


class InputWatermarks:
    """The watermark bookkeeping of one task's input gate (channels numbered ``0 .. n-1``)."""

    def __init__(self, channels: int):
        self.channel_watermarks = [MIN_WATERMARK] * channels
        self.active = [True] * channels  # neither ended nor idle
        self.ended = [False] * channels
        self.current = MIN_WATERMARK  # the last input watermark handed on

    def on_watermark(self, channel: int, timestamp: int) -> int | None:
        """A watermark arrived on ``channel``; returns the new input watermark if it advanced."""
        if self.ended[channel]:
            return None
        if timestamp == MAX_WATERMARK:
            # The producer's input ended: its channel ends too. Taken as a watermark it would pass idle channels
            # by, and their records, should they wake up, would all be late.
            return self.on_end_of_input(channel)
        self.active[channel] = True  # a watermark ends idleness
        if timestamp > self.channel_watermarks[channel]:
            self.channel_watermarks[channel] = timestamp
        return self._advance()

    def on_idle(self, channel: int) -> int | None:
        """``channel`` went idle: it no longer holds the watermark back until its next watermark."""
        self.active[channel] = False
        return self._advance()

    def on_active(self, channel: int) -> None:
        """``channel`` speaks again (records follow); its watermark counts once it reaches the input's."""
        if not self.ended[channel]:
            self.active[channel] = True

    @property
    def idle(self) -> bool:
        """Every channel still open is idle: the task itself is idle, and says so downstream."""
        return not any(self.active) and not all(self.ended)

    def on_end_of_input(self, channel: int) -> int | None:
        self.ended[channel] = True
        self.active[channel] = False
        return self._advance()

    def _advance(self) -> int | None:
        current = self.current
        watermarks = [w for w, active in zip(self.channel_watermarks, self.active) if active and w >= current]
        if watermarks:
            candidate = min(watermarks)
        elif all(self.ended):
            candidate = MAX_WATERMARK
        elif not any(self.active):
            # Every open channel is idle: none will move its watermark, so the highest one holds (Flink's
            # valve flushes it too); otherwise time would stop for whatever the busiest input already sent.
            candidate = max(w for w, ended in zip(self.channel_watermarks, self.ended) if not ended)
        else:
            return None  # the active channels are all catching up: the watermark waits
        if candidate > current:
            self.current = candidate
            return candidate
        return None
