"""Settings that cannot work fail in execute() before a SparkSession exists, naming the setting and the fix."""

import importlib.util
import logging
import os

import pytest

from operators import FileSink, FileSource
from runtime import StreamExecutionEnvironment
from runtime.errors import ConfigurationError, InputUnreachableError, StorageUnreachableError


class SparkStarted(Exception):
    pass


@pytest.fixture
def env(monkeypatch):
    """An environment whose execute() raises SparkStarted at the moment it would create a SparkSession."""
    def no_spark(slots):
        raise SparkStarted()
    monkeypatch.setattr("runtime.datastream.stream_execution_environment.obtain_spark_session", no_spark)
    return StreamExecutionEnvironment.get_execution_environment()


def job(env, storage=None, source=None, sink=None):
    if storage is not None:
        env.enable_checkpointing(1000).get_checkpoint_config().set_checkpoint_storage(storage)
    stream = env.from_source(source, "files") if source is not None else env.from_sequence(0, 9)
    if sink is not None:
        stream.sink_to(sink)
    else:
        stream.print()
    return env


def test_an_unknown_storage_protocol_names_the_setting(env):
    with pytest.raises(ConfigurationError, match="checkpoint storage 'foo://bucket/ck': unknown protocol 'foo'"):
        job(env, storage="foo://bucket/ck").execute("job")


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed here")
def test_a_protocol_whose_package_is_missing_names_the_package(env):
    with pytest.raises(ConfigurationError, match=r"checkpoint storage 's3://bucket/ck'.*s3fs.*chandy\[s3\]"):
        job(env, storage="s3://bucket/ck").execute("job")


def test_an_unwritable_local_checkpoint_path_fails_before_spark(env, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageUnreachableError, match="unreachable"):
        job(env, storage=str(blocker / "ck")).execute("job")


def test_a_file_source_path_that_does_not_exist_fails_before_spark(env, tmp_path):
    missing = str(tmp_path / "no-such-dir" / "*.jsonl")
    with pytest.raises(InputUnreachableError, match="no files at"):
        job(env, source=FileSource(missing, "jsonl")).execute("job")


def test_a_file_sink_without_checkpointing_warns_that_it_commits_only_at_the_end(env, tmp_path, caplog):
    with caplog.at_level(logging.WARNING), pytest.raises(SparkStarted):
        job(env, sink=FileSink(str(tmp_path / "out"), "jsonl")).execute("job")
    assert any("checkpointing is off" in r.getMessage() and "enable_checkpointing" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    caplog.clear()
    env = job(StreamExecutionEnvironment.get_execution_environment(), storage=str(tmp_path / "ck"),
              sink=FileSink(str(tmp_path / "out"), "jsonl"))
    with caplog.at_level(logging.WARNING), pytest.raises(SparkStarted):
        env.execute("job")
    assert not caplog.records, "with checkpointing on, nothing to warn about"


def test_a_valid_job_reaches_spark(env, tmp_path):
    with pytest.raises(SparkStarted):
        job(env, storage=str(tmp_path / "ck")).execute("job")
    assert os.path.isdir(tmp_path / "ck"), "the storage was checked by writing to it"


def test_a_python_file_that_does_not_exist_fails_before_spark(env, tmp_path):
    with pytest.raises(ConfigurationError, match=r"add_python_file\(.*no-such-helpers.py'\): no such file"):
        job(env).add_python_file(str(tmp_path / "no-such-helpers.py")).execute("job")


def test_jars_are_accepted_with_a_warning_that_chandy_needs_none(env, caplog):
    with caplog.at_level(logging.WARNING):
        env.add_jars("file:///opt/flink-connector-kafka.jar")
    assert any("needs no jars" in r.getMessage() for r in caplog.records)


def test_overlapping_unaligned_checkpoints_are_refused(env, tmp_path):
    job(env, storage=str(tmp_path / "ck"))
    env.get_checkpoint_config().enable_unaligned_checkpoints().set_max_concurrent_checkpoints(2)
    with pytest.raises(ConfigurationError, match="Unaligned checkpoints cannot overlap.*set_max_concurrent_checkpoints"
                                                 r"\(1\)"):
        env.execute("job")


def test_overlapping_checkpoints_of_an_at_least_once_job_are_fine_its_checkpoints_stay_aligned(env, tmp_path):
    from runtime.checkpoint_config import CheckpointingMode

    job(env, storage=str(tmp_path / "ck"))
    env.get_checkpoint_config().enable_unaligned_checkpoints().set_max_concurrent_checkpoints(2) \
        .set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    with pytest.raises(SparkStarted):
        env.execute("job")


def test_a_checkpoint_to_restore_that_does_not_exist_fails_before_spark(env, tmp_path):
    from runtime.errors import CheckpointNotFoundError

    with pytest.raises(CheckpointNotFoundError, match="999"):
        job(env, storage=str(tmp_path)).execute("job", restore_from=999)
    with pytest.raises(CheckpointNotFoundError, match="latest"):
        job(env, storage=str(tmp_path)).execute("job", restore_from="latest")
