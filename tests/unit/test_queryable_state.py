"""Queryable state without Spark: descriptors, reading one key on real backends (heap and RocksDB), JSON values,
and the driver's router (declarations, routing by key group, answers, conflicts, attempts that end)."""

import json
import threading
import types

import pytest

from runtime.common.time import Time
from runtime.driver.queryable_state import QueryableStateRouter, parse_key
from runtime.driver.web.server import DashboardServer
from runtime.errors import ApiUsageError, QueryableStateError, StateUsageError
from runtime.executor.queryable_state import SlotQueryableStates, read_as_json
from runtime.keys.key_groups import key_group_range, subtask_for_key
from runtime.protocol.json_values import to_json
from runtime.protocol.messages import QueryableStateRegistered, QueryState, StateAnswer
from runtime.tools.queryable_state import QueryableStateClient
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from state_backends.heap import HeapKeyedStateBackend
from state_backends.rocksdb import RocksDBKeyedStateBackend
from state_backends.ttl import StateTtlConfig
from tests.integration.window_jobs import Sum

TTL = StateTtlConfig.new_builder(Time.seconds(10)).build()


def test_a_descriptor_is_queryable_under_a_name_and_never_with_a_ttl():
    descriptor = ValueStateDescriptor("count")
    assert not descriptor.is_queryable()
    descriptor.set_queryable("counts")
    assert descriptor.get_queryable_state_name() == "counts"
    assert descriptor == ValueStateDescriptor("count")  # the same declaration of the state
    with pytest.raises(StateUsageError, match="cannot be both queryable and expire"):
        descriptor.enable_time_to_live(TTL)
    expiring = ValueStateDescriptor("seen")
    expiring.enable_time_to_live(TTL)
    with pytest.raises(StateUsageError, match="Remove set_queryable"):
        expiring.set_queryable("seen")
    with pytest.raises(ApiUsageError, match="non-empty name"):
        ValueStateDescriptor("x").set_queryable(" ")


def test_keys_parse_as_json_with_lists_as_tuples_else_as_text():
    assert [parse_key(t) for t in ("7", '"7"', "[1, [2, 3]]", "eu-west", "true", "1.5")] == \
        [7, "7", (1, (2, 3)), "eu-west", True, 1.5]
    with pytest.raises(QueryableStateError, match="not an object"):
        parse_key('{"a": 1}')



@pytest.fixture(params=["heap", "rocksdb"])
def backend(request, tmp_path):
    groups = key_group_range(128, 2, 0)
    if request.param == "heap":
        yield HeapKeyedStateBackend(128, groups)
    else:
        backend = RocksDBKeyedStateBackend(128, groups, str(tmp_path / "db"))
        yield backend
        backend.close()


def owned_key(backend, start=0):
    """A key of this backend's key groups (it holds half of them)."""
    return next(k for k in range(start, 10_000) if subtask_for_key(k, 128, 2) == 0)


def test_each_kind_of_state_reads_as_the_operator_would_as_json(backend):
    key, other = owned_key(backend), owned_key(backend, owned_key(backend) + 1)
    value, items, visits = ValueStateDescriptor("v"), ListStateDescriptor("l"), MapStateDescriptor("m")
    total = ReducingStateDescriptor("r", lambda a, b: a + b)
    aggregate = AggregatingStateDescriptor("a", Sum())
    backend.set_current_key(key)
    backend.get_state(value).update({"n": 3, "at": (1, 2)})
    backend.get_state(items).add_all(["x", "y"])
    backend.get_state(visits).put("home", 2)
    backend.get_state(total).add(5)
    backend.get_state(total).add(6)
    backend.get_state(aggregate).add(4)
    backend.set_current_key(other)  # the operator's current key: a lookup must leave it as it was
    assert json.loads(read_as_json(backend, value, key)) == {"n": 3, "at": [1, 2]}
    assert json.loads(read_as_json(backend, items, key)) == ["x", "y"]
    assert json.loads(read_as_json(backend, visits, key)) == {"home": 2}
    assert json.loads(read_as_json(backend, total, key)) == 11
    assert json.loads(read_as_json(backend, aggregate, key)) == 4
    assert [read_as_json(backend, d, other) for d in (value, items, visits, total)] == ["null"] * 4
    assert backend.get_current_key() == other
    foreign = next(k for k in range(10_000) if subtask_for_key(k, 128, 2) == 1)
    with pytest.raises(LookupError, match="another subtask"):
        read_as_json(backend, value, foreign)


def test_values_json_cannot_hold_become_plain_json():
    class Point:
        def __repr__(self):
            return "Point(1, 2)"

    assert json.loads(to_json({("a", 1): {2, 1}, "b": Point()})) == [[["a", 1], [1, 2]], ["b", "Point(1, 2)"]]
    assert json.loads(to_json({1: "one", None: "none"})) == {"1": "one", "null": "none"}


def test_a_slot_declares_each_queryable_state_once_per_operator():
    sent = []
    declared = SlotQueryableStates(3, 1, sent.append)
    counts = ValueStateDescriptor("count")
    counts.set_queryable("counts")
    declare = declared.declarer("count-op")
    for _ in range(3):  # get_state in process_element: every record
        declare(counts)
    assert sent == [QueryableStateRegistered(3, 1, "count-op", "count", "counts", "value")]
    assert declared.find("counts") == ("count-op", counts) and declared.find("other") is None


class Slots:
    """The slots of one attempt as the router sees them: each answers from a dict of its own, on its own thread,
    as a slot's serving thread would hand the answer to the router."""

    def __init__(self, router, attempt, values, answer=True):
        self.router, self.attempt, self.values, self.answer = router, attempt, values, answer
        self.asked = []

    def send_to(self, slot, message):
        assert isinstance(message, QueryState)
        self.asked.append((slot, message.key))
        if self.answer:
            reply = StateAnswer(self.attempt, message.request, value_json=json.dumps(self.values.get(message.key)),
                                waited_ms=2.5, read_ms=0.25)
            threading.Thread(target=self.router.on_message, args=(reply,)).start()


def declare(router, attempt, uid="count-op", name="counts", slot=0):
    router.on_message(QueryableStateRegistered(attempt, slot, uid, "count", name, "value"))


def test_the_router_sends_each_lookup_to_the_subtask_that_owns_the_key():
    router = QueryableStateRouter({"count-op": 4}, 128)
    slots = Slots(router, 0, {key: key * 10 for key in range(40)})
    router.attach(0, slots.send_to)
    declare(router, 0)
    assert router.states() == {"counts": {"operator": "count-op", "state": "count", "kind": "value"}}
    assert [json.loads(router.lookup("counts", key)) for key in range(40)] == [key * 10 for key in range(40)]
    assert slots.asked == [(subtask_for_key(key, 128, 4), key) for key in range(40)]
    assert len({slot for slot, _ in slots.asked}) == 4
    assert router.lookup("counts", 99) == "null"


def test_the_router_names_what_it_cannot_answer():
    router = QueryableStateRouter({"a": 2, "b": 2}, 128)
    with pytest.raises(QueryableStateError, match="not running") as refused:
        router.lookup("counts", 1)
    assert refused.value.status == 503
    router.attach(0, Slots(router, 0, {}).send_to)
    with pytest.raises(QueryableStateError, match="No queryable state 'count' yet: the job is starting") as early:
        router.lookup("count", 1)
    assert early.value.status == 503  # functions declare their states in open(): ask again
    router.running(0)
    with pytest.raises(QueryableStateError, match="No queryable state 'count' yet") as none_declared:
        router.lookup("count", 1)
    assert none_declared.value.status == 503
    declare(router, 0, uid="a")
    with pytest.raises(QueryableStateError, match="No queryable state 'count': the job's are counts") as unknown:
        router.lookup("count", 1)
    assert unknown.value.status == 404  # every slot runs, a function declared its state: this name is none
    declare(router, 0, uid="b")
    with pytest.raises(QueryableStateError, match=r"declared by operators \['a', 'b'\]") as conflict:
        router.lookup("counts", 1)
    assert conflict.value.status == 409


def test_a_subtask_that_answers_with_an_error_or_not_at_all():
    router = QueryableStateRouter({"count-op": 1}, 128)
    router.attach(0, lambda slot, message: router.on_message(StateAnswer(0, message.request, error="it broke")))
    declare(router, 0)
    with pytest.raises(QueryableStateError, match="Subtask 0 of operator 'count-op': it broke"):
        router.lookup("counts", 1)
    router.attach(1, Slots(router, 1, {}, answer=False).send_to)
    declare(router, 1)
    with pytest.raises(QueryableStateError, match="did not answer within") as silent:
        router.lookup("counts", 1, timeout_s=0.01)
    assert silent.value.status == 504


def test_a_lookup_sent_as_the_slots_connection_closes_is_a_503_not_a_server_error():
    router = QueryableStateRouter({"count-op": 2}, 128)

    def closed(slot, message):
        raise OSError(9, "Bad file descriptor")

    router.attach(0, closed)
    declare(router, 0)
    with pytest.raises(QueryableStateError, match="not answered: subtask [01] of operator 'count-op' is not "
                                                  "connected") as refused:
        router.lookup("counts", 1)
    assert refused.value.status == 503
    assert router._pending == {}  # nothing waits for an answer that cannot come


def test_lookups_pending_when_the_attempt_ends_fail_at_once_and_the_next_attempt_declares_again():
    router = QueryableStateRouter({"count-op": 1}, 128)
    asked = threading.Event()
    router.attach(0, lambda slot, message: asked.set())
    declare(router, 0)
    failure = []

    def look():
        try:
            router.lookup("counts", 1, timeout_s=600)
        except QueryableStateError as error:
            failure.append(error)

    waiting = threading.Thread(target=look)
    waiting.start()
    assert asked.wait(60)
    router.detach("the job restarted after a failure")
    waiting.join(60)
    assert "the job restarted after a failure" in str(failure[0]) and failure[0].status == 503
    slots = Slots(router, 1, {1: 5})
    router.attach(1, slots.send_to)
    assert router.states() == {}  # the new attempt's functions declare their states again
    with pytest.raises(QueryableStateError, match="'counts' is being restored") as restoring:
        router.lookup("counts", 1)
    assert restoring.value.status == 503  # the job had it: ask again
    declare(router, 0)  # a straggler of the old attempt: ignored
    assert router.states() == {}
    declare(router, 1)
    router.running(1)
    assert router.lookup("counts", 1) == "5"
    with pytest.raises(QueryableStateError, match="No queryable state 'other'") as unknown:
        router.lookup("other", 1)
    assert unknown.value.status == 404  # no attempt ever had it


def test_a_subtask_whose_function_has_not_taken_the_state_yet_is_asked_again():
    router = QueryableStateRouter({"count-op": 1}, 128)
    router.attach(0, lambda slot, message: router.on_message(
        StateAnswer(0, message.request, error="has not taken state 'counts' yet", not_yet=True)))
    declare(router, 0)
    with pytest.raises(QueryableStateError, match="has not taken state 'counts' yet") as not_yet:
        router.lookup("counts", 1)
    assert not_yet.value.status == 503


def test_once_the_job_has_ended_lookups_are_refused_for_good_with_410():
    router = QueryableStateRouter({"count-op": 1}, 128)
    router.attach(0, Slots(router, 0, {1: 5}).send_to)
    declare(router, 0)
    router.end("the job has finished")
    router.end("the job is FINISHED")  # the first reason stays
    with pytest.raises(QueryableStateError, match="not running: the job has finished.*SavepointReader") as ended:
        router.lookup("counts", 1)
    assert ended.value.status == 410


class CountedRouter(QueryableStateRouter):
    """A router that tells the test each time it refused a lookup with 503."""

    def __init__(self, *args):
        super().__init__(*args)
        self.refused = threading.Semaphore(0)
        self.lookups = 0

    def timed_lookup(self, name, key, timeout_s=10.0):
        self.lookups += 1
        try:
            return super().timed_lookup(name, key, timeout_s)
        except QueryableStateError as error:
            if error.status == 503:
                self.refused.release()
            raise


@pytest.fixture
def served_router():
    router = CountedRouter({"count-op": 1}, 128)
    server = DashboardServer("127.0.0.1", 0)
    server.register(types.SimpleNamespace(job_id="ab12cd34ef56", job_name="lookups", ended=False,
                                          queryable_state=router))
    yield router, f"{server.url}/#/jobs/ab12cd34ef56"
    server.close()


def test_the_client_asks_again_while_the_job_restarts_and_gets_the_restored_value(served_router):
    router, url = served_router
    answers = []
    client = QueryableStateClient(url, retry_for_s=600)
    waiting = threading.Thread(target=lambda: answers.append(client.get("counts", 1)))
    waiting.start()
    assert router.refused.acquire(timeout=60) and router.refused.acquire(timeout=60)  # asked, refused, asked again
    router.attach(0, Slots(router, 0, {1: 5}).send_to)
    declare(router, 0)
    waiting.join(60)
    assert answers == [5]


def test_the_client_raises_what_a_retry_cannot_mend_at_once_with_its_status(served_router):
    router, url = served_router
    with pytest.raises(QueryableStateError, match="starting or restarting") as not_yet:
        QueryableStateClient(url, retry_for_s=0).get("counts", 1)
    assert not_yet.value.status == 503 and router.lookups == 1
    router.attach(0, Slots(router, 0, {}).send_to)
    declare(router, 0)
    router.running(0)
    with pytest.raises(QueryableStateError, match="No queryable state 'count'") as unknown:
        QueryableStateClient(url, retry_for_s=600).get("count", 1)
    assert unknown.value.status == 404 and router.lookups == 2
    router.end("the job has finished")
    with pytest.raises(QueryableStateError, match="the job has finished") as ended:
        QueryableStateClient(url, retry_for_s=600).get("counts", 1)
    assert ended.value.status == 410 and router.lookups == 3
    with pytest.raises(QueryableStateError, match="No Chandy dashboard answers") as nothing:
        QueryableStateClient("http://127.0.0.1:9/#/jobs/ab12cd34", retry_for_s=600).get("counts", 1)
    assert nothing.value.status is None


def test_a_client_keeps_its_connection_and_reports_where_each_lookup_spent_its_time(served_router):
    router, url = served_router
    router.attach(0, Slots(router, 0, {1: 5, 2: 7}).send_to)
    declare(router, 0)
    client = QueryableStateClient(url, retry_for_s=0)
    assert client.last_timings == {}
    assert client.get("counts", 1) == 5
    timings = client.last_timings
    assert set(timings) == {"driver", "slot", "subtask-wait", "state-read"}
    assert (timings["subtask-wait"], timings["state-read"]) == (2.5, 0.25)  # as the subtask reported them
    assert timings["driver"] >= timings["slot"] >= 0
    local = client._threads.connection.sock.getsockname()
    assert client.get("counts", 2) == 7
    assert client._threads.connection.sock.getsockname() == local, "the second lookup used the same connection"
    client._threads.connection.sock.close()  # as if the server had closed it while the client idled
    assert client.get("counts", 1) == 5, "a kept connection that is gone is opened again"
    assert client._threads.connection.sock.getsockname() != local
    client.close()
    assert client.get("counts", 2) == 7
