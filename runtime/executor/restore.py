"""Loading one operator subtask's share of a checkpoint, on the executor, before its operators open.

The driver planned what each subtask reads (:mod:`runtime.driver.restore_plan`). Keyed state moves by key
group: a subtask reads exactly the key groups the key-group formula assigns it. Operator list state is dealt
round-robin: the lists of all old subtasks, concatenated in subtask order, item ``j`` going to new subtask
``j % parallelism`` (Flink's even split); lists named ``union:...`` go whole to every subtask (Flink's union
redistribution).
"""

from __future__ import annotations

import pickle

from runtime.protocol.checkpoints import RestoreSpec
from state_backends.storage import OPERATOR_STATE_GROUP

__all__ = ["restore_operator", "UNION_PREFIX"]

UNION_PREFIX = "union:"  # operator list state every subtask receives whole (each keeps what it owns)


def restore_operator(storage, spec: RestoreSpec, operator, backend, subtask: int, parallelism: int) -> None:
    """Load one operator subtask's state (runs on the executor, before the operator opens)."""
    if backend is not None:
        start, end = spec.key_groups
        wanted = set(range(start, end + 1))
        for file in spec.keyed_files:
            for group, payload in storage.read_state_rows(spec.checkpoint_id, file, wanted):
                backend.restore_key_group(group, payload)
    if spec.operator_files:
        combined: dict[str, list] = {}
        for file in spec.operator_files:
            for _, payload in storage.read_state_rows(spec.checkpoint_id, file, {OPERATOR_STATE_GROUP}):
                for name, items in pickle.loads(payload).items():
                    combined.setdefault(name, []).extend(items)
        share = {name: items if name.startswith(UNION_PREFIX) else items[subtask::parallelism]
                 for name, items in combined.items()}
        operator.restore_operator_state(share)
