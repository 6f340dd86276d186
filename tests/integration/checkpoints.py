"""Reading a checkpoint's state back through the restore path, for assertions in tests."""

from __future__ import annotations

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
