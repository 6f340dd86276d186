"""The PostgreSQL change-data-capture source's reader against the session's real server, without Spark: snapshot
then stream, row kinds and values, restores in the middle of the snapshot and of a transaction, the slot's position
moving only with completed checkpoints, and the errors that name their fix."""

import datetime
import decimal
import json
import time
import uuid

import pytest

from operators.postgres_cdc import source as cdc_source
from operators.postgres_cdc.replication import ReplicationConnection
from runtime.datastream.connectors.postgres import JsonDebeziumDeserializationSchema, PostgresSource, StartupOptions
from runtime.errors import ConfigurationError, ServerUnreachableError
from tests.postgres_server import start_server

pytestmark = pytest.mark.postgres


@pytest.fixture
def slot(postgres):
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    for _ in range(100):  # a reader just closed may still hold it for a moment
        active = postgres.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (name,))
        if not active:
            return
        if not active[0][0]:
            postgres.query("SELECT pg_drop_replication_slot(%s)", (name,))
            return
        time.sleep(0.05)


def builder(postgres, table, slot):
    return (PostgresSource.builder().hostname(postgres.host).port(postgres.port).database(postgres.database)
            .username(postgres.user).password(postgres.password).table_list(f"public.{table}").slot_name(slot))


def opened(source, state=None):
    reader = source.create_reader(0, 1)
    if state is not None:
        reader.restore_state(state)
    reader.open(None)
    return reader


def read_until(reader, done, timeout=60, max_records=100):
    """Records (as ``(kind, row as dict)``) polled, ``max_records`` at most a poll, until ``done(records)``; the
    stream is in commit order, so a last change the test committed marks the end of everything before it."""
    records, deadline = [], time.monotonic() + timeout
    while not done(records):
        assert time.monotonic() < deadline, f"only {records} arrived"
        batch = reader.poll(max_records)
        assert batch is not None, "an unbounded source ended"
        records.extend((str(row.get_row_kind()), row.as_dict()) for row in batch)
    return records


def past_commit(reader, lsn, timeout=60):
    """Poll until the reader's position is a whole transaction past ``lsn``: a record arrives with its change, and
    the transaction's commit message may come in a later poll."""
    deadline = time.monotonic() + timeout
    while True:
        (state,) = reader.snapshot_state()
        if state["lsn"] > lsn and state["partial_count"] == 0:
            return
        assert time.monotonic() < deadline, f"the reader stayed at {state}"
        assert reader.poll(100) == [], "no change beyond the ones the test committed"


def until_id(row_id):
    return lambda records: any(row.get("id") == row_id for _, row in records)


def test_snapshot_then_each_change_with_its_row_kind_and_values(postgres, slot):
    table = postgres.table("cdc_kinds", "id int PRIMARY KEY, name text, amount numeric, at timestamptz, doc jsonb, "
                                        "blob bytea")
    postgres.query(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    postgres.query(f"INSERT INTO {table} VALUES (1, 'a', 1.50, '2026-01-02 03:04:05+00', '{{\"x\": 1}}', '\\x0102'), "
                   f"(2, NULL, NULL, NULL, NULL, NULL)")
    reader = opened(builder(postgres, table, slot).build())
    try:
        with postgres.connect(autocommit=False) as connection:  # one transaction of several statements
            connection.execute(f"INSERT INTO {table} (id, name) VALUES (3, 'c')")
            connection.execute(f"UPDATE {table} SET name = 'b' WHERE id = 2")
            connection.execute(f"UPDATE {table} SET id = 4 WHERE id = 1")
            connection.execute(f"DELETE FROM {table} WHERE id = 3")
        postgres.query(f"INSERT INTO {table} (id) VALUES (99)")
        records = read_until(reader, until_id(99))
    finally:
        reader.close()
    first = {"id": 1, "name": "a", "amount": decimal.Decimal("1.50"),
             "at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), "doc": {"x": 1},
             "blob": b"\x01\x02"}
    empty = dict.fromkeys(first)
    assert records == [
        ("+I", first), ("+I", {**empty, "id": 2}),
        ("+I", {**empty, "id": 3, "name": "c"}),
        ("-U", {**empty, "id": 2}), ("+U", {**empty, "id": 2, "name": "b"}),
        ("-U", first), ("+U", {**first, "id": 4}),
        ("-D", {**empty, "id": 3, "name": "c"}),
        ("+I", {**empty, "id": 99})]


def test_default_replica_identity_gives_upserts_and_key_only_deletes(postgres, slot):
    table = postgres.table("cdc_default", "id int PRIMARY KEY, name text")
    reader = opened(builder(postgres, table, slot).build())
    try:
        postgres.query(f"INSERT INTO {table} VALUES (1, 'a')")
        postgres.query(f"UPDATE {table} SET name = 'b' WHERE id = 1")
        postgres.query(f"DELETE FROM {table} WHERE id = 1")
        postgres.query(f"INSERT INTO {table} VALUES (99, 'end')")
        records = read_until(reader, until_id(99))
    finally:
        reader.close()
    assert records == [("+I", {"id": 1, "name": "a"}), ("+U", {"id": 1, "name": "b"}),
                       ("-D", {"id": 1, "name": None}), ("+I", {"id": 99, "name": "end"})]


def fold(records):
    """The table a changelog describes."""
    table = {}
    for kind, row in records:
        if kind in ("+I", "+U"):
            table[row["id"]] = row["v"]
        else:
            table.pop(row["id"], None)
    return table


def test_a_restore_mid_snapshot_reads_the_rest_from_a_new_snapshot_and_adds_only_changes_it_lacks(postgres, slot):
    table = postgres.table("cdc_resnap", "id int PRIMARY KEY, v text")
    postgres.query(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    postgres.query(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 10) g")
    source = builder(postgres, table, slot).split_size(4).build()
    reader = opened(source)
    snapshot_rows = [row for _ in range(2) for row in reader.poll(100)]
    state = reader.snapshot_state()
    assert [row["id"] for row in snapshot_rows] == list(range(1, 9)) and state[0]["after_key"] == (8,)
    reader.close()  # the failure: rows 9 and 10 were never read
    # While the job is down: changes on both sides of the key read last, and one that moves a row across it.
    postgres.query(f"UPDATE {table} SET v = 'changed' WHERE id IN (1, 9)")
    postgres.query(f"DELETE FROM {table} WHERE id = 10")
    postgres.query(f"INSERT INTO {table} VALUES (11, 'new')")
    postgres.query(f"UPDATE {table} SET id = 12 WHERE id = 2")   # from the part read to the part not read
    postgres.query(f"DELETE FROM {table} WHERE id = 3")
    postgres.query(f"UPDATE {table} SET id = 3, v = 'back' WHERE id = 11")  # ... and the other way
    reader = opened(source, state)
    try:
        postgres.query(f"INSERT INTO {table} VALUES (99, 'end')")
        records = read_until(reader, until_id(99))
    finally:
        reader.close()
    # The new snapshot holds 9 as changed and 12; of the changes committed before it, only what the rows read from
    # the old snapshot lack: 1's update, 2 leaving that part (a delete), 3's delete, and 11 arriving as 3 (an insert).
    assert records == [("+I", {"id": 9, "v": "changed"}), ("+I", {"id": 12, "v": "v2"}),
                       ("-U", {"id": 1, "v": "v1"}), ("+U", {"id": 1, "v": "changed"}),
                       ("-D", {"id": 2, "v": "v2"}), ("-D", {"id": 3, "v": "v3"}), ("+I", {"id": 3, "v": "back"}),
                       ("+I", {"id": 99, "v": "end"})]
    emitted = [("+I", row) for row in snapshot_rows] + records
    assert fold(emitted) == dict(postgres.query(f"SELECT id, v FROM {table}"))


def test_a_restore_mid_transaction_emits_the_rest_of_it_once(postgres, slot):
    table = postgres.table("cdc_partial", "id int PRIMARY KEY, v text")
    source = builder(postgres, table, slot).startup_options(StartupOptions.latest()).build()
    reader = opened(source)
    with postgres.connect(autocommit=False) as connection:
        for i in range(50):
            connection.execute(f"INSERT INTO {table} VALUES ({i}, 'x')")
    # polls of 5: with polls of 100, one poll could take the whole transaction of 50 once it had all arrived
    first = read_until(reader, lambda records: len(records) >= 10, max_records=5)
    state = reader.snapshot_state()
    assert state[0]["partial_count"] > 0, "the checkpoint falls inside the transaction"
    reader.close()
    reader = opened(source, state)
    try:
        rest = read_until(reader, until_id(49))
    finally:
        reader.close()
    assert sorted(row["id"] for _, row in first + rest) == list(range(50))


def confirmed(postgres, slot):
    (lsn,) = postgres.query("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    return lsn[0]


def test_the_slot_moves_only_when_a_checkpoint_completes_and_an_older_restore_is_refused(postgres, slot):
    table = postgres.table("cdc_confirm", "id int PRIMARY KEY, v text")
    source = builder(postgres, table, slot).startup_options(StartupOptions.latest()).build()
    reader = opened(source)
    start = confirmed(postgres, slot)
    try:
        postgres.query(f"INSERT INTO {table} VALUES (1, 'a')")
        read_until(reader, until_id(1))
        old_state = reader.snapshot_state()
        reader.snapshot_taken(7, old_state)
        postgres.query(f"INSERT INTO {table} VALUES (2, 'b')")
        read_until(reader, until_id(2))
        past_commit(reader, old_state[0]["lsn"])
        new_state = reader.snapshot_state()
        reader.snapshot_taken(8, new_state)
        assert confirmed(postgres, slot) == start, "nothing confirmed before a checkpoint completes"
        reader.notify_checkpoint_complete(8)
        expected = cdc_source.format_lsn(new_state[0]["lsn"])
        deadline = time.monotonic() + 30
        while confirmed(postgres, slot) != expected:
            assert time.monotonic() < deadline, (confirmed(postgres, slot), expected)
            time.sleep(0.05)
    finally:
        reader.close()
    with pytest.raises(ConfigurationError, match="past the checkpoint's position .* Restore from the job's latest"):
        opened(source, old_state)
    reader = opened(source, new_state)  # the latest checkpoint restores, and reads on after it
    try:
        postgres.query(f"INSERT INTO {table} VALUES (3, 'c')")
        assert read_until(reader, until_id(3)) == [("+I", {"id": 3, "v": "c"})]
    finally:
        reader.close()


def test_debezium_json_events_name_the_table_and_the_operation(postgres, slot):
    table = postgres.table("cdc_json", "id int PRIMARY KEY, amount numeric")
    postgres.query(f"INSERT INTO {table} VALUES (1, 2.5)")
    source = builder(postgres, table, slot).deserializer(JsonDebeziumDeserializationSchema()).build()
    reader = opened(source)
    try:
        postgres.query(f"DELETE FROM {table} WHERE id = 1")
        events, deadline = [], time.monotonic() + 60
        while len(events) < 2:
            assert time.monotonic() < deadline
            events.extend(json.loads(text) for text in reader.poll(100))
    finally:
        reader.close()
    assert [(e["op"], e["before"], e["after"], e["source"]["table"], e["source"]["db"]) for e in events] == [
        ("r", None, {"id": 1, "amount": "2.5"}, table, postgres.database),
        ("d", {"id": 1, "amount": None}, None, table, postgres.database)]
    assert events[1]["source"]["lsn"] > 0 and events[1]["ts_ms"] > 1_700_000_000_000


def test_snapshot_only_reads_the_tables_and_ends(postgres):
    table = postgres.table("cdc_bounded", "id text PRIMARY KEY, v int")
    postgres.query(f"INSERT INTO {table} VALUES ('b', 2), ('a', 1), ('B', 3)")
    source = builder(postgres, table, "unused_slot").startup_options(StartupOptions.snapshot()).split_size(2).build()
    assert source.bounded
    reader = opened(source)
    rows = []
    while (batch := reader.poll(100)) is not None:
        rows.extend(row.as_dict() for row in batch)
    reader.close()
    assert [row["id"] for row in rows] == ["B", "a", "b"], "code point order, as Python compares the keys"
    assert postgres.query("SELECT 1 FROM pg_replication_slots WHERE slot_name LIKE 'unused_slot%%'") == []


# -- errors that name the fix --------------------------------------------------------------------------------


def test_a_missing_table_and_a_table_without_primary_key_are_refused_at_launch(postgres, slot):
    with pytest.raises(ConfigurationError, match="matches no table"):
        builder(postgres, "no_such_table", slot).build().validate()
    table = postgres.table("cdc_nokey", "id int, v text")
    with pytest.raises(ConfigurationError, match="has no primary key.*ADD PRIMARY KEY"):
        builder(postgres, table, slot).build().validate()


def test_a_wrong_password_and_an_unreachable_server_say_so(postgres, slot):
    with pytest.raises(ConfigurationError, match="refused the login of user"):
        builder(postgres, "t", slot).password("wrong").build().validate()
    with pytest.raises(ServerUnreachableError, match="cannot connect to PostgreSQL at 127.0.0.1:1 .*Is the server"):
        builder(postgres, "t", slot).hostname("127.0.0.1").port(1).build().validate()


def test_a_slot_held_by_another_connection_is_refused_naming_the_fix(postgres, slot, monkeypatch):
    table = postgres.table("cdc_held", "id int PRIMARY KEY")
    source = builder(postgres, table, slot).startup_options(StartupOptions.latest()).build()
    opened(source).close()
    holder = ReplicationConnection(source.settings.connect_arguments(), "test")
    holder.start(slot, 0, source.publication)
    monkeypatch.setattr(cdc_source, "SLOT_RELEASE_WAIT_S", 0.5)
    try:
        with pytest.raises(ConfigurationError, match="is in use by another connection.*slot_name"):
            opened(source)
    finally:
        holder.close()


def test_a_dropped_slot_fails_the_restore_saying_what_is_lost(postgres, slot):
    table = postgres.table("cdc_dropped", "id int PRIMARY KEY")
    source = builder(postgres, table, slot).startup_options(StartupOptions.latest()).build()
    reader = opened(source)
    state = reader.snapshot_state()
    reader.close()
    time.sleep(0)  # the slot is released when the server notices the closed connection
    deadline = time.monotonic() + 30
    while postgres.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)) != [(False,)]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    postgres.query("SELECT pg_drop_replication_slot(%s)", (slot,))
    with pytest.raises(ConfigurationError, match="is gone from .* Start it afresh"):
        opened(source, state)


def test_a_server_without_logical_decoding_is_refused_naming_the_setting():
    server = start_server({"wal_level": "replica"}, external=False)
    try:
        server.query("CREATE TABLE t (id int PRIMARY KEY)")
        with pytest.raises(ConfigurationError, match="wal_level = replica.*wal_level = logical"):
            builder(server, "t", "s").build().validate()
    finally:
        server.stop()
