"""The Spark baselines' checkpoint directories (benchmarks.spark_baseline.query_checkpoint_dir): removed after the
query, even while a stopped query's last task still writes into them, and never failing the benchmark."""

from __future__ import annotations

import os
import shutil

from benchmarks import spark_baseline
from benchmarks.spark_baseline import query_checkpoint_dir


def test_the_directory_and_what_the_query_wrote_are_removed():
    with query_checkpoint_dir("chandy-test-sss-") as path:
        os.makedirs(os.path.join(path, "state", "0"))
        open(os.path.join(path, "state", "0", "1.delta"), "w").close()
    assert not os.path.exists(path)


def test_a_file_written_during_the_removal_is_removed_on_a_later_try(monkeypatch):
    real_rmtree, tries = shutil.rmtree, []

    def rmtree_racing_a_writer(path, *args, **kwargs):
        tries.append(path)
        if len(tries) < 3:  # the stopped query's task writes one more file as the directory goes
            raise OSError(39, "Directory not empty")
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(spark_baseline.shutil, "rmtree", rmtree_racing_a_writer)
    monkeypatch.setattr(spark_baseline.time, "sleep", lambda seconds: None)
    with query_checkpoint_dir("chandy-test-sss-") as path:
        pass
    assert len(tries) == 3 and not os.path.exists(path)


def test_a_directory_that_cannot_be_removed_is_left_and_named(monkeypatch, capsys):
    def rmtree_failing(path, *args, **kwargs):
        raise OSError(39, "Directory not empty")

    monkeypatch.setattr(spark_baseline.shutil, "rmtree", rmtree_failing)
    monkeypatch.setattr(spark_baseline.time, "sleep", lambda seconds: None)
    with query_checkpoint_dir("chandy-test-sss-") as path:
        pass
    assert path in capsys.readouterr().err
    os.rmdir(path)
