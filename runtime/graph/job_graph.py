"""The job graph: what the executors run. Chains of operators, and the edges between chains.

Built by :mod:`runtime.graph.compile` from the transformations a program declared; shipped pickled to every
slot. A chain runs its operators back to back on one thread; every (producer subtask, consumer subtask) pair
of a :class:`ChainEdge` is a channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from runtime.types import TypeInformation

__all__ = [
    "Partitioner",
    "FORWARD",
    "REBALANCE",
    "BROADCAST",
    "OperatorNode",
    "OperatorEdge",
    "ChainEdge",
    "Chain",
    "JobGraph",
    "CheckpointSettings",
]


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
class OperatorNode:
    name: str
    uid: str
    parallelism: int
    operator: Any
    output_type: TypeInformation | None
    is_source: bool
    is_sink: bool
    schema: Any = None  # pyarrow.Schema of a columnar output
    inputs: list["OperatorEdge"] = field(default_factory=list)
    outputs: list["OperatorEdge"] = field(default_factory=list)


@dataclass(eq=False)
class OperatorEdge:
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


