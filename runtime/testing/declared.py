"""From a declared stream to the operator a job would run: the job graph builds it, the harness takes it.

The stream is declared on a real :class:`~runtime.datastream.StreamExecutionEnvironment` and compiled, never
executed: the operator, its uid, the key selector its input is routed by, its parallelism and max parallelism
are the ones a job would have, and every check the API and the compiler make (a function of the wrong kind, an
unpicklable one) is made here too.

>>> declared = declare_operator(lambda ds: ds.key_by(lambda r: r[0]).reduce(max), parallelism=2,
...                             max_parallelism=128)
>>> declared.node.name, type(declared.node.operator).__name__, declared.node.parallelism
('Keyed Reduce', 'KeyedReduceOperator', 2)
>>> declared.key_selector(("a", 1)), declared.graph.max_parallelism
('a', 128)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from operators.sinks import DiscardingSink
from runtime.datastream.data_stream import DataStream
from runtime.datastream.stream_execution_environment import StreamExecutionEnvironment
from runtime.graph.job_graph import JobGraph, OperatorNode
from runtime.testing.errors import HarnessError
from runtime.types import TypeInformation

__all__ = ["DeclaredOperator", "declare_operator", "EVERY_SIDE_OUTPUT", "HARNESS_JOB"]

HARNESS_JOB = "operator test harness"


class _EveryTag(frozenset):
    """Side-output tags with a consumer: all of them. A job's operator drops the records of tags nothing reads
    (the job graph tells it which are read); a harness collects every side output, as Flink's does."""

    def __contains__(self, tag) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


EVERY_SIDE_OUTPUT = _EveryTag()


@dataclass(frozen=True)
class DeclaredOperator:
    """The operator under test, in the job graph that built it. ``key_selectors``: what the job routes each of
    the operator's inputs by (a ``key_by``), None for an input that is not keyed (a broadcast one neither).

    >>> declared = declare_operator(lambda ds: ds.map(str), parallelism=1, max_parallelism=128)
    >>> declared.node.name, declared.key_selector is None, declared.inputs
    ('Map', True, 1)
    """

    graph: JobGraph
    node: OperatorNode
    key_selectors: tuple[Callable | None, ...]

    @property
    def inputs(self) -> int:
        return len(self.key_selectors)

    @property
    def key_selector(self) -> Callable | None:
        """The first input's key selector."""
        return self.key_selectors[0]


def declare_operator(build: Callable[..., DataStream], parallelism: int, max_parallelism: int,
                     input_type: TypeInformation | None = None, *, inputs: int = 1,
                     second_input_type: TypeInformation | None = None) -> DeclaredOperator:
    """The one operator ``build`` declares on a stream (of ``input_type``), as the job graph builds it; with
    ``inputs=2``, on two streams (the second of ``second_input_type``), which it connects.

    >>> declare_operator(lambda ds: ds.map(str).filter(bool), parallelism=1, max_parallelism=128)
    Traceback (most recent call last):
        ...
    runtime.testing.errors.HarnessError: The stream declares 2 operators ('Map', 'Filter'), and a harness drives one...
    >>> from operators.functions import CoMapFunction
    >>> class Tag(CoMapFunction):
    ...     def map1(self, value): return "number", value
    ...     def map2(self, value): return "word", value
    >>> declared = declare_operator(lambda first, second: first.connect(second).map(Tag()), parallelism=1,
    ...                             max_parallelism=128, inputs=2)
    >>> declared.node.name, declared.inputs
    ('Co-Map', 2)
    """
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism).set_max_parallelism(max_parallelism)
    streams = [env.from_collection([], type_info=input_type)]
    if inputs == 2:
        streams.append(env.from_collection([], type_info=second_input_type))
    declared = build(*streams)
    factory, example = (("for_two_inputs()", "lambda first, second: first.connect(second).process(function)")
                        if inputs == 2 else ("for_stream()", "lambda ds: ds.key_by(key).process(function)"))
    if not isinstance(declared, DataStream):
        raise HarnessError(f"The function given to {factory} returned a value of type {type(declared).__name__}; "
                           f"it must return the DataStream the operator under test produces, e.g. {example}.")
    declared.sink_to(DiscardingSink())
    if inputs == 2:  # so that a build that leaves it out is told so below, not that a source reaches no sink
        streams[1].sink_to(DiscardingSink())
    graph = env.get_job_graph(HARNESS_JOB)
    under_test = [node for node in graph.operators if not node.is_source and not node.is_sink]
    if len(under_test) != 1:
        names = ", ".join(repr(node.name) for node in under_test)
        raise HarnessError(
            f"The stream declares {len(under_test)} operators{f' ({names})' if names else ''}, and a harness drives "
            "one: declare only the operator under test on the stream given to you (its records are what you feed "
            f"the harness), e.g. {example}.")
    node = under_test[0]
    if len(node.inputs) != inputs:
        raise HarnessError(
            f"Operator '{node.name}' has {len(node.inputs)} input(s), and a harness of {inputs} was asked for: "
            + ("for_two_inputs() drives operators of two inputs (connect, broadcast)." if len(node.inputs) == 2
               else "an operator of one input has a harness of its own (for_stream() and the other factories)."
               if len(node.inputs) == 1 else "a harness drives operators of one or two inputs."))
    edges = sorted(node.inputs, key=lambda edge: edge.input_number)
    node.operator.side_tags = EVERY_SIDE_OUTPUT
    return DeclaredOperator(graph, node, tuple(edge.partitioner.key_selector if edge.partitioner.kind == "hash"
                                               else None for edge in edges))
