"""The input watermark of a task, against a plain-Python reference over random event sequences."""

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.executor.watermarks import InputWatermarks
from runtime.protocol.events import MAX_WATERMARK, MIN_WATERMARK, Watermark, event_from_metadata

EVENTS = st.lists(st.tuples(st.sampled_from(["watermark", "idle", "end"]), st.integers(0, 3),
                            st.integers(-5, 50) | st.just(MAX_WATERMARK)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(channels=st.integers(1, 4), events=EVENTS)
def test_the_input_watermark_is_the_minimum_over_active_channels_and_only_moves_forward(channels, events):
    valve = InputWatermarks(channels)
    highest = [MIN_WATERMARK] * channels  # per channel: the highest watermark it sent
    idle, ended = [False] * channels, [False] * channels
    emitted = []
    for kind, channel, timestamp in events:
        channel %= channels
        if kind == "watermark":
            result = valve.on_watermark(channel, timestamp)
            if timestamp == MAX_WATERMARK:
                ended[channel] = True
            elif not ended[channel]:
                highest[channel] = max(highest[channel], timestamp)
                idle[channel] = False
        elif kind == "idle":
            result = valve.on_idle(channel)
            idle[channel] = True
        else:
            result = valve.on_end_of_input(channel)
            ended[channel] = True
        previous = emitted[-1] if emitted else MIN_WATERMARK
        # A channel back from idleness behind the output is left out until it catches up.
        active = [highest[c] for c in range(channels) if not idle[c] and not ended[c] and highest[c] >= previous]
        if active:
            expected_now = min(active)
        elif all(ended):
            expected_now = MAX_WATERMARK
        elif all(idle[c] or ended[c] for c in range(channels)):
            expected_now = max(highest[c] for c in range(channels) if not ended[c])  # all idle: the highest holds
        else:
            expected_now = None  # the active channels are catching up: nothing moves
        if expected_now is not None and expected_now > previous:
            assert result == expected_now
            emitted.append(result)
        else:
            assert result is None
    assert emitted == sorted(set(emitted)), "strictly increasing"


def test_a_watermark_travels_as_channel_metadata():
    assert event_from_metadata(Watermark(-1).to_metadata()) == Watermark(-1)
    assert event_from_metadata(Watermark(MAX_WATERMARK).to_metadata()) == Watermark(MAX_WATERMARK)
