"""Loading one operator subtask's share of a checkpoint, on the executor, before its operators open.

The driver planned what each subtask reads (:mod:`runtime.driver.restore_plan`). Keyed state moves by key
group: a subtask reads exactly the key groups the key-group formula assigns it. Operator list state is dealt
round-robin: the lists of all old subtasks, concatenated in subtask order, item ``j`` going to new subtask
``j % parallelism`` (Flink's even split); lists named ``union:...`` go whole to every subtask (Flink's union
redistribution).

>>> from runtime.protocol.checkpoints import RestoreSpec
>>> from runtime.keys.key_groups import key_group_range
>>> from state_backends.heap import HeapKeyedStateBackend
>>> from state_backends.storage import CheckpointStorage
>>> storage = CheckpointStorage("memory://restore-doc", "job")
>>> lists = {"user:seen": [1, 2, 3, 4]}  # an operator list state, as its subtask checkpointed it
>>> handle = storage.write_state_file(1, "op", 0, [(OPERATOR_STATE_GROUP, pickle.dumps(lists))])
>>> class Operator:
...     def restore_operator_state(self, state): self.state = state
>>> operator = Operator()
>>> restore_operator(storage, RestoreSpec(1, (), (handle,), (64, 127)), operator,
...                  HeapKeyedStateBackend(128, key_group_range(128, 2, 1)), subtask=1, parallelism=2)
>>> operator.state  # subtask 1 of 2 takes every second item
{'user:seen': [2, 4]}
"""

from __future__ import annotations

import pickle

from runtime.ids import SubtaskIndex
from runtime.protocol.checkpoints import (
    HEAP_GROUPS_STATE_GROUP,
    NATIVE_STATE_GROUP,
    OPERATOR_STATE_GROUP,
    UNION_PREFIX,
    RestoreSpec,
)
from state_backends.heap.incremental import GroupManifest, restore_group_rows
from state_backends.rocksdb.incremental import restore_native_state

__all__ = ["restore_operator", "operator_lists", "UNION_PREFIX"]

_MANIFESTS = {NATIVE_STATE_GROUP, HEAP_GROUPS_STATE_GROUP}



def restore_operator(storage, spec: RestoreSpec, operator, backend, subtask: SubtaskIndex,
                     parallelism: int, own_job_dir: str | None = None) -> None:
    """Load one operator subtask's state (runs on the executor, before the operator opens). ``own_job_dir``: where
    the job's own checkpoints go (an incremental heap backend references the restored files only if it is
    ``storage``'s: paths are relative to the job's directory)."""
    if backend is not None:
        start, end = spec.key_groups
        wanted = set(range(start, end + 1))
        native, heap_files = [], {}
        for handle in spec.keyed:
            if not handle.is_native:
                for group, payload in storage.read_state_rows(spec.checkpoint_id, handle, wanted):
                    backend.restore_key_group(group, payload)
                continue
            for group, manifest in storage.read_state_rows(spec.checkpoint_id, handle, _MANIFESTS):
                if group == NATIVE_STATE_GROUP:
                    native.append(manifest)
                else:  # an incremental heap snapshot: its groups' rows, from the rows files that hold them
                    groups = GroupManifest.from_bytes(manifest)
                    for row in restore_group_rows(storage, spec.checkpoint_id, handle.uid, groups, handle.shared,
                                                  (start, end)):
                        backend.restore_key_group(*row)
                    shared = {stored.path: stored for stored in handle.shared}
                    heap_files.update({g: shared[path] for g, path in groups.files.items() if start <= g <= end})
        if native:  # incremental RocksDB snapshots: their files, into any backend
            restore_native_state(storage, spec.checkpoint_id, native, backend, (start, end))
        if heap_files and hasattr(backend, "adopt_group_files") and own_job_dir == storage.job_dir:
            backend.adopt_group_files(heap_files)
    if spec.operator:
        combined = operator_lists(storage, spec.checkpoint_id, spec.operator)
        share = {name: items if name.startswith(UNION_PREFIX) else items[subtask::parallelism]
                 for name, items in combined.items()}
        operator.restore_operator_state(share)


def operator_lists(storage, checkpoint_id, handles) -> dict[str, list]:
    """Each operator list state of ``handles`` (the files of an operator's subtasks), their items joined in the
    handles' order."""
    combined: dict[str, list] = {}
    for handle in handles:
        for _, payload in storage.read_state_rows(checkpoint_id, handle, {OPERATOR_STATE_GROUP}):
            for name, items in pickle.loads(payload).items():
                combined.setdefault(name, []).extend(items)
    return combined
