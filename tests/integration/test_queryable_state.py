"""Queryable state on a running job at parallelism 2: lookups over the REST API and the Python client, routed to
the subtask that owns each key, exact against the plain-Python reference once the input is in, also after a
failure and a restart from a checkpoint.

The job holds its end until the test creates a file (tests/integration/paced.py), so "while it runs" is an event
the test controls. Values are compared exactly; timings are never asserted.
"""

import collections
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from operators import KeyedProcessFunction, MapStateDescriptor, SequenceSource, ValueStateDescriptor
from runtime import RestartStrategies, StreamExecutionEnvironment
from runtime.common import Types
from runtime.errors import QueryableStateError
from runtime.tools.queryable_state import QueryableStateClient
from tests.integration.chaos import ChaosMap, plan
from tests.integration.paced import FileExists, PacedSource

N = 6_000
KEYS = 40


def key_of(x):
    """Tuple keys: a lookup's JSON list must become the same tuple, routed by the same stable hash."""
    return ("even" if x % 2 == 0 else "odd", x % KEYS)


class QueryableCounts(KeyedProcessFunction):
    """A running count per key (queryable as "counts") and, per thousand, the newest number of the key seen
    (a map, queryable as "newest")."""

    def open(self, runtime_context):
        counts = ValueStateDescriptor("count", Types.LONG())
        counts.set_queryable("counts")
        newest = MapStateDescriptor("newest")
        newest.set_queryable("newest")
        self.count = runtime_context.get_state(counts)
        self.newest = runtime_context.get_map_state(newest)

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.newest.put(value // 1000, value)
        yield ctx.get_current_key(), n


def reference():
    counts = collections.Counter(key_of(x) for x in range(N))
    newest = collections.defaultdict(dict)
    for x in range(N):  # each source subtask reads its range in order: the newest of a thousand is its largest
        newest[key_of(x)][str(x // 1000)] = x
    return counts, newest


def queryable_job(env, tmp_path, chaos=None):
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    # With a planned failure, the input comes 500 records a subtask per checkpoint: the failure (after N // 8
    # records and a checkpoint) then fires before the counts can add up, however fast the machine is.
    paced = {"per_checkpoint": 500, "together": str(tmp_path / "together")} if chaos is not None else {}
    numbers = env.from_source(PacedSource(SequenceSource(0, N - 1), end_when=FileExists(str(tmp_path / "end")),
                                          **paced), None, "numbers").uid("numbers")
    if chaos is not None:
        numbers = numbers.map(chaos).uid("chaos")
    numbers.key_by(key_of).process(QueryableCounts()).uid("count").print()


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def all_counted(client, keys, seen):
    """Whether the counts of ``keys`` add up to the input; on the way, no key's count ever goes back."""
    total = 0
    for key in keys:
        count = client.get("counts", list(key)) or 0  # while the job starts or restarts, the client asks again
        assert count >= seen.get(key, 0) or seen.get("restarts"), (key, count, seen.get(key))
        seen[key] = count
        total += count
    return total == N


def wait_until_counted(client, keys, restarts=False):
    seen = {"restarts": restarts}
    deadline = time.monotonic() + 240
    while not all_counted(client, keys, seen):
        assert time.monotonic() < deadline, "the counts never added up to the input"
        time.sleep(0.2)


def test_lookups_answer_each_key_exactly_from_the_subtask_that_owns_it(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    queryable_job(env, tmp_path)
    job = env.execute_async("queryable-state")
    try:
        url = job.get_dashboard_url(with_token=True)
        client = QueryableStateClient(url)
        counts, newest = reference()
        wait_until_counted(client, sorted(counts))

        assert [client.get("counts", list(key)) for key in sorted(counts)] == [counts[k] for k in sorted(counts)]
        assert {key: client.get("newest", list(key)) for key in counts} == dict(newest)
        assert client.get("counts", ["even", 1]) is None  # a key the input never had ("even" keys are even)
        assert client.states() == {"counts": {"operator": "count", "state": "count", "kind": "value"},
                                   "newest": {"operator": "count", "state": "newest", "kind": "map"}}
        from_directory = QueryableStateClient.for_job_directory(str(tmp_path / "ck" / "queryable-state"))
        assert from_directory.get("counts", ["odd", 3]) == counts[("odd", 3)]

        base, job_id = client.base, client.job_id
        token = client.token
        key = urllib.parse.quote(json.dumps(["odd", 7]))
        status, answer = get(f"{base}/jobs/{job_id}/state/counts?key={key}", token)
        assert status == 200 and answer == {"name": "counts", "key": ["odd", 7], "value": counts[("odd", 7)]}
        status, answer = get(f"{base}/jobs/{job_id}/state/count?key=1", token)
        assert status == 404 and "the job's are counts, newest" in answer["errors"][0]
        status, answer = get(f"{base}/jobs/{job_id}/state/counts", token)
        assert status == 400 and "?key=" in answer["errors"][0]
        if token is not None and "?token=" in url:  # actions need the token here: so do lookups
            status, answer = get(f"{base}/jobs/{job_id}/state/counts?key={key}")
            assert status == 401
    finally:
        (tmp_path / "end").touch()
        job.get_job_execution_result()
    # The job has ended: nothing answers lookups any more, and the client says why.
    try:
        client.get("counts", ["odd", 3])
        raise AssertionError("a lookup after the job's end was answered")
    except QueryableStateError as error:
        assert error.status == 410 and "the job has finished" in str(error)


def test_after_a_failure_the_restarted_attempt_answers_from_the_restored_state(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    chaos = ChaosMap(plan(str(tmp_path / "chaos"), "raise"), "raise", "raise", after=N // 8)
    queryable_job(env, tmp_path, chaos)
    job = env.execute_async("queryable-state-restart")
    try:
        client = QueryableStateClient(job.get_dashboard_url(with_token=True), retry_for_s=180)
        counts, newest = reference()
        wait_until_counted(client, sorted(counts), restarts=True)
        assert not (tmp_path / "chaos" / "raise").exists(), "the planned failure fired"
        assert {key: client.get("counts", list(key)) for key in counts} == dict(counts)
        assert {key: client.get("newest", list(key)) for key in counts} == dict(newest)
    finally:
        (tmp_path / "end").touch()
        result = job.get_job_execution_result()
    assert result.restarts == 1
