"""The job graph: what the executors run. Chains of operators, and the edges between chains.

Built by :mod:`runtime.graph.compile` from the transformations a program declared; shipped pickled to every
slot. A chain runs its operators back to back on one thread; every (producer subtask, consumer subtask) pair
of a :class:`ChainEdge` is a channel.

>>> edge = ChainEdge(0, source_chain=0, target_chain=1, partitioner=REBALANCE, type_info=None,
...                  source_parallelism=2, target_parallelism=3)
>>> list(edge.targets_of(1)), list(edge.producers_of(2))
([0, 1, 2], [0, 1])
>>> forward = ChainEdge(1, 0, 1, FORWARD, None, 2, 2)
>>> list(forward.targets_of(1)), list(forward.producers_of(1))
([1], [1])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from runtime.ids import ChainIndex, SubtaskIndex
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

    kind: str  # "forward" | "rebalance" | "rescale" | "shuffle" | "hash" | "custom" | "broadcast"
    key_selector: Callable | None = None
    key_column: str | None = None  # hash partitioning of a columnar edge: by this column's values
    partition: Callable | None = None  # "custom": (key, number of subtasks) -> the consumer subtask

    def __repr__(self) -> str:
        return self.kind.upper()


FORWARD = Partitioner("forward")
REBALANCE = Partitioner("rebalance")
RESCALE = Partitioner("rescale")
SHUFFLE = Partitioner("shuffle")
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
    chaining: str = "always"  # "always" | "head": starts a chain | "never": chained to nothing
    inputs: list["OperatorEdge"] = field(default_factory=list)
    outputs: list["OperatorEdge"] = field(default_factory=list)


@dataclass(eq=False)
class OperatorEdge:
    source: OperatorNode
    target: OperatorNode
    partitioner: Partitioner
    side_tag: str | None = None
    input_number: int = 1  # 2: the second input of a two-input operator


@dataclass(frozen=True)
class ChainEdge:
    """A data edge between two chains; every (producer subtask, consumer subtask) pair it links is a channel."""

    id: int
    source_chain: ChainIndex
    target_chain: ChainIndex
    partitioner: Partitioner
    type_info: TypeInformation | None
    source_parallelism: int
    target_parallelism: int
    side_tag: str | None = None  # this edge carries the producer's side output with this tag
    schema: Any = None  # a pyarrow.Schema when the edge carries Arrow record batches (columnar path)
    input_number: int = 1  # which input of the target chain's head it feeds (2: a two-input operator's second)

    def targets_of(self, producer: SubtaskIndex) -> range:
        """Consumer subtasks that producer subtask ``producer`` sends to."""
        if self.partitioner.kind == "forward":
            return range(producer, producer + 1)
        return range(self.target_parallelism)

    def producers_of(self, consumer: SubtaskIndex) -> range:
        """Producer subtasks that send to consumer subtask ``consumer``."""
        if self.partitioner.kind == "forward":
            return range(consumer, consumer + 1)
        return range(self.source_parallelism)


@dataclass(eq=False)
class Chain:
    """Operators run back to back on one thread of a slot; ``operators[0]`` is the head."""

    index: ChainIndex
    operators: list[OperatorNode]
    parallelism: int
    inputs: list[ChainEdge] = field(default_factory=list)
    outputs: list[ChainEdge] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " -> ".join(op.name for op in self.operators)

    def describe(self) -> str:
        """How messages name this chain: its operators' names and uids."""
        uids = ", ".join(op.uid for op in self.operators)
        return f"'{self.name}' (uid{'s' if len(self.operators) > 1 else ''} {uids})"

    @property
    def is_source(self) -> bool:
        return self.operators[0].is_source

    @property
    def is_columnar_source(self) -> bool:
        """Its source emits Arrow record batches: poll sizes count rows, not records."""
        return self.is_source and self.operators[0].schema is not None


@dataclass(frozen=True)
class CheckpointSettings:
    """What slots need to know about checkpointing: alignment mode and where to write."""

    exactly_once: bool
    storage: Any  # state_backends.storage.CheckpointStorage
    unaligned: bool = False  # unaligned checkpoints (only with exactly_once)
    aligned_timeout_ms: float = 0.0  # with unaligned: start aligned, switch after this long (0: at once)


@dataclass(eq=False)
class JobGraph:
    job_name: str
    chains: list[Chain]
    edges: list[ChainEdge]
    max_parallelism: int
    buffer_timeout_ms: float
    batch_size: int
    checkpointing: CheckpointSettings | None = None
    state_backend: Any = None  # a state_backends.base.StateBackend: makes each keyed operator's state
    columnar_batch_size: int = 65536  # rows per Arrow batch on the columnar path
    job_parameters: dict = field(default_factory=dict)  # read by functions: RuntimeContext.get_job_parameter
    auto_watermark_interval_ms: int = 200  # how often watermark-making operators are asked (0: never)
    heartbeat_timeout_ms: float = 30_000  # a slot silent this long is taken for hung: the attempt fails
    debloat_target_ms: float | None = 1_000.0  # buffer debloating: in-flight records drain in this time (None: off)
    metrics_interval_ms: float = 1_000.0  # how often slots report their metrics to the driver (0: never)
    switch_interval_ms: float | None = None  # the executors' GIL switch interval while a slot runs (None: Python's)
    cpu_affinity: str = "auto"  # whether a slot's worker is pinned to one CPU (runtime.executor.cpu_affinity)

    @property
    def heartbeat_interval_ms(self) -> float:
        """How often each slot says it is alive: often enough that a few lost beats never look like a hang."""
        return min(2_000.0, self.heartbeat_timeout_ms / 5)

    @property
    def slots(self) -> int:
        """Spark task slots the job occupies: its highest parallelism (slot sharing)."""
        return max(chain.parallelism for chain in self.chains)

    @property
    def operators(self) -> list[OperatorNode]:
        return [op for chain in self.chains for op in chain.operators]

    def describe(self) -> str:
        lines = [f"Job '{self.job_name}': {len(self.chains)} chains in {self.slots} slots, "
                 f"max parallelism {self.max_parallelism}"]
        for chain in self.chains:
            lines.append(f"  chain {chain.index} [p={chain.parallelism}] {chain.describe()}")
            for edge in chain.outputs:
                lines.append(f"    --{edge.partitioner!r}--> chain {edge.target_chain}")
        return "\n".join(lines)


