import pytest

from runtime.driver.restore_plan import resolve_restore
from runtime.errors import CheckpointNotFoundError, CorruptCheckpointError, StorageUnreachableError
from runtime.keys.key_groups import assign_to_key_group, key_group_range
from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState
from runtime.tools.cli import main as chandy
from state_backends import HeapKeyedStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from state_backends.storage import CheckpointStorage


def backend_with_state(keys=200):
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    value = backend.get_state(ValueStateDescriptor("v"))
    items = backend.get_state(ListStateDescriptor("l"))
    mapping = backend.get_state(MapStateDescriptor("m"))
    for key in range(keys):
        backend.set_current_key(key)
        value.update({"n": key})
        items.add(key)
        mapping.put("k", key)
    return backend, value, items, mapping


def restore(rows):
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    for group, payload in rows:
        backend.restore_key_group(group, payload)
    return backend


def test_snapshot_is_the_state_at_the_barrier_whatever_happens_after():
    backend, value, items, mapping = backend_with_state()
    snapshot = backend.snapshot()
    for key in range(0, 200, 3):  # the task keeps going: updates, in-place mutation, new keys
        backend.set_current_key(key)
        value.value()["n"] = -1  # mutating a state object in place, without update()
        items.add("late")
        mapping.put("late", True)
    backend.set_current_key("new key")
    value.update({"n": 0})
    restored = restore(list(snapshot.serialized()))
    v = restored.get_state(ValueStateDescriptor("v"))
    lst = restored.get_state(ListStateDescriptor("l"))
    m = restored.get_state(MapStateDescriptor("m"))
    for key in range(200):
        restored.set_current_key(key)
        assert v.value() == {"n": key} and list(lst.get()) == [key] and dict(m.items()) == {"k": key}
    restored.set_current_key("new key")
    assert v.value() is None
    backend.set_current_key(3)
    assert value.value() == {"n": -1}, "the live state did change"


def test_snapshot_sync_part_does_not_touch_keys():
    backend, *_ = backend_with_state(keys=5000)
    snapshot = backend.snapshot()
    assert snapshot.pending == {assign_to_key_group(k, 128) for k in range(5000)}
    assert snapshot._pickled == {} and all(
        snapshot._frozen[group]["v"] is backend._tables["v"][group] for group in snapshot.pending
    ), "nothing is copied at the barrier"
    list(snapshot.serialized())
    assert backend._snapshots == ()


def counts_backend(keys, value_of):
    backend = HeapKeyedStateBackend(128, key_group_range(128, 1, 0))
    state = backend.get_state(ValueStateDescriptor("v"))
    for key in range(keys):
        backend.set_current_key(key)
        state.update(value_of(key))
    return backend, state


def restored_values(snapshot, keys):
    restored = restore(snapshot.serialized())
    v = restored.get_state(ValueStateDescriptor("v"))
    values = {}
    for key in keys:
        restored.set_current_key(key)
        values[key] = v.value()
    return values


def test_the_task_captures_a_pending_group_before_changing_it():
    backend, state = counts_backend(5000, lambda key: (key, b"payload"))
    snapshot = backend.snapshot()
    backend.set_current_key(7)
    state.update((-1, b"changed"))
    assert list(snapshot._pickled) == [assign_to_key_group(7, 128)], "only the touched group, at touch"
    assert restored_values(snapshot, [7, 8]) == {7: (7, b"payload"), 8: (8, b"payload")}


def test_updates_deletes_and_new_keys_after_the_barrier_do_not_reach_the_snapshot():
    backend, state = counts_backend(300, lambda key: (key, b"payload", "s", 1.5, None))
    snapshot = backend.snapshot()
    for key in range(0, 300, 2):
        backend.set_current_key(key)
        state.update((-1, b"changed", "t", 0.0, None))
    for key in range(1, 300, 4):
        backend.set_current_key(key)
        state.clear()
    for key in range(300, 400):
        backend.set_current_key(key)
        state.update((key, b"new", "n", 0.0, None))
    assert restored_values(snapshot, range(400)) == {
        key: (key, b"payload", "s", 1.5, None) if key < 300 else None for key in range(400)}


def test_values_mutated_in_place_after_the_barrier_do_not_reach_the_snapshot():
    backend, state = counts_backend(300, lambda key: (key, [key]))  # a list inside a tuple: mutable
    snapshot = backend.snapshot()
    for key in range(300):
        backend.set_current_key(key)
        state.value()[1].append("late")  # in place, without update()
    assert restored_values(snapshot, range(300)) == {key: (key, [key]) for key in range(300)}


def test_a_group_already_written_is_not_changed_by_later_updates():
    backend, state = counts_backend(300, lambda key: [key])
    snapshot = backend.snapshot()
    rows = snapshot.serialized()
    first_group, first_payload = next(rows)  # captured: no longer pending, the task may change it now
    for key in range(300):
        backend.set_current_key(key)
        state.value().append("late")
    rest = restore([(first_group, first_payload), *rows])
    v = rest.get_state(ValueStateDescriptor("v"))
    for key in range(300):
        rest.set_current_key(key)
        assert v.value() == [key]


def test_a_value_that_cannot_be_copied_fails_the_checkpoint_not_the_task():
    import threading

    backend, state = counts_backend(10, lambda key: [key])
    backend.set_current_key(3)
    state.update([threading.Lock()])
    snapshot = backend.snapshot()
    backend.set_current_key(3)  # the task goes on
    with pytest.raises(TypeError, match="cannot be checkpointed"):
        list(snapshot.serialized())
    assert backend._snapshots == ()


def test_snapshot_streams_one_group_at_a_time():
    backend, _ = counts_backend(5000, lambda key: key)
    snapshot = backend.snapshot()
    groups = len(snapshot.pending)
    rows = snapshot.serialized()
    next(rows)
    assert len(snapshot.pending) == groups - 1, "the rest is not pickled before the first is written"
    assert len(list(rows)) == groups - 1 and backend._snapshots == ()


def test_a_snapshot_that_fails_to_upload_is_released(tmp_path):
    from runtime.executor.snapshotter import OperatorSnapshot, Snapshotter, SubtaskSnapshot
    from runtime.protocol.messages import DeclineCheckpoint

    class FailingStorage:
        def write_state_file(self, checkpoint_id, uid, subtask, rows):
            raise OSError("disk full")  # before reading a single group

    backend, _ = counts_backend(1000, lambda key: key)
    sent = []
    snapshotter = Snapshotter(FailingStorage(), 0, sent.append)
    snapshotter.submit(SubtaskSnapshot(1, 0, 0, [OperatorSnapshot("op", backend.snapshot())], 0.0, 0.0, 0.0))
    snapshotter.close(timeout=10)
    assert [type(m) for m in sent] == [DeclineCheckpoint] and "disk full" in sent[0].reason
    assert backend._snapshots == (), "the task no longer pays for a checkpoint that failed"


def test_state_file_reads_only_the_requested_key_groups(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    handle = storage.write_state_file(3, "op", 1, [(5, b"five"), (9, b"nine"), (-1, b"operator")])
    assert list(storage.read_state_rows(3, handle, {9})) == [(9, b"nine")]
    assert [g for g, _ in storage.read_state_rows(3, handle)] == [5, 9, -1]


def write_checkpoint(storage, checkpoint_id):
    handle = storage.write_state_file(checkpoint_id, "op", 0, [(1, b"x")])
    storage.write_metadata(CompletedCheckpoint(checkpoint_id, "job", 0, 0, 1, 128,
                                               (OperatorState("op", "op", 1, (handle,)),)))
    return handle


def test_broken_checkpoints_are_never_usable_and_errors_list_the_usable_ones(tmp_path):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    info = write_checkpoint(storage, 2)
    write_checkpoint(storage, 3)
    write_checkpoint(storage, 4)
    (tmp_path / "job" / "chk-2" / info.path).write_bytes(b"truncated")
    (tmp_path / "job" / "chk-3" / "_metadata").write_text("{not json")
    (tmp_path / "job" / "chk-4" / "_metadata").unlink()
    assert storage.usable_ids() == [1]
    with pytest.raises(CorruptCheckpointError, match=r"9 bytes.*Usable checkpoints: \[1\]"):
        resolve_restore(storage, 2)
    with pytest.raises(CorruptCheckpointError, match=r"unreadable.*Usable checkpoints: \[1\]"):
        resolve_restore(storage, "3")
    with pytest.raises(CorruptCheckpointError, match="never completed"):
        resolve_restore(storage, 4)
    with pytest.raises(CheckpointNotFoundError, match="7 does not exist"):
        resolve_restore(storage, 7)
    assert resolve_restore(storage, "latest").checkpoint.checkpoint_id == 1
    assert resolve_restore(storage, str(tmp_path / "job" / "chk-1")).checkpoint.checkpoint_id == 1


def test_unreachable_storage_fails_at_once_naming_the_url(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    storage = CheckpointStorage(f"file://{blocker}/below", "job")
    with pytest.raises(StorageUnreachableError, match="a-file/below"):
        storage.check_writable()


def test_cli_lists_and_describes_checkpoints(tmp_path, capsys):
    storage = CheckpointStorage(f"file://{tmp_path}", "job")
    write_checkpoint(storage, 1)
    write_checkpoint(storage, 2)
    assert chandy(["checkpoints", str(tmp_path / "job")]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing[1:]] == ["1", "2"]
    assert chandy(["checkpoint", str(tmp_path / "job"), "2"]) == 0
    assert "subtask 0: op/0.arrow" in capsys.readouterr().out
    assert chandy(["checkpoint", str(tmp_path / "job"), "5"]) == 2
    assert "Usable checkpoints: [1, 2]" in capsys.readouterr().err
    assert chandy(["checkpoint", str(tmp_path / "job"), "latest"]) == 0
    assert capsys.readouterr().out.startswith("checkpoint 2 of job 'job'")


def test_an_aborted_checkpoint_stops_being_written_and_is_not_reported():
    from runtime.executor.snapshotter import OperatorSnapshot, Snapshotter, SubtaskSnapshot

    written = []

    class AbortingStorage:  # the coordinator aborts checkpoint 1 while its first key group is written
        def write_state_file(self, checkpoint_id, uid, subtask, rows):
            for group, _ in rows:
                written.append(group)
                snapshotter.abort(checkpoint_id)

    backend, _ = counts_backend(5000, lambda key: key)
    sent = []
    snapshotter = Snapshotter(AbortingStorage(), 0, sent.append)
    snapshotter.submit(SubtaskSnapshot(1, 0, 0, [OperatorSnapshot("op", backend.snapshot())], 0.0, 0.0, 0.0))
    snapshotter.close(timeout=10)
    assert len(written) == 1, "no key group is written after the abort"
    assert sent == [], "the coordinator already knows: no ack, no decline"
    assert backend._snapshots == ()


def test_a_checkpoint_whose_directory_was_removed_is_declined_without_a_warning(tmp_path, caplog, monkeypatch):
    from runtime.executor.snapshotter import OperatorSnapshot, Snapshotter, SubtaskSnapshot
    from runtime.protocol.messages import DeclineCheckpoint

    storage = CheckpointStorage(f"file://{tmp_path}", "job")  # chk-1 was never created: as if removed
    monkeypatch.setattr(storage.fs, "makedirs", lambda *a, **k: None)  # fsspec shares the instance
    backend, _ = counts_backend(100, lambda key: key)
    sent = []
    snapshotter = Snapshotter(storage, 0, sent.append)
    snapshotter.submit(SubtaskSnapshot(1, 0, 0, [OperatorSnapshot("op", backend.snapshot())], 0.0, 0.0, 0.0))
    with caplog.at_level("DEBUG", logger="runtime.executor.snapshotter"):
        snapshotter.close(timeout=10)
    assert [type(m) for m in sent] == [DeclineCheckpoint]
    assert [r.levelname for r in caplog.records] == ["DEBUG"] and "FileNotFoundError" in caplog.text
