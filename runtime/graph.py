"""From the transformations a user's program declares to the job graph the executors run.

The API records :class:`Transformation` nodes (physical ones: source, operator, sink; virtual ones:
partition for ``key_by``/``rebalance``/..., union). :func:`compile_job_graph` resolves the virtual nodes into
edges with partitioners, assigns parallelism and stable uids, validates, and chains operators the way Flink
does: a node joins its upstream's chain when it has exactly one input, the edge is forward, the
parallelism is equal, and the upstream has no other consumer. Records inside a chain are passed as Python
lists, never serialised.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import cloudpickle

from runtime.errors import JobGraphError, UnpicklableFunctionError
from runtime.key_groups import UPPER_BOUND_MAX_PARALLELISM, default_max_parallelism
from runtime.types import TypeInformation

__all__ = [
    "Partitioner",
    "Transformation",
    "OperatorNode",
    "ChainEdge",
    "Chain",
    "JobGraph",
    "CheckpointSettings",
    "compile_job_graph",
]

_ids = itertools.count()


@dataclass(frozen=True)
class Partitioner:
    """How records of an edge are distributed over the consumer's subtasks."""

    kind: str  # "forward" | "rebalance" | "hash" | "broadcast"
    key_selector: Callable | None = None
    key_column: str | None = None  # hash partitioning of a columnar edge: by this column's values

    def __repr__(self) -> str:
        return self.kind.upper()


FORWARD = Partitioner("forward")
REBALANCE = Partitioner("rebalance")
BROADCAST = Partitioner("broadcast")


@dataclass(eq=False)
class Transformation:
    """One node the API declared. ``make_operator`` builds the operator on the driver at compile time."""

    kind: str  # "source" | "operator" | "sink" | "partition" | "union" | "side"
    name: str
    inputs: list["Transformation"] = field(default_factory=list)
    make_operator: Callable[[str], Any] | None = None
    parallelism: int | None = None
    output_type: TypeInformation | None = None
    uid: str | None = None
    partitioner: Partitioner | None = None
    non_parallel: bool = False
    environment: Any = None
    side_tag: str | None = None  # for "side": the OutputTag id selected from the input
    schema: Any = None  # a pyarrow.Schema when the output is columnar (record batches), else None
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def is_virtual(self) -> bool:
        return self.kind in ("partition", "union", "side")


@dataclass(eq=False)
class OperatorNode:
    name: str
    uid: str
    parallelism: int
    operator: Any
    output_type: TypeInformation | None
    is_source: bool
    is_sink: bool
    schema: Any = None  # pyarrow.Schema of a columnar output
    inputs: list["_Edge"] = field(default_factory=list)
    outputs: list["_Edge"] = field(default_factory=list)


@dataclass(eq=False)
class _Edge:
    source: OperatorNode
    target: OperatorNode
    partitioner: Partitioner
    side_tag: str | None = None


@dataclass(frozen=True)
class ChainEdge:
    """A data edge between two chains; every (producer subtask, consumer subtask) pair it links is a channel."""

    id: int
    source_chain: int
    target_chain: int
    partitioner: Partitioner
    type_info: TypeInformation | None
    source_parallelism: int
    target_parallelism: int
    side_tag: str | None = None  # this edge carries the producer's side output with this tag
    schema: Any = None  # a pyarrow.Schema when the edge carries Arrow record batches (columnar path)

    def targets_of(self, producer: int) -> range:
        """Consumer subtasks that producer subtask ``producer`` sends to."""
        if self.partitioner.kind == "forward":
            return range(producer, producer + 1)
        return range(self.target_parallelism)

    def producers_of(self, consumer: int) -> range:
        """Producer subtasks that send to consumer subtask ``consumer``."""
        if self.partitioner.kind == "forward":
            return range(consumer, consumer + 1)
        return range(self.source_parallelism)


@dataclass(eq=False)
class Chain:
    """Operators run back to back in one task; ``operators[0]`` is the head."""

    index: int
    operators: list[OperatorNode]
    parallelism: int
    inputs: list[ChainEdge] = field(default_factory=list)
    outputs: list[ChainEdge] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " -> ".join(op.name for op in self.operators)

    @property
    def is_source(self) -> bool:
        return self.operators[0].is_source

    @property
    def is_columnar_source(self) -> bool:
        """Its source emits Arrow record batches: poll sizes count rows, not records."""
        return self.is_source and self.operators[0].schema is not None


@dataclass(frozen=True)
class CheckpointSettings:
    """What tasks need to know about checkpointing: alignment mode and where to write."""

    exactly_once: bool
    storage: Any  # state_backends.storage.CheckpointStorage


@dataclass(eq=False)
class JobGraph:
    job_name: str
    chains: list[Chain]
    edges: list[ChainEdge]
    max_parallelism: int
    buffer_timeout_ms: float
    batch_size: int
    checkpointing: CheckpointSettings | None = None
    columnar_batch_size: int = 65536  # rows per Arrow batch on the columnar path

    @property
    def slots(self) -> int:
        """Spark task slots the job occupies: its highest parallelism (slot sharing)."""
        return max(chain.parallelism for chain in self.chains)

    @property
    def operators(self) -> list[OperatorNode]:
        return [op for chain in self.chains for op in chain.operators]

    def describe(self) -> str:
        lines = [f"Job '{self.job_name}': {len(self.chains)} tasks in {self.slots} slots, "
                 f"max parallelism {self.max_parallelism}"]
        for chain in self.chains:
            lines.append(f"  task {chain.index} [p={chain.parallelism}] {chain.name}")
            for edge in chain.outputs:
                lines.append(f"    --{edge.partitioner!r}--> task {edge.target_chain}")
        return "\n".join(lines)


def _resolve_inputs(t: Transformation) -> list[tuple[Transformation, Partitioner | None, str | None]]:
    """Physical upstream nodes of ``t``, each with the partitioner and side-output tag virtual nodes set."""
    resolved: list[tuple[Transformation, Partitioner | None, str | None]] = []

    def visit(node: Transformation, partitioner: Partitioner | None, side_tag: str | None):
        if node.kind == "partition":
            visit(node.inputs[0], node.partitioner if partitioner is None else partitioner, side_tag)
        elif node.kind == "union":
            for upstream in node.inputs:
                visit(upstream, partitioner, side_tag)
        elif node.kind == "side":
            visit(node.inputs[0], partitioner, node.side_tag)
        else:
            resolved.append((node, partitioner, side_tag))

    for upstream in t.inputs:
        visit(upstream, None, None)
    return resolved


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


def compile_job_graph(transformations: list[Transformation], job_name: str, default_parallelism: int,
                      max_parallelism: int | None, buffer_timeout_ms: float, batch_size: int) -> JobGraph:
    """Validate the declared transformations and build the job graph. Raises :class:`JobGraphError`."""
    physical = sorted((t for t in transformations if not t.is_virtual), key=lambda t: t.id)
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
        uid = t.uid or _derive_uid(t, [nodes[u.id].uid for u, _, _ in upstream], derive_seen)
        if uid in seen_uids:
            raise JobGraphError(f"Operators '{seen_uids[uid]}' and '{t.name}' both have uid '{uid}': "
                                "uids identify state in checkpoints and must be unique.")
        seen_uids[uid] = t.name
        node = OperatorNode(t.name, uid, parallelism, t.make_operator(t.name), t.output_type,
                            is_source=t.kind == "source", is_sink=t.kind == "sink", schema=t.schema)
        nodes[t.id] = node
        for u, partitioner, side_tag in upstream:
            source = nodes[u.id]
            if partitioner is None:
                partitioner = FORWARD if source.parallelism == parallelism else REBALANCE
            elif partitioner.kind == "forward" and source.parallelism != parallelism:
                raise JobGraphError(
                    f"forward() between '{source.name}' (parallelism {source.parallelism}) and '{t.name}' "
                    f"(parallelism {parallelism}) is impossible: forward needs equal parallelism. "
                    "Use rebalance() or make the parallelisms equal."
                )
            edge = _Edge(source, node, partitioner, side_tag)
            source.outputs.append(edge)
            node.inputs.append(edge)

    all_nodes = list(nodes.values())
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
                                   None if edge.side_tag else edge.source.schema)
            edges.append(chain_edge)
            chains[src_chain].outputs.append(chain_edge)
            chains[dst_chain].inputs.append(chain_edge)
    return JobGraph(job_name, chains, edges, max_p, buffer_timeout_ms, batch_size)
