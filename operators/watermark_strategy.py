"""Event time: how records get their timestamps and how a stream's watermarks are made (PyFlink's
``pyflink.common.watermark_strategy``).

A :class:`WatermarkStrategy` pairs a :class:`TimestampAssigner` (the event time of a record, epoch
milliseconds) with a :class:`WatermarkGenerator` (the event time up to which the stream is believed complete).
Watermarks are emitted periodically, every ``env.get_config().set_auto_watermark_interval(ms)`` (200 ms by
default), as Flink does; an operator whose input watermark passes a timer's time fires it.

>>> from runtime.settings.durations import Duration
>>> strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
...             .with_timestamp_assigner(lambda event, _: event["ts"]))
>>> generator = strategy.create_watermark_generator()
>>> generator.on_batch([10_000, 12_000, 11_000]); generator.current_watermark()  # 12 s - 5 s - 1 ms
6999
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

from runtime.settings.parsers import parse_duration_ms
from runtime.errors import ApiUsageError, FunctionContractError
from runtime.protocol.events import MIN_WATERMARK

__all__ = [
    "WatermarkStrategy",
    "TimestampAssigner",
    "WatermarkGenerator",
    "WatermarkOutput",
    "BoundedOutOfOrdernessWatermarks",
    "ColumnTimestamps",
    "checked_timestamps",
]


class TimestampAssigner:
    """Extracts a record's event time in epoch milliseconds (PyFlink's ``TimestampAssigner``).

    ``record_timestamp`` is the timestamp the record already has (from its source), or None.

    >>> class FromField(TimestampAssigner):
    ...     def extract_timestamp(self, value, record_timestamp):
    ...         return value[1]
    >>> FromField().extract_timestamp(("click", 1_700_000_000_000), None)
    1700000000000
    """

    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int:
        raise NotImplementedError


class WatermarkOutput:
    """Where a :class:`WatermarkGenerator` puts its watermarks (Flink's ``WatermarkOutput``).

    >>> output = WatermarkOutput()
    >>> output.emit_watermark(41); output.emit_watermark(40); output.watermark  # never goes back
    41
    """

    def __init__(self):
        self.watermark = MIN_WATERMARK
        self.idle = False

    def emit_watermark(self, watermark) -> None:
        """Emit ``watermark`` (an int, or an object with ``get_timestamp()`` like PyFlink's ``Watermark``)."""
        timestamp = watermark if isinstance(watermark, int) else watermark.get_timestamp()
        if timestamp > self.watermark:
            self.watermark = timestamp
        self.idle = False

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.idle = False


class WatermarkGenerator:
    """Makes watermarks from the records it sees (Flink's ``WatermarkGenerator``): override ``on_event``
    and/or ``on_periodic_emit`` and emit into the ``output``.

    >>> class EveryRecord(WatermarkGenerator):   # a punctuated generator: a watermark with every record
    ...     def on_event(self, event, event_timestamp, output):
    ...         output.emit_watermark(event_timestamp)
    >>> generator = EveryRecord(); generator.on_batch([5, 9]); generator.current_watermark()
    9
    """

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every record, after its timestamp was assigned."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every auto-watermark interval."""

    # -- how the runtime drives a generator (one call per batch; built-in generators skip the per-record call)

    def on_batch(self, timestamps: list, records: list | None = None) -> None:
        output = self._output()
        on_event = self.on_event
        for record, timestamp in zip(records if records is not None else timestamps, timestamps):
            on_event(record, timestamp, output)

    def current_watermark(self) -> int:
        """Run ``on_periodic_emit`` and return the watermark emitted so far."""
        output = self._output()
        self.on_periodic_emit(output)
        return output.watermark

    def _output(self) -> WatermarkOutput:
        output = self.__dict__.get("_chandy_output")
        if output is None:
            output = self.__dict__["_chandy_output"] = WatermarkOutput()
        return output


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Watermark = the highest timestamp seen - ``bound_ms`` - 1: records at most ``bound_ms`` late are on
    time (Flink's ``BoundedOutOfOrdernessWatermarks``; a bound of 0 is ``for_monotonous_timestamps``).

    >>> generator = BoundedOutOfOrdernessWatermarks(1_000)
    >>> generator.current_watermark() == MIN_WATERMARK   # nothing seen yet
    True
    >>> generator.on_batch([5_000, 4_000]); generator.current_watermark()
    3999
    """

    def __init__(self, bound_ms: int):
        self.bound_ms = bound_ms
        self.max_timestamp = MIN_WATERMARK + bound_ms + 1

    def on_event(self, event, event_timestamp, output) -> None:
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def on_batch(self, timestamps: list, records: list | None = None) -> None:
        highest = max(timestamps)
        if highest > self.max_timestamp:
            self.max_timestamp = highest

    def on_periodic_emit(self, output) -> None:
        output.emit_watermark(self.max_timestamp - self.bound_ms - 1)

    def current_watermark(self) -> int:
        return self.max_timestamp - self.bound_ms - 1


class _NoWatermarks(WatermarkGenerator):
    def on_batch(self, timestamps: list, records: list | None = None) -> None:
        pass

    def current_watermark(self) -> int:
        return MIN_WATERMARK


class _RecordTimestamps(TimestampAssigner):
    """Keep the timestamps the records already have (a source's own)."""

    def extract_timestamp(self, value, record_timestamp):
        return record_timestamp


class WatermarkStrategy:
    """How a stream gets event time: a timestamp assigner, a watermark generator, and idleness.

    Build one with a factory, then ``with_timestamp_assigner`` (unless the source stamps its records):

    >>> from runtime.settings.durations import Duration
    >>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[0])
    >>> strategy.with_idleness(Duration.of_seconds(30)).idle_timeout_ms
    30000

    ``with_watermark_alignment`` (pausing fast sources so their watermarks stay within a drift of each other)
    is not provided: it raises, saying so.
    """

    def __init__(self, generator_factory: Callable[[], WatermarkGenerator], assigner: TimestampAssigner | None = None,
                 idle_timeout_ms: int | None = None, description: str = "custom"):
        self.generator_factory = generator_factory
        self.timestamp_assigner = assigner
        self.idle_timeout_ms = idle_timeout_ms
        self.description = description

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        """Timestamps never go back (per source subtask): watermark = the highest timestamp seen - 1.

        >>> WatermarkStrategy.for_monotonous_timestamps().description
        'monotonous timestamps'
        """
        return WatermarkStrategy(lambda: BoundedOutOfOrdernessWatermarks(0), description="monotonous timestamps")

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness) -> "WatermarkStrategy":
        """Records arrive at most ``max_out_of_orderness`` (a ``Duration``, ``Time`` or ms) behind the
        highest timestamp seen.

        >>> from runtime.settings.durations import Duration
        >>> WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(250)).description
        'bounded out-of-orderness of 250 ms'
        """
        bound = parse_duration_ms(max_out_of_orderness, "for_bounded_out_of_orderness")
        if bound < 0:
            raise ApiUsageError(f"for_bounded_out_of_orderness({bound} ms): the bound cannot be negative.")
        return WatermarkStrategy(lambda: BoundedOutOfOrdernessWatermarks(bound),
                                 description=f"bounded out-of-orderness of {bound} ms")

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        """Timestamps without watermarks: event-time timers and windows never fire before the end of input.

        >>> WatermarkStrategy.no_watermarks().create_watermark_generator().current_watermark() < 0
        True
        """
        return WatermarkStrategy(_NoWatermarks, description="no watermarks")

    def assigns_nothing(self) -> bool:
        """Neither timestamps nor watermarks: ``no_watermarks()`` without an assigner (PyFlink's usual argument
        of ``from_source`` for a job without event time), which leaves a stream as it is.

        >>> WatermarkStrategy.no_watermarks().assigns_nothing()
        True
        >>> WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda e, _: e).assigns_nothing()
        False
        """
        return self.generator_factory is _NoWatermarks and self.timestamp_assigner is None and \
            self.idle_timeout_ms is None

    @staticmethod
    def for_generator(generator_supplier) -> "WatermarkStrategy":
        """Watermarks from your own :class:`WatermarkGenerator`: a class or a no-argument callable making one
        per source subtask (each subtask needs its own).

        >>> class Punctuated(WatermarkGenerator):
        ...     def on_event(self, event, event_timestamp, output):
        ...         if event == "tick":
        ...             output.emit_watermark(event_timestamp)
        >>> WatermarkStrategy.for_generator(Punctuated).create_watermark_generator().current_watermark() < 0
        True
        """
        if isinstance(generator_supplier, WatermarkGenerator):
            raise ApiUsageError("for_generator() takes a WatermarkGenerator class or a function making one, not "
                                "an instance: every source subtask needs its own generator (pass the class).")
        if not callable(generator_supplier):
            raise ApiUsageError(f"for_generator() expects a WatermarkGenerator class, got {generator_supplier!r}")
        return WatermarkStrategy(generator_supplier, description=getattr(generator_supplier, "__name__", "custom"))

    def with_timestamp_assigner(self, timestamp_assigner) -> "WatermarkStrategy":
        """Timestamps from a :class:`TimestampAssigner`, a function ``(record, record_timestamp) -> ms``, or the
        name of a field (``record[name]``; on a columnar stream, an integer or timestamp column).

        >>> strategy = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda r, _: r["t"])
        >>> strategy.create_timestamp_assigner().extract_timestamp({"t": 7}, None)
        7
        """
        if isinstance(timestamp_assigner, TimestampAssigner):
            assigner = timestamp_assigner
        elif isinstance(timestamp_assigner, str):  # a field of dict/Row records, a column of a columnar stream
            assigner = ColumnTimestamps(timestamp_assigner)
        elif callable(timestamp_assigner):
            assigner = _CallableAssigner(timestamp_assigner)
        else:
            raise ApiUsageError(f"with_timestamp_assigner() expects a TimestampAssigner or a function "
                                f"(record, record_timestamp) -> milliseconds, got {timestamp_assigner!r}")
        return WatermarkStrategy(self.generator_factory, assigner, self.idle_timeout_ms, self.description)

    def with_idleness(self, idle_timeout) -> "WatermarkStrategy":
        """A source subtask without records for ``idle_timeout`` is idle: downstream watermarks stop waiting for
        it until it has records again (Flink's ``withIdleness``).

        >>> WatermarkStrategy.for_monotonous_timestamps().with_idleness(5_000).idle_timeout_ms
        5000
        """
        timeout = parse_duration_ms(idle_timeout, "with_idleness")
        if timeout <= 0:
            raise ApiUsageError(f"with_idleness({timeout} ms): the idle timeout must be positive.")
        return WatermarkStrategy(self.generator_factory, self.timestamp_assigner, timeout, self.description)

    def with_watermark_alignment(self, watermark_group: str, max_allowed_watermark_drift, update_interval=None):
        """Not provided by Chandy: raises, naming the alternative.

        >>> try:
        ...     WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment("g", 1000)
        ... except ApiUsageError as error:
        ...     print(str(error)[:53])
        with_watermark_alignment() is not supported by Chandy
        """
        raise ApiUsageError(
            "with_watermark_alignment() is not supported by Chandy (sources are not paused to keep their "
            "watermarks within a drift). Remove it; a source far ahead of the others then holds more window "
            "state downstream until the slow ones catch up, and results are the same.")

    def create_timestamp_assigner(self) -> TimestampAssigner:
        return self.timestamp_assigner if self.timestamp_assigner is not None else _RecordTimestamps()

    def create_watermark_generator(self) -> WatermarkGenerator:
        generator = self.generator_factory()
        if not isinstance(generator, WatermarkGenerator):
            raise FunctionContractError(
                f"The watermark strategy's generator supplier returned {generator!r}, not a WatermarkGenerator: "
                "pass a WatermarkGenerator subclass to for_generator().")
        return generator

    def __repr__(self) -> str:
        return f"WatermarkStrategy({self.description})"


class ColumnTimestamps(TimestampAssigner):
    """Timestamps from a named field of each record (dicts, Rows), or a column of a columnar stream.

    >>> ColumnTimestamps("ts").extract_timestamp({"ts": 1_000, "user": "ann"}, None)
    1000
    """

    def __init__(self, column: str):
        self.column = column

    def extract_timestamp(self, value, record_timestamp):
        return value[self.column]


class _CallableAssigner(TimestampAssigner):
    def __init__(self, function: Callable):
        self.function = function

    def extract_timestamp(self, value, record_timestamp):
        return self.function(value, record_timestamp)


def checked_timestamps(timestamps: list, records: list, operator_name: str) -> list:
    """``timestamps`` if each is an int; whole floats become ints; anything else raises, naming the record.

    >>> checked_timestamps([1, 2.0], ["a", "b"], "stamp")
    [1, 2]
    >>> try:
    ...     checked_timestamps([1, None], ["a", "b"], "stamp")
    ... except FunctionContractError as error:
    ...     print(str(error)[:62])
    The timestamp assigner of 'stamp' returned None for record 'b'
    """
    if set(map(type, timestamps)) <= {int}:
        return timestamps
    checked = []
    for timestamp, record in zip(timestamps, records):
        if type(timestamp) is int:
            checked.append(timestamp)
        elif isinstance(timestamp, float) and math.isfinite(timestamp):
            checked.append(int(timestamp))
        elif isinstance(timestamp, numbers.Integral) and not isinstance(timestamp, bool):  # numpy's ints
            checked.append(int(timestamp))
        else:
            raise FunctionContractError(
                f"The timestamp assigner of '{operator_name}' returned {timestamp!r} for record {record!r:.200}: "
                "a timestamp must be a number of milliseconds since the epoch (an int, not None, NaN, a bool or "
                "a datetime; for a datetime d use int(d.timestamp() * 1000)).")
    return checked
