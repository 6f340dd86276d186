"""Checkpoint storage, savepoints, FileSink and FileSource on an S3-protocol server (tests/s3_server.py), through
s3fs: what they rely on there (one PUT per object, a conditional PUT for ``_metadata``, no rename, listings that are
not cached), and the errors a user gets when the endpoint, the bucket or the credentials are wrong."""

import dataclasses
import json
import socket

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators import FileSink, FileSource
from operators.two_phase_commit import RecoveredState, TransactionContext
from runtime.driver.completed_checkpoints import CompletedCheckpointStore
from runtime.errors import InputUnreachableError, OutputUnreachableError, StorageUnreachableError
from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState
from state_backends.storage import CheckpointStatus, CheckpointStorage


@pytest.fixture
def bucket(s3_server):
    return s3_server.bucket("unit")


def closed_port_endpoint() -> str:
    """An endpoint where nothing listens (a port bound and released: refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def checkpoint_with(storage, checkpoint_id, handles=()):
    return CompletedCheckpoint(checkpoint_id, storage.job_name, 0, 0, 1, 128,
                               (OperatorState("count", "count", 1, tuple(handles)),))


def commit_checkpoint(storage, checkpoint_id):
    handle = storage.write_state_file(checkpoint_id, "count", 0, [(3, f"state {checkpoint_id}".encode())])
    checkpoint = checkpoint_with(storage, checkpoint_id, [handle])
    storage.write_metadata(checkpoint)
    return checkpoint


# -- checkpoint storage --------------------------------------------------------------------------------------


def test_state_files_and_metadata_round_trip_through_s3(bucket):
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "round trip")
    storage.check_writable()
    handle = storage.write_state_file(7, "count", 0, [(3, b"three"), (5, b"five" * 100_000)])
    assert list(storage.read_state_rows(7, handle, {5})) == [(5, b"five" * 100_000)]
    storage.write_metadata(checkpoint_with(storage, 7, [handle]))
    assert storage.validated_checkpoint(7).state_handles == (handle,)
    assert storage.checkpoint_ids() == [7] and storage.next_checkpoint_id() == 8
    assert storage.checkpoint_url(7) == f"s3://{bucket}/checkpoints/round-trip/chk-7"


def test_metadata_is_created_once_by_a_conditional_put_that_the_server_enforces(bucket):
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "once")
    store, path = storage.store, storage.metadata_path(1)
    assert store.create_if_absent(path, b"first")
    assert store.create_if_absent(path, b"first"), "a retried create whose first try landed"
    assert not store.create_if_absent(path, b"second") and store.read(path) == b"first"
    # Without the look first (as a racing writer would be): the server refuses the exclusive create itself
    # (s3fs's mode "xb" sends If-None-Match: *), so two writers cannot both commit one checkpoint.
    with pytest.raises(FileExistsError):
        store._create_remote(path, b"racing")
    assert store.read(path) == b"first"
    commit_checkpoint(storage, 2)
    with pytest.raises(Exception, match="Checkpoint 2 already exists"):
        storage.write_metadata(checkpoint_with(storage, 2))


def test_survey_and_retention_on_s3(bucket):
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "retention")
    for checkpoint_id in (1, 2, 3):
        commit_checkpoint(storage, checkpoint_id)
    storage.write_state_file(4, "count", 0, [(3, b"never committed")])  # a directory without _metadata
    storage.store.write(storage.metadata_path(5), b"not json")
    assert [(s.checkpoint_id, s.status) for s in storage.survey()] == [
        (1, CheckpointStatus.COMPLETED), (2, CheckpointStatus.COMPLETED), (3, CheckpointStatus.COMPLETED),
        (4, CheckpointStatus.INCOMPLETE), (5, CheckpointStatus.UNREADABLE)]
    retained = CompletedCheckpointStore(storage, retained=2)
    retained.add(commit_checkpoint(storage, 6))
    assert retained.ids() == [3, 6]
    assert storage.checkpoint_ids() == [3, 5, 6], "1 and 2 subsumed, 4 abandoned; 5 kept for a person to look at"
    assert storage.store.list(storage.checkpoint_dir(1)) == [], "a deleted checkpoint leaves no object behind"


def test_a_listing_is_never_answered_from_a_stale_cache(s3_server, bucket):
    """A filesystem given to the job may cache listings (s3fs does by default); what other processes wrote since
    must still be seen, or a restore would take a present file for a missing one."""
    cached = s3_server.filesystem(use_listings_cache=True)
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "cached", filesystem=cached)
    commit_checkpoint(storage, 1)
    assert storage.checkpoint_ids() == [1]
    elsewhere = CheckpointStorage(f"s3://{bucket}/checkpoints", "cached")  # another process's client
    commit_checkpoint(elsewhere, 2)
    assert storage.checkpoint_ids() == [1, 2]
    assert storage.problems(storage.read_checkpoint(2)) == []


def test_rocksdb_files_upload_once_and_download_checked(bucket, tmp_path):
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "rocksdb")
    sst = tmp_path / "000042.sst"
    sst.write_bytes(b"sorted strings " * 10_000)
    shared = storage.upload_shared(3, str(sst), "count", "0-000042.sst")
    private = storage.upload_private(3, str(sst), "count/0.rocksdb/MANIFEST")
    assert storage.shared_files() == [shared.path] and storage.shared_file_exists(shared.path)
    storage.download(shared, str(tmp_path / "back.sst"))
    assert (tmp_path / "back.sst").read_bytes() == sst.read_bytes()
    storage.download(storage.private_file(3, private), str(tmp_path / "manifest"))
    assert (tmp_path / "manifest").read_bytes() == sst.read_bytes()
    storage.delete_shared([shared.path])
    assert storage.shared_files() == [] and not storage.shared_file_exists(shared.path)
    with pytest.raises(Exception, match="is missing"):
        storage.download(shared, str(tmp_path / "gone.sst"))


def test_savepoints_on_s3_are_self_contained(bucket):
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "job")
    final = storage.write_state_file(4, "source", 0, [(-1, b"final position")], finished="ab12")
    handle = storage.write_state_file(4, "count", 0, [(3, b"three")])
    checkpoint = dataclasses.replace(checkpoint_with(storage, 4, [handle]), operators=(
        OperatorState("count", "count", 1, (handle,)), OperatorState("source", "source", 1, (final,))))
    savepoint = storage.savepoint_storage(storage.default_savepoint_url(), 4)
    assert savepoint.url.startswith(f"s3://{bucket}/checkpoints/job/savepoints/savepoint-4-")
    savepoint.write_state_file(4, "count", 0, [(3, b"three")])
    savepoint.write_metadata(savepoint.adopt(storage, checkpoint))
    restored = savepoint.validated()
    assert restored.checkpoint_id == 4 and all(not h.path.startswith("..") for h in restored.state_handles)
    assert list(savepoint.read_state_rows(4, restored.operator("source").handles[0])) == [(-1, b"final position")]
    savepoint.delete()
    with pytest.raises(Exception, match="is not a savepoint"):
        savepoint.read()


# -- files -----------------------------------------------------------------------------------------------------


def test_file_sink_commits_aborts_and_recovers_on_s3(bucket):
    sink = FileSink(f"s3://{bucket}/out", format="jsonl", max_part_bytes=5)
    sink.validate()
    txns = []
    for sequence in range(4):
        txn = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, sequence))
        sink.write(txn, [{"n": sequence}])
        sink.write(txn, [{"n": sequence + 10}])  # a second part: max_part_bytes
        sink.pre_commit(txn)
        txns.append(txn)
    assert sink.committed_files() == [], "pre-committed parts are durable, not visible"
    sink.commit(txns[0])
    sink.commit(txns[0])  # idempotent
    sink.commit(txns[2])  # committed after the checkpoint restored below
    aborted = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 4))
    sink.write(aborted, ["aborted"])
    sink.abort(aborted)
    leftover = sink.begin_transaction(TransactionContext(sink.run_id, 0, 1, 5))
    sink.write(leftover, ["in progress when the worker died"])
    sink._close_part(leftover)
    # The checkpoint held sequences 0 and 1, 1 pending; everything from 2 on came after it.
    restarted = FileSink(f"s3://{bucket}/out", format="jsonl", max_part_bytes=10)
    restarted.run_id = sink.run_id
    restarted.recover(RecoveredState(sink.run_id, (txns[1],), {0: 2}))
    assert sorted(r["n"] for r in restarted.read_committed()) == [0, 1, 10, 11]
    assert restarted.fs.find(restarted._path("_inprogress")) == []
    assert len(restarted.committed_files()) == 4 and len(restarted.fs.ls(restarted._path("_committed"))) == 4, \
        "the parts and markers of sequence 2, committed after the checkpoint, are gone"


def test_file_source_reads_s3(s3_server, bucket):
    fs = s3_server.filesystem()
    fs.pipe(f"{bucket}/in/a.jsonl", b'{"n": 1}\n{"n": 2}\n')
    fs.pipe(f"{bucket}/in/_hidden/skipped.jsonl", b'{"n": 99}\n')
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table({"n": [3, 4]}), buffer)
    fs.pipe(f"{bucket}/parquet/p.parquet", buffer.getvalue().to_pybytes())
    source = FileSource(f"s3://{bucket}/in", format="jsonl")
    source.validate()
    reader = source.create_reader(0, 1)
    reader.open(None)
    assert reader.poll(10) == [{"n": 1}, {"n": 2}] and reader.poll(10) is None
    parquet = FileSource(f"s3://{bucket}/parquet", format="parquet").create_reader(0, 1)
    parquet.open(None)
    assert parquet.poll(10) == [{"n": 3}, {"n": 4}]


def test_storage_options_reach_the_filesystem_and_travel_pickled(s3_server, bucket):
    import pickle

    options = {"endpoint_url": closed_port_endpoint()}
    sink = pickle.loads(pickle.dumps(FileSink(f"s3://{bucket}/out", storage_options=options)))
    assert sink.fs.endpoint_url == options["endpoint_url"]
    source = pickle.loads(pickle.dumps(FileSource(f"s3://{bucket}/in", storage_options=options)))
    assert source.create_reader(0, 1).fs.endpoint_url == options["endpoint_url"]


# -- errors before launch: the URL, the problem, the fix ------------------------------------------------------


def probes(url, **options):
    """Each launch check that touches ``url``: (what, the call, the error it raises)."""
    storage_fs = None
    if options:
        import s3fs

        storage_fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    return [
        ("checkpoint storage", lambda: CheckpointStorage(url, "job", filesystem=storage_fs).check_writable(),
         StorageUnreachableError),
        ("FileSink", lambda: FileSink(url, storage_options=options).validate(), OutputUnreachableError),
        ("FileSource", lambda: FileSource(url, storage_options=options).validate(), InputUnreachableError),
    ]


def assert_every_probe_fails(url, expected, **options):
    for what, probe, error in probes(url, **options):
        with pytest.raises(error) as caught:
            probe()
        message = str(caught.value)
        assert url.split("://")[1].split("/")[0] in message, f"{what}: {message}"
        assert expected in message and "Fix:" in message, f"{what}: {message}"


def test_an_unreachable_endpoint_fails_fast_naming_the_fix(bucket):
    assert_every_probe_fails(f"s3://{bucket}/data", "Nothing answers at the storage's endpoint",
                             endpoint_url=closed_port_endpoint())


def test_a_missing_bucket_is_reported_and_never_created(s3_server):
    url = "s3://chandy-no-such-bucket/data"
    for what, probe, error in probes(url):
        with pytest.raises(error, match="chandy-no-such-bucket.*The bucket does not exist. Fix: create it"):
            probe()
    with pytest.raises(InputUnreachableError, match="The bucket does not exist"):
        FileSource(url, continuous=True).validate()  # would otherwise wait for files forever
    assert "chandy-no-such-bucket" not in {b["Name"] for b in s3_server.client().list_buckets()["Buckets"]}


def test_wrong_credentials_are_reported(s3_server, bucket):
    with s3_server.authentication():
        assert_every_probe_fails(f"s3://{bucket}/data", "The server rejected the credentials", key="wrong",
                                 secret="wrong")


def test_missing_credentials_are_reported(s3_server, bucket, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for what, probe, error in probes(f"s3://{bucket}/data", use_listings_cache=False):  # botocore's own refusal
        with pytest.raises(error, match="No credentials were found. Fix: set AWS_ACCESS_KEY_ID"):
            probe()


def test_the_metadata_names_every_file_it_needs(bucket):
    """What a reader of the bucket sees of a checkpoint: its _metadata, written last, names its state files."""
    storage = CheckpointStorage(f"s3://{bucket}/checkpoints", "metadata")
    checkpoint = commit_checkpoint(storage, 1)
    metadata = json.loads(storage.store.read(storage.metadata_path(1)))
    assert metadata and storage.read_checkpoint(1) == checkpoint
