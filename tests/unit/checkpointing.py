"""Taking a checkpoint of one keyed backend without Spark: its snapshot stored by a real Snapshotter, the
acknowledgement awaited, the completion notified."""

from __future__ import annotations

import time

from runtime.executor.snapshotter import OperatorSnapshot, SubtaskSnapshot


def take_checkpoint(backend, snapshotter, sent: list, checkpoint_id: int, complete: bool = True,
                    full: bool = False):
    """Checkpoint ``checkpoint_id`` of ``backend`` through ``snapshotter`` (whose messages go to ``sent``);
    returns the operator's state handle. ``complete``: notify the backend that the checkpoint completed."""
    snapshot = backend.snapshot(full)
    snapshotter.submit(SubtaskSnapshot(checkpoint_id, 0, 0, [OperatorSnapshot("op", snapshot, {})], 0.0, 0.0,
                                       time.monotonic()))
    deadline = time.monotonic() + 60
    while not any(m.checkpoint_id == checkpoint_id for m in sent):  # the snapshotter's thread answers
        assert time.monotonic() < deadline, "the snapshotter never answered"
        time.sleep(0.005)
    message = next(m for m in sent if m.checkpoint_id == checkpoint_id)
    assert type(message).__name__ == "AcknowledgeCheckpoint", message
    if complete:
        backend.notify_checkpoint_complete(checkpoint_id)
    return message.state[0]
