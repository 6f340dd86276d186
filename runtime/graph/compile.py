"""From the transformations a user's program declares to the job graph the executors run.

The API records :class:`~runtime.graph.transformation.Transformation` nodes (physical ones: source,
operator, sink; virtual ones: partition for ``key_by``/``rebalance``/..., union). :func:`compile_job_graph`
resolves the virtual nodes into edges with partitioners, assigns parallelism and stable uids, validates,
and chains operators the way Flink does: a node joins its upstream's chain when it has exactly one input,
the edge is forward, the parallelism is equal, and the upstream has no other consumer. Records inside a
chain are passed as Python lists, never serialised.

>>> from runtime import StreamExecutionEnvironment
>>> from operators import DiscardingSink
>>> env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
>>> _ = env.from_sequence(0, 9).map(str).key_by(len).reduce(max).sink_to(DiscardingSink())
>>> graph = compile_job_graph(env._transformations, "job", 2, None, 5.0, 4096)
>>> [chain.name for chain in graph.chains], [edge.partitioner for edge in graph.edges]
(['Sequence Source -> Map', 'Keyed Reduce -> Sink: discard'], [HASH])
"""

from __future__ import annotations

import hashlib

import cloudpickle

from runtime.errors import JobGraphError, UnpicklableFunctionError
from runtime.graph.job_graph import (
    FORWARD,
    REBALANCE,
    Chain,
    ChainEdge,
    CheckpointSettings,
    JobGraph,
    OperatorEdge,
    OperatorNode,
    Partitioner,
)
from runtime.graph.transformation import Transformation, with_upstream
from runtime.keys.key_groups import UPPER_BOUND_MAX_PARALLELISM, default_max_parallelism
from state_backends.base import StateBackend
from state_backends.heap import HashMapStateBackend

__all__ = ["compile_job_graph"]


def _resolve_inputs(t: Transformation) -> list[tuple[Transformation, Partitioner | None, str | None, int]]:
    """Physical upstream nodes of ``t``, each with the partitioner and side-output tag virtual nodes set, and
    the logical input it feeds (1, or 2 for the second input of a two-input operator)."""
    resolved: list[tuple[Transformation, Partitioner | None, str | None, int]] = []

    def visit(node: Transformation, partitioner: Partitioner | None, side_tag: str | None, number: int):
        if node.kind == "partition":
            visit(node.inputs[0], node.partitioner if partitioner is None else partitioner, side_tag, number)
        elif node.kind == "union":
            for upstream in node.inputs:
                visit(upstream, partitioner, side_tag, number)
        elif node.kind == "side":
            visit(node.inputs[0], partitioner, node.side_tag, number)
        else:
            resolved.append((node, partitioner, side_tag, number))

    for number, upstream in enumerate(t.inputs, start=1):
        visit(upstream, None, None, number if t.two_input else 1)
    return resolved


def _combiner(operator, inputs: list, uid: str) -> OperatorNode | None:
    """Batch mode: a node that pre-folds a reduce's records before the shuffle, chained to the one upstream
    operator (see :class:`operators.batch.ReduceCombiner`); None where that does not apply."""
    from operators.batch import ReduceCombiner
    from operators.builtins import KeyedReduceOperator, may_use_keyed_state

    if type(operator) is not KeyedReduceOperator or may_use_keyed_state(operator.function) or len(inputs) != 1:
        return None  # a function with keyed state of its own must fold with its key set, downstream
    if getattr(operator, "failed_records_tag", None) is not None:
        return None  # a record that raises is set aside by the reduce itself, which names it
    source, partitioner, side_tag, _ = inputs[0]
    if side_tag is not None or partitioner is None or partitioner.kind != "hash":
        return None
    combiner = OperatorNode(f"Combine: {operator.name}", f"{uid}-combine", source.parallelism,
                            ReduceCombiner(f"Combine: {operator.name}", operator.call, operator.key_selector),
                            source.output_type, is_source=False, is_sink=False, schema=source.schema)
    edge = OperatorEdge(source, combiner, FORWARD, None, 1)
    source.outputs.append(edge)
    combiner.inputs.append(edge)
    return combiner


def _broadcast(operator) -> bool:
    from operators.broadcast import BroadcastProcessOperator

    return isinstance(operator, BroadcastProcessOperator)


def _batch_operator(operator, name: str):
    from operators.batch import BatchKeyedOperator

    if _broadcast(operator):
        return BatchKeyedOperator(operator)
    if getattr(operator, "key_selector", None) is None and getattr(operator, "key1", None) is None:
        raise JobGraphError(f"Operator '{name}' (a running aggregate over Arrow batches) has no batch execution: "
                            "run the job in STREAMING mode, or call to_rows() and use reduce() in BATCH mode.")
    return BatchKeyedOperator(operator)


def _agreed_max_parallelism(transformations: list[Transformation], job_value: int | None) -> int | None:
    """The job's max parallelism, given operators' own ``set_max_parallelism``: one number of key groups per job,
    so they must agree with each other and with the environment's."""
    chosen = {t.max_parallelism: t.name for t in transformations if t.max_parallelism is not None}
    if not chosen:
        return job_value
    if len(chosen) > 1 or (job_value is not None and job_value not in chosen):
        said = ", ".join(f"'{name}': {value}" for value, name in sorted(chosen.items()))
        job = f"; the environment's is {job_value}" if job_value is not None else ""
        raise JobGraphError(f"Operators set different max parallelisms ({said}{job}). Chandy splits the keyed state "
                            "of a job into one number of key groups: set one value, e.g. env.set_max_parallelism(n).")
    return next(iter(chosen))


def _derive_uid(t: Transformation, input_uids: list[str], seen: dict[str, int]) -> str:
    basis = "|".join([t.kind, t.name, *input_uids])
    occurrence = seen.get(basis, 0)
    seen[basis] = occurrence + 1
    digest = hashlib.sha1(f"{basis}#{occurrence}".encode()).hexdigest()[:12]
    slug = "".join(c if c.isalnum() else "-" for c in t.name.lower()).strip("-")[:24] or t.kind
    return f"{slug}-{digest}"


def _check_picklable(node: OperatorNode) -> None:
    try:
        cloudpickle.dumps(node.operator)
    except Exception as exc:  # any failure to pickle is the user's function's
        raise UnpicklableFunctionError(node.name, exc) from exc


def _check_every_operator_reaches_a_sink(job_name: str, nodes: list[OperatorNode]) -> None:
    """A source whose records reach no sink is almost always a leftover line; it would also finish at once
    (or never) and, as a running task, change how the job checkpoints. Refuse it by name."""
    reaching = {id(n) for n in nodes if n.is_sink}
    for node in reversed(nodes):  # consumers come after their inputs
        if id(node) in reaching:
            reaching.update(id(edge.source) for edge in node.inputs)
    dead = [n for n in nodes if id(n) not in reaching]
    if dead:
        names = ", ".join(f"'{n.name}' (uid {n.uid})" for n in dead)
        raise JobGraphError(
            f"Job '{job_name}': the output of {names} reaches no sink. End the stream with sink_to(...) or "
            "print() (DiscardingSink() to run it for its side effects), or remove it from the program.")


def compile_job_graph(transformations: list[Transformation], job_name: str, default_parallelism: int,
                      max_parallelism: int | None, buffer_timeout_ms: float, batch_size: int,
                      checkpointing: CheckpointSettings | None = None,
                      state_backend: StateBackend | None = None, chaining: bool = True,
                      job_parameters: dict | None = None, auto_watermark_interval_ms: int = 200,
                      batch: bool = False) -> JobGraph:
    """Validate the declared transformations and build the job graph. Raises :class:`JobGraphError`.

    ``state_backend`` makes every keyed operator's state (default: :class:`HashMapStateBackend`);
    ``chaining=False`` runs every operator on a thread of its own (``disable_operator_chaining``);
    ``batch=True`` runs keyed operators with batch semantics (:mod:`operators.batch`).
    """
    transformations = with_upstream(transformations)
    physical = [t for t in transformations if not t.is_virtual]
    if not any(t.kind == "sink" for t in physical):
        raise JobGraphError(
            f"Job '{job_name}' has no sink, so it would compute nothing visible. End each stream with "
            "sink_to(...), print(), or use execute_and_collect()."
        )
    environments = {id(t.environment) for t in transformations if t.environment is not None}
    if len(environments) > 1:
        raise JobGraphError("The job combines streams from different StreamExecutionEnvironments; "
                            "build every stream of a job from one environment.")

    nodes: dict[int, OperatorNode] = {}
    seen_uids: dict[str, str] = {}
    derive_seen: dict[str, int] = {}
    for t in physical:
        parallelism = 1 if t.non_parallel else (t.parallelism or default_parallelism)
        if t.non_parallel and t.parallelism not in (None, 1):
            raise JobGraphError(f"Operator '{t.name}' is a non-parallel source; its parallelism must be 1, "
                                f"not {t.parallelism}.")
        upstream = _resolve_inputs(t)
        uid = t.uid or _derive_uid(t, [nodes[u.id].uid for u, _, _, _ in upstream], derive_seen)
        if uid in seen_uids:
            raise JobGraphError(f"Operators '{seen_uids[uid]}' and '{t.name}' both have uid '{uid}': "
                                "uids identify state in checkpoints and must be unique.")
        seen_uids[uid] = t.name
        operator = t.make_operator(t.name)
        if t.failed_records_tag is not None:  # its output holds FailedRecords for the side output: it ends its chain
            operator.failed_records_tag = t.failed_records_tag
            operator.emits_side_outputs = True
        inputs = [(nodes[u.id], partitioner, side_tag, number) for u, partitioner, side_tag, number in upstream]
        if batch and (getattr(operator, "keyed", False) or _broadcast(operator)):
            combiner = _combiner(operator, inputs, uid)
            if combiner is not None:
                nodes[("combine", t.id)] = combiner
                inputs = [(combiner, inputs[0][1], None, 1)]
            operator = _batch_operator(operator, t.name)
        node = OperatorNode(t.name, uid, parallelism, operator, t.output_type,
                            is_source=t.kind == "source", is_sink=t.kind == "sink", schema=t.schema,
                            chaining=t.chaining if chaining else "never")
        nodes[t.id] = node
        for source, partitioner, side_tag, number in inputs:
            if partitioner is None:
                partitioner = FORWARD if source.parallelism == parallelism else REBALANCE
            elif partitioner.kind == "forward" and source.parallelism != parallelism:
                raise JobGraphError(
                    f"forward() between '{source.name}' (parallelism {source.parallelism}) and '{t.name}' "
                    f"(parallelism {parallelism}) is impossible: forward needs equal parallelism. "
                    "Use rebalance() or make the parallelisms equal."
                )
            edge = OperatorEdge(source, node, partitioner, side_tag, number)
            source.outputs.append(edge)
            node.inputs.append(edge)

    all_nodes = list(nodes.values())
    _check_every_operator_reaches_a_sink(job_name, all_nodes)
    max_parallelism = _agreed_max_parallelism(physical, max_parallelism)
    max_p = max_parallelism or default_max_parallelism(max(n.parallelism for n in all_nodes))
    if not 1 <= max_p <= UPPER_BOUND_MAX_PARALLELISM:
        raise JobGraphError(f"max parallelism {max_p} is outside [1, {UPPER_BOUND_MAX_PARALLELISM}]")
    for node in all_nodes:
        if node.parallelism > max_p:
            raise JobGraphError(f"Operator '{node.name}' has parallelism {node.parallelism}, above the job's "
                                f"max parallelism {max_p}; raise set_max_parallelism() or lower it.")
        _check_picklable(node)

    for node in all_nodes:
        tags = {e.side_tag for e in node.outputs if e.side_tag}
        if tags:
            node.operator.side_tags = frozenset(tags)
            node.operator.emits_side_outputs = True

    chain_of: dict[int, list[OperatorNode]] = {}
    chains_in_order: list[list[OperatorNode]] = []
    for node in all_nodes:  # topological: inputs are declared before their consumers
        if len(node.inputs) == 1:
            edge = node.inputs[0]
            up = edge.source
            if (edge.partitioner.kind == "forward" and up.parallelism == node.parallelism
                    and node.chaining == "always" and up.chaining != "never"
                    and len(up.outputs) == 1 and not up.is_sink and edge.side_tag is None
                    and not getattr(up.operator, "emits_side_outputs", False)):
                chain = chain_of[id(up)]
                chain.append(node)
                chain_of[id(node)] = chain
                continue
        chain = [node]
        chains_in_order.append(chain)
        chain_of[id(node)] = chain

    chains = [Chain(i, ops, ops[0].parallelism) for i, ops in enumerate(chains_in_order)]
    index_of = {id(op): c.index for c in chains for op in c.operators}
    edges: list[ChainEdge] = []
    for node in all_nodes:
        for edge in node.inputs:
            src_chain, dst_chain = index_of[id(edge.source)], index_of[id(node)]
            if src_chain == dst_chain:
                continue
            chain_edge = ChainEdge(len(edges), src_chain, dst_chain, edge.partitioner,
                                   None if edge.side_tag else edge.source.output_type,
                                   edge.source.parallelism, node.parallelism, edge.side_tag,
                                   None if edge.side_tag else edge.source.schema, edge.input_number)
            edges.append(chain_edge)
            chains[src_chain].outputs.append(chain_edge)
            chains[dst_chain].inputs.append(chain_edge)
    return JobGraph(job_name, chains, edges, max_p, buffer_timeout_ms, batch_size, checkpointing,
                    state_backend if state_backend is not None else HashMapStateBackend(),
                    job_parameters=dict(job_parameters or {}),
                    auto_watermark_interval_ms=auto_watermark_interval_ms)
