"""What the DataStream API records: one :class:`Transformation` per declared operator or virtual node.

Physical kinds (source, operator, sink) become operators of the job graph; virtual kinds (partition for
``key_by``/``rebalance``/..., union, side output) become edges. See :mod:`runtime.graph.compile`.

>>> source = Transformation("source", "numbers")
>>> keyed = Transformation("partition", "KeyBy", [source])
>>> source.is_virtual, keyed.is_virtual, keyed.inputs[0].name
(False, True, 'numbers')
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from runtime.graph.job_graph import Partitioner
from runtime.types import TypeInformation

__all__ = ["Transformation", "with_upstream"]

_ids = itertools.count()


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
    two_input: bool = False  # inputs[0] and inputs[1] feed the operator's first and second input (connect)
    timestamp_column: str | None = None  # a columnar stream's event-time column, from assign_timestamps_and_watermarks
    chaining: str = "always"  # "always" | "head" (start_new_chain) | "never" (disable_chaining)
    description: str | None = None
    max_parallelism: int | None = None  # set_max_parallelism on the operator: must agree with the job's
    bounded: bool = True  # a source whose input ends (BATCH mode needs every source bounded)
    slot_sharing_group: str | None = None  # recorded; every subtask i runs in slot i whatever its group
    failed_records_tag: str | None = None  # records whose function raises go to this side output (opt-in)
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def is_virtual(self) -> bool:
        return self.kind in ("partition", "union", "side")




def with_upstream(transformations: list[Transformation]) -> list[Transformation]:
    """``transformations`` and every transformation upstream of them, in declaration order: a job is what its
    sinks read from, so a stream declared before an earlier ``execute()`` feeds the next job too, as in Flink.

    >>> source = Transformation("source", "numbers")
    >>> sink = Transformation("sink", "print", [Transformation("operator", "map", [source])])
    >>> [t.name for t in with_upstream([sink])]
    ['numbers', 'map', 'print']
    """
    found: dict[int, Transformation] = {}
    pending = list(transformations)
    while pending:
        t = pending.pop()
        if t.id not in found:
            found[t.id] = t
            pending.extend(t.inputs)
    return sorted(found.values(), key=lambda t: t.id)
