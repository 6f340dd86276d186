"""Reading a checkpoint's state back through the restore path, for assertions in tests."""

from __future__ import annotations

import os

from operators import MapFunction
from runtime.executor.restore import restore_operator
from runtime.keys.key_groups import key_group_range
from runtime.protocol.checkpoints import RestoreSpec
from state_backends import HeapKeyedStateBackend


class _Capture:
    state: dict = {}

    def restore_operator_state(self, state):
        self.state = state


def restored_state(storage, checkpoint, uid, state_name=None):
    """``(keyed entries {key: value} of state_name, operator list state)`` of one operator, as one subtask."""
    max_p = checkpoint.max_parallelism
    handles = checkpoint.operator(uid).handles
    spec = RestoreSpec(checkpoint.checkpoint_id, handles, tuple(h for h in handles if h.has_operator_state),
                       (0, max_p - 1))
    backend = HeapKeyedStateBackend(max_p, key_group_range(max_p, 1, 0))
    capture = _Capture()
    restore_operator(storage, spec, capture, backend, 0, 1)
    keyed = {key: value for _, key, value in backend.entries(state_name)} if state_name else {}
    return keyed, capture.state


class SignalAfterCheckpoints(MapFunction):
    """Passes records through; creates the file ``path`` once ``checkpoints`` checkpoints completed (a test waits
    for it, then cancels or restores the job)."""

    def __init__(self, path, checkpoints):
        self.path, self.checkpoints = path, checkpoints

    def open(self, runtime_context):
        self.completed = 0

    def notify_checkpoint_complete(self, checkpoint_id):
        self.completed += 1
        if self.completed >= self.checkpoints and not os.path.exists(self.path):
            open(self.path, "w").close()

    def map(self, n):
        return n
