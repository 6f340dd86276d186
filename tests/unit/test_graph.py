import threading

import pytest

from operators import CollectSink
from runtime import JobGraphError, StreamExecutionEnvironment, UnpicklableFunctionError


def make_env(parallelism=2):
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)


def test_forward_operators_of_equal_parallelism_are_chained():
    env = make_env()
    env.from_sequence(0, 10).map(lambda x: x).filter(bool).key_by(lambda x: x % 3).reduce(max) \
        .map(str).sink_to(CollectSink("out"))
    graph = env.get_job_graph("chained")
    assert [c.name for c in graph.chains] == ["Sequence Source -> Map -> Filter", "Keyed Reduce -> Map -> Sink: out"]
    assert [e.partitioner.kind for e in graph.edges] == ["hash"]
    assert graph.slots == 2


def test_parallelism_change_breaks_the_chain_with_a_rebalance():
    env = make_env()
    env.from_collection([1, 2, 3]).map(lambda x: x).sink_to(CollectSink())
    graph = env.get_job_graph()
    assert graph.chains[0].parallelism == 1 and graph.chains[1].parallelism == 2
    assert graph.edges[0].partitioner.kind == "rebalance"


def test_union_feeds_one_operator_from_several_edges():
    env = make_env()
    a = env.from_sequence(0, 5)
    b = env.from_sequence(10, 15)
    a.union(b).map(lambda x: x).sink_to(CollectSink())
    graph = env.get_job_graph()
    consumer = graph.chains[-1]
    assert len(consumer.inputs) == 2


def test_a_job_without_sink_is_rejected():
    env = make_env()
    env.from_sequence(0, 5).map(lambda x: x)
    with pytest.raises(JobGraphError, match="no sink"):
        env.get_job_graph()


def test_a_stray_source_or_operator_that_reaches_no_sink_is_rejected_by_name():
    env = make_env()
    env.from_sequence(0, 5).uid("used").sink_to(CollectSink())
    env.from_sequence(0, 9).uid("forgotten")  # a leftover line: it would finish at once and stop checkpoints
    with pytest.raises(JobGraphError, match=r"'Sequence Source' \(uid forgotten\) reaches no sink"):
        env.get_job_graph()
    env = make_env()
    numbers = env.from_sequence(0, 5).uid("numbers")
    numbers.sink_to(CollectSink())
    numbers.map(lambda x: x).name("dangling").uid("dangling")  # a branch that goes nowhere
    with pytest.raises(JobGraphError, match=r"'dangling' \(uid dangling\) reaches no sink"):
        env.get_job_graph()


def test_duplicate_uids_are_rejected():
    env = make_env()
    env.from_sequence(0, 5).uid("x").map(lambda x: x).uid("x").sink_to(CollectSink())
    with pytest.raises(JobGraphError, match="uid 'x'"):
        env.get_job_graph()


def test_derived_uids_are_deterministic():
    def build():
        env = make_env()
        env.from_sequence(0, 5).map(lambda x: x).sink_to(CollectSink("s"))
        return [op.uid for op in env.get_job_graph().operators]

    assert build() == build()


def test_forward_between_different_parallelisms_is_rejected():
    env = make_env()
    env.from_sequence(0, 5).set_parallelism(2).forward().map(lambda x: x).set_parallelism(3).sink_to(CollectSink())
    with pytest.raises(JobGraphError, match="forward"):
        env.get_job_graph()


def test_unpicklable_function_is_rejected_naming_the_operator():
    lock = threading.Lock()
    env = make_env()
    env.from_sequence(0, 5).map(lambda x: (x, lock)).name("grab-lock").sink_to(CollectSink())
    with pytest.raises(UnpicklableFunctionError, match="grab-lock"):
        env.get_job_graph()


def test_parallelism_above_max_parallelism_is_rejected():
    env = make_env(4).set_max_parallelism(2)
    env.from_sequence(0, 5).sink_to(CollectSink())
    with pytest.raises(JobGraphError, match="max parallelism"):
        env.get_job_graph()


def test_bad_parallelism_values_fail_at_once():
    env = make_env()
    with pytest.raises(ValueError):
        env.set_parallelism(0)
    with pytest.raises(ValueError):
        env.from_collection([1]).set_parallelism(2)


def test_chaining_controls_split_chains_where_asked():
    env = make_env()
    env.from_sequence(0, 5).map(str).start_new_chain().map(len).disable_chaining().map(abs).sink_to(CollectSink("out"))
    assert [[op.name for op in chain.operators] for chain in env.get_job_graph().chains] == \
        [["Sequence Source"], ["Map"], ["Map"], ["Map", "Sink: out"]]
    env = make_env().disable_operator_chaining()
    env.from_sequence(0, 5).map(str).sink_to(CollectSink())
    assert len(env.get_job_graph().chains) == 3
