"""Recording the records in flight on one input gate for an unaligned checkpoint (its channel state).

When a subtask snapshots at the first barrier of unaligned checkpoint n, its state covers what it has processed;
the records its producers sent before their barrier n and it has not processed yet belong to the checkpoint too.
Per input channel they are the records queued ahead of barrier n in the gate at that moment, and, on a channel
whose barrier n has not come yet, every record put on the channel until it comes (Flink's channel state).

The recorder lives in the gate and is fed under the gate's lock: what is queued when the subtask snapshots
(:meth:`InFlightRecorder.capture`), then each put on a channel still open (:meth:`InFlightRecorder.on_put`). Items
are pickled as they are recorded: the subtask goes on processing the same records, and an operator that
changes a record in place must not change the checkpoint.

>>> from runtime.protocol.events import CheckpointBarrier
>>> recorder = InFlightRecorder(checkpoint_id=3, channels=2)
>>> recorder.capture(0, [[1, 2], CheckpointBarrier(3), [3]])  # channel 0: its barrier is queued behind [1, 2]
>>> recorder.capture(1, [[10]])  # channel 1: its barrier is still on the way
>>> recorder.complete
False
>>> recorder.on_put(1, [11]); recorder.on_put(1, CheckpointBarrier(3)); recorder.on_put(1, [12])
>>> recorder.complete, [[pickle.loads(item) for item in items] for items in recorder.items]
(True, [[[1, 2]], [[10], [11]]])
"""

from __future__ import annotations

import pickle

import cloudpickle

from runtime.protocol.events import CheckpointBarrier, EndOfInput, Event

__all__ = ["InFlightRecorder"]


class InFlightRecorder:
    """The in-flight records of one gate for checkpoint ``checkpoint_id``, channel by channel, pickled."""

    def __init__(self, checkpoint_id: int, channels: int):
        self.checkpoint_id = checkpoint_id
        self.items: list[list[bytes]] = [[] for _ in range(channels)]
        self.open: set[int] = set()  # channels whose barrier has not been put yet
        self.bytes = 0
        self.error: Exception | None = None  # a record that could not be pickled: the checkpoint is declined

    @property
    def complete(self) -> bool:
        return not self.open

    def _ends(self, item) -> bool:
        """Whether ``item`` closes its channel for this checkpoint: its barrier (or a later one), or the end."""
        kind = item.__class__
        return kind is EndOfInput or (kind is CheckpointBarrier and item.checkpoint_id >= self.checkpoint_id)

    def _record(self, index: int, item) -> None:
        if isinstance(item, Event):  # watermarks and idleness are not state: they are made again
            return
        try:
            data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            try:  # records holding functions or classes defined in __main__
                data = cloudpickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # not here, on a reader thread: the snapshot reports it
                self.error = self.error or exc
                return
        self.items[index].append(data)
        self.bytes += len(data)

    def capture(self, index: int, queued, limit: int | None = None) -> None:
        """Record what channel ``index`` has queued, up to its barrier (or only the first ``limit`` items: those a
        priority barrier overtook); the channel stays open if its barrier has not been put yet."""
        for position, item in enumerate(queued):
            if (limit is not None and position >= limit) or self._ends(item):
                return
            self._record(index, item)
        if limit is None:
            self.open.add(index)

    def on_put(self, index: int, item) -> None:
        """``item`` was put on channel ``index``: a record before its barrier, or what closes it."""
        if index not in self.open:
            return
        if self._ends(item):
            self.open.discard(index)
        else:
            self._record(index, item)

    def close(self, index: int) -> None:
        """Channel ``index``'s barrier came as a priority event: it closes the channel wherever it is queued."""
        self.open.discard(index)
