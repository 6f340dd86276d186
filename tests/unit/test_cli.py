"""The ``chandy checkpoints`` / ``chandy checkpoint`` commands on real checkpoint directories (no Spark)."""

from __future__ import annotations

from runtime.protocol.checkpoints import CompletedCheckpoint, OperatorState
from runtime.tools.cli import main as chandy
from state_backends.storage import CheckpointStorage


def commit(storage: CheckpointStorage, checkpoint_id: int) -> CompletedCheckpoint:
    """A completed checkpoint of ``storage``'s job: one state file and its ``_metadata``."""
    handle = storage.write_state_file(checkpoint_id, "count", 0, [(7, b"state of key group 7")])
    checkpoint = CompletedCheckpoint(checkpoint_id, storage.job_name, 1_700_000_000_000 + checkpoint_id, 0, 1, 128,
                                     (OperatorState("count", "Count", 1, (handle,)),))
    storage.write_metadata(checkpoint)
    return checkpoint


def storage_with_two_jobs(root):
    """``root`` as a checkpoint storage: job "my job" (folder my-job) with checkpoints 1 and 2 completed and 3
    never completed, job "other" with checkpoint 5, and a folder and a file that are not jobs."""
    mine = CheckpointStorage(f"file://{root}", "my job")
    commit(mine, 1)
    commit(mine, 2)
    mine.write_state_file(3, "count", 0, [(7, b"never committed")])  # chk-3 without _metadata
    commit(CheckpointStorage(f"file://{root}", "other"), 5)
    (root / "logs").mkdir()
    (root / "logs" / "driver.log").write_text("not a job\n")
    (root / "notes.txt").write_text("not a job either\n")


def test_a_directory_that_does_not_exist_is_an_error_saying_what_dir_is(tmp_path, capsys):
    missing = tmp_path / "chandy-checkpoints" / "my-job"
    assert chandy(["checkpoints", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"chandy: {missing} does not exist.")
    assert "<checkpoint storage>/<job name>" in err and "No completed checkpoint" not in err
    assert chandy(["checkpoint", str(missing), "latest"]) == 2
    assert f"{missing} does not exist" in capsys.readouterr().err


def test_a_file_is_not_a_job_directory(tmp_path, capsys):
    (tmp_path / "my-job").write_text("")
    assert chandy(["checkpoints", str(tmp_path / "my-job")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_the_storage_root_lists_its_jobs_and_says_to_pass_one(tmp_path, monkeypatch, capsys):
    storage_with_two_jobs(tmp_path / "chandy-checkpoints")
    monkeypatch.chdir(tmp_path)
    assert chandy(["checkpoints", "./chandy-checkpoints"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == "./chandy-checkpoints is a checkpoint storage, not a job's directory. Its jobs:"
    assert lines[1].split() == ["job", "completed", "checkpoints", "newest"]
    assert [line.split() for line in lines[2:-1]] == [["my-job", "2", "2"], ["other", "1", "5"]]
    assert lines[-1] == "Pass one of them: chandy checkpoints ./chandy-checkpoints/my-job"

    # the directory it names is the job's, and lists its checkpoints as before
    assert chandy(["checkpoints", "./chandy-checkpoints/my-job"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing[1:]] == ["1", "2"]
    assert chandy(["checkpoint", str(tmp_path / "chandy-checkpoints" / "other"), "latest"]) == 0
    assert capsys.readouterr().out.startswith("checkpoint 5 of job 'other'")


def test_describing_a_checkpoint_of_the_storage_root_names_its_jobs(tmp_path, capsys):
    storage_with_two_jobs(tmp_path)
    assert chandy(["checkpoint", str(tmp_path), "latest"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{tmp_path} is a checkpoint storage, not a job's directory" in err
    assert f"e.g. {tmp_path}/my-job" in err and "other" in err


def test_a_job_directory_without_checkpoints_and_an_empty_storage_say_so(tmp_path, capsys):
    (tmp_path / "empty-job").mkdir()
    assert chandy(["checkpoints", str(tmp_path / "empty-job")]) == 0
    assert capsys.readouterr().out.startswith("No completed checkpoint in ")
    assert chandy(["checkpoints", str(tmp_path)]) == 0  # a folder, but no job in it has checkpoints
    assert capsys.readouterr().out.startswith("No completed checkpoint in ")


def test_a_savepoint_or_a_chk_directory_is_described_by_its_path_alone(tmp_path, capsys):
    from state_backends.storage import SavepointStorage

    savepoint = SavepointStorage(f"file://{tmp_path}/savepoints/savepoint-4-1a2b3c")
    handle = savepoint.write_state_file(4, "count", 0, [(7, b"state of key group 7")])
    savepoint.write_metadata(CompletedCheckpoint(4, "my job", 1_700_000_000_004, 0, 1, 128,
                                                 (OperatorState("count", "Count", 1, (handle,)),), savepoint=True))
    assert chandy(["checkpoint", str(tmp_path / "savepoints" / "savepoint-4-1a2b3c")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"savepoint file://{tmp_path}/savepoints/savepoint-4-1a2b3c (of checkpoint 4) of job "
                          "'my job'"), out
    assert "operator 'Count' uid=count" in out and "key groups 7..7" in out and "restorable: yes" in out

    job = CheckpointStorage(f"file://{tmp_path}/ck", "my job")
    commit(job, 2)
    assert chandy(["checkpoint", str(tmp_path / "ck" / "my-job" / "chk-2")]) == 0
    assert capsys.readouterr().out.startswith("checkpoint 2 of job 'my job'")
    assert chandy(["checkpoint", str(tmp_path / "ck" / "my-job")]) == 2
    assert "neither a savepoint" in capsys.readouterr().err
