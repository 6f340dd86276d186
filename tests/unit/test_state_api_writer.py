"""SavepointWriter and SavepointReader without Spark: what is written reads back, partitioned as the runtime routes
keys, and an existing savepoint changes as asked."""

import collections
import itertools
import os
import pickle

import pandas as pd
import pyarrow as pa
import pytest

from runtime.errors import ConfigurationError, SavepointError, UnknownNameError
from runtime.keys.key_groups import assign_to_key_group, key_group_to_subtask
from runtime.state_api import SavepointReader, SavepointWriter

KEYS = [f"user-{n}" for n in range(50)]


def pairs(table, value="value"):
    return dict(zip(table.column("key").to_pylist(), table.column(value).to_pylist()))


def test_keyed_state_from_pandas_arrow_and_dicts_reads_back_with_every_kind_of_entry(tmp_path):
    frame = pd.DataFrame({"user": KEYS, "visits": range(50)})
    path = (SavepointWriter.new_savepoint(64)
            .with_keyed_state("count", "visits", frame, key_column="user", value_column="visits", parallelism=3)
            .with_keyed_state("count", "recent", pa.table({"key": [1, 2], "value": [[1, 2], [3]]}))
            .with_keyed_state("profile", "tags", {"ann": {"lang": "py"}})
            .write(str(tmp_path / "sp")))
    reader = SavepointReader.read(path)
    assert reader.max_parallelism == 64
    by_uid = {op.uid: op for op in reader.operators()}
    assert by_uid["count"].keyed_states == ("recent", "visits") and by_uid["count"].parallelism == 3
    assert pairs(reader.keyed_state("count", "visits")) == dict(zip(KEYS, range(50)))
    assert pairs(reader.keyed_state("count", "recent")) == {1: [1, 2], 2: [3]}
    tags = reader.keyed_state("profile", "tags").to_pylist()
    assert [(row["key"], dict(row["value"])) for row in tags] == [("ann", {"lang": "py"})]


def test_each_key_is_in_the_file_of_the_subtask_the_runtime_routes_it_to(tmp_path):
    path = (SavepointWriter.new_savepoint(128).with_keyed_state("count", "n", {k: 1 for k in KEYS}, parallelism=4)
            .write(str(tmp_path / "sp")))
    reader = SavepointReader.read(path)
    (state,) = reader.checkpoint.operators
    table = reader.keyed_state("count", "n", key_groups=True)
    groups = dict(zip(table.column("key").to_pylist(), table.column("key_group").to_pylist()))
    assert groups == {k: assign_to_key_group(k, 128) for k in KEYS}
    for handle in state.handles:
        owned = {k for k in KEYS if key_group_to_subtask(groups[k], 128, 4) == handle.subtask}
        assert set(handle.keyed_groups) >= {groups[k] for k in owned}
        assert not set(handle.keyed_groups) & {groups[k] for k in KEYS if k not in owned}


def test_an_existing_savepoint_is_transformed_trimmed_and_written_elsewhere(tmp_path):
    first = (SavepointWriter.new_savepoint(32).with_keyed_state("count", "n", {k: i for i, k in enumerate(KEYS)})
             .with_keyed_state("count", "old", {"a": 1}).with_keyed_state("gone", "x", {"b": 2})
             .write(str(tmp_path / "one")))
    second = (SavepointWriter.from_existing(first)
              .transform("count", "n", lambda key, n: None if n % 2 else n * 10)  # None drops the entry
              .remove_state("count", "old").remove_operator("gone")
              .write(str(tmp_path / "two")))
    reader = SavepointReader.read(second)
    assert [(op.uid, op.keyed_states) for op in reader.operators()] == [("count", ("n",))]
    assert pairs(reader.keyed_state("count", "n")) == {k: i * 10 for i, k in enumerate(KEYS) if i % 2 == 0}
    assert pairs(SavepointReader.read(first).keyed_state("count", "n"))["user-1"] == 1, "the first is unchanged"


def test_values_arrow_cannot_hold_go_through_their_pickles_both_ways(tmp_path):
    path = SavepointWriter.new_savepoint().with_keyed_state("op", "s", {"a": 1, "b": "two"}).write(str(tmp_path / "a"))
    table = SavepointReader.read(path).keyed_state("op", "s")
    assert table.column_names == ["key", "value_pickled"]
    copy = (SavepointWriter.new_savepoint().with_keyed_state("op", "s", table, value_column="value_pickled")
            .write(str(tmp_path / "b")))
    again = SavepointReader.read(copy).keyed_state("op", "s")
    assert again.equals(table)


def test_mistakes_say_what_to_do(tmp_path):
    writer = SavepointWriter.new_savepoint().with_keyed_state("count", "n", {"a": 1})
    with pytest.raises(ConfigurationError, match="no column 'key' .*key_column="):
        writer.with_keyed_state("count", "n", pd.DataFrame({"user": ["a"], "value": [1]}))
    with pytest.raises(UnknownNameError, match="no operator with uid 'nope': its operators are \\['count'\\]"):
        writer.remove_operator("nope")
    with pytest.raises(UnknownNameError, match="has no keyed state 'm': its keyed states are \\['n'\\]"):
        writer.transform("count", "m", lambda k, v: v)
    with pytest.raises(ConfigurationError, match="max_parallelism=0"):
        SavepointWriter.new_savepoint(0)
    with pytest.raises(ConfigurationError, match="the key 'a' comes twice in column 'key'.*Aggregate"):
        writer.with_keyed_state("count", "n", pa.table({"key": ["a", "b", "a"], "value": [1, 2, 3]}))
    path = writer.write(str(tmp_path / "sp"))
    with pytest.raises(SavepointError, match="holds a savepoint already.*overwrite=True"):
        writer.write(path)
    writer.with_keyed_state("count", "n", {"a": 5}).write(path, overwrite=True)
    assert pairs(SavepointReader.read(path).keyed_state("count", "n")) == {"a": 5}


def test_a_write_that_fails_leaves_nothing_behind(tmp_path):
    class Unpicklable:
        def __reduce__(self):
            raise TypeError("not this one")

    writer = SavepointWriter.new_savepoint().with_keyed_state("count", "n", {"a": Unpicklable()})
    with pytest.raises(Exception, match="not this one"):
        writer.write(str(tmp_path / "sp"))
    assert not (tmp_path / "sp").exists() or not any((tmp_path / "sp").rglob("*"))


FORMAT_1 = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "savepoints", "format-1")


def test_the_committed_format_1_savepoint_reads_as_the_state_its_job_had():
    """Written by a job of the version that introduced format 1 (docs/savepoint-format.md): its two source subtasks
    had read up to 3000 of [0, 5000) and 8000 of [5000, 10000), and the count per key (x % 37) is of those."""
    reader = SavepointReader.read(FORMAT_1)
    assert reader.checkpoint.savepoint and reader.max_parallelism == 128
    assert [(op.uid, op.keyed_states, op.operator_states) for op in reader.operators()] == [
        ("numbers", (), ("splits",)), ("count", ("count",), ())]
    assert reader.operator_state("numbers", "splits").column("value").to_pylist() == [[3000, 5000, 1],
                                                                                      [8000, 10000, 1]]
    read = collections.Counter(x % 37 for x in itertools.chain(range(0, 3000), range(5000, 8000)))
    assert pairs(reader.keyed_state("count", "count")) == dict(read)


def test_a_declared_type_gives_the_written_tables_a_typed_value_column_and_entries_that_do_not_fit_stay_exact(
        tmp_path):
    import pyarrow.dataset as ds

    from runtime.types import Types

    given = {"ann": 3, "bob": 2 ** 70, "cy": [1, 2]}  # beyond int64, and not a number: both pickled
    path = (SavepointWriter.new_savepoint(16)
            .with_keyed_state("count", "count", given, type_info=Types.LONG(), parallelism=2)
            .with_keyed_state("count", "untyped", {"ann": 1})
            .write(str(tmp_path / "sp")))
    reader = SavepointReader.read(path)
    tables = {t.state: t for h in reader.checkpoint.operator("count").handles for t in h.tables}
    counts = ds.dataset(os.path.dirname(os.path.join(path, tables["count"].path)), format="arrow").to_table()
    assert counts.schema.field("value").type == pa.int64()
    assert sorted(v for v in counts.column("value").to_pylist() if v is not None) == [3]
    assert "value" not in ds.dataset(os.path.dirname(os.path.join(path, tables["untyped"].path)),
                                     format="arrow").schema.names
    table = reader.keyed_state("count", "count")
    assert {k: pickle.loads(v) for k, v in zip(table.column("key").to_pylist(),
                                               table.column("value_pickled").to_pylist())} == given
