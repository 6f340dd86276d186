"""Control events that travel in a data channel, in order with its records.

On a remote channel an event is a zero-row Arrow batch whose custom metadata says what it is; on a local
channel it is the object itself: end of input, checkpoint barriers and watermarks.

>>> event_from_metadata(CheckpointBarrier(7).to_metadata())
CheckpointBarrier(checkpoint_id=7, savepoint=None)
>>> event_from_metadata(Watermark(1_700_000_000_123).to_metadata())
Watermark(timestamp=1700000000123)
>>> event_from_metadata(CheckpointBarrier(8, savepoint="s3://b/savepoint-8-1a2b3c").to_metadata()).savepoint
's3://b/savepoint-8-1a2b3c'
>>> event_from_metadata(END_OF_INPUT.to_metadata()) is END_OF_INPUT
True
>>> event_from_metadata(END_OF_INPUT_STOPPED.to_metadata()).stopped
True
>>> event_from_metadata(WatermarkStatus.IDLE.to_metadata()) is WatermarkStatus.IDLE
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.errors import ProtocolError

__all__ = ["Event", "EndOfInput", "END_OF_INPUT", "END_OF_INPUT_STOPPED", "CheckpointBarrier", "Watermark",
           "MAX_WATERMARK", "MIN_WATERMARK", "WatermarkStatus", "event_from_metadata"]

_EVENT_KEY = b"chandy.event"
_CHECKPOINT_KEY = b"chandy.checkpoint"
_TIMESTAMP_KEY = b"chandy.timestamp"
_SAVEPOINT_KEY = b"chandy.savepoint"
_UNALIGNED_KEY = b"chandy.unaligned"

MAX_WATERMARK = (1 << 63) - 1  # Flink's Long.MAX_VALUE: the end of a bounded input; every timer fires
MIN_WATERMARK = -(1 << 63)  # no watermark yet


class Event:
    """A control event travelling in a data channel, in order with its records."""

    def to_metadata(self) -> dict[bytes, bytes]:
        raise NotImplementedError


@dataclass(frozen=True)
class EndOfInput(Event):
    """The producer will send nothing more on this channel. ``stopped``: not because its input ended but
    because the job stops with a savepoint without draining: the channel's watermark stays where it was (no
    timer fires for the end), and its consumer does not finish its operators either."""

    stopped: bool = False

    def to_metadata(self) -> dict[bytes, bytes]:
        return {_EVENT_KEY: b"stopped" if self.stopped else b"end"}


END_OF_INPUT = EndOfInput()
END_OF_INPUT_STOPPED = EndOfInput(stopped=True)


@dataclass(frozen=True)
class CheckpointBarrier(Event):
    """Everything before it on this channel belongs to checkpoint ``checkpoint_id``; nothing after it does.
    ``savepoint``: the checkpoint is a savepoint, stored in that directory, and always aligned.
    ``unaligned``: the barrier of an unaligned checkpoint, a priority event: it overtakes the records queued
    ahead of it in the consumer's gate, which the consumer then stores as channel state (sent without a credit).

    >>> event_from_metadata(CheckpointBarrier(9, unaligned=True).to_metadata()).unaligned
    True
    """

    checkpoint_id: int
    savepoint: str | None = None
    timestamp_ms: int = field(default=0, repr=False, compare=False)  # wall clock when the coordinator triggered it
    unaligned: bool = field(default=False, repr=False, compare=False)

    def to_metadata(self) -> dict[bytes, bytes]:
        metadata = {_EVENT_KEY: b"barrier", _CHECKPOINT_KEY: str(self.checkpoint_id).encode(),
                    _TIMESTAMP_KEY: str(self.timestamp_ms).encode()}
        if self.savepoint is not None:
            metadata[_SAVEPOINT_KEY] = self.savepoint.encode()
        if self.unaligned:
            metadata[_UNALIGNED_KEY] = b"1"
        return metadata


@dataclass(frozen=True)
class Watermark(Event):
    """No record with a timestamp at or below ``timestamp`` (epoch milliseconds) follows on this channel, as
    far as its producer knows (Flink's semantics: records later than that are late, not lost)."""

    timestamp: int

    def to_metadata(self) -> dict[bytes, bytes]:
        return {_EVENT_KEY: b"watermark", _TIMESTAMP_KEY: str(self.timestamp).encode()}


@dataclass(frozen=True)
class WatermarkStatus(Event):
    """Whether the producer of a channel is idle (``WatermarkStrategy.with_idleness``): an idle channel does
    not hold its consumer's watermark back until it sends a watermark again (Flink's ``WatermarkStatus``)."""

    idle: bool

    def to_metadata(self) -> dict[bytes, bytes]:
        return {_EVENT_KEY: b"idle" if self.idle else b"active"}


WatermarkStatus.IDLE = WatermarkStatus(True)
WatermarkStatus.ACTIVE = WatermarkStatus(False)


def event_from_metadata(metadata) -> Event | None:
    if not metadata:
        return None
    kind = metadata.get(_EVENT_KEY)
    if kind == b"end":
        return END_OF_INPUT
    if kind == b"barrier":
        savepoint = metadata.get(_SAVEPOINT_KEY)
        return CheckpointBarrier(int(metadata[_CHECKPOINT_KEY]), savepoint.decode() if savepoint else None,
                                 int(metadata.get(_TIMESTAMP_KEY, 0)), _UNALIGNED_KEY in metadata)
    if kind == b"stopped":
        return END_OF_INPUT_STOPPED
    if kind == b"watermark":
        return Watermark(int(metadata[_TIMESTAMP_KEY]))
    if kind == b"idle":
        return WatermarkStatus.IDLE
    if kind == b"active":
        return WatermarkStatus.ACTIVE
    if kind is None:
        return None
    raise ProtocolError(f"Unknown event in a data stream: {kind!r} (are all processes on the same Chandy version?)")


