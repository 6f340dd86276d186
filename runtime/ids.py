"""Distinct types for the ids that would otherwise all be plain ints in signatures.

One word per concept:

- a **slot** is one Spark barrier task (one Python worker process); slot ``i`` hosts subtask ``i`` of every
  chain whose parallelism is above ``i`` (Flink's slot sharing);
- a **chain** is a sequence of operators run back to back on one thread (the job graph's unit);
- a **subtask** is one parallel instance of a chain, or of an operator in it, numbered ``0..parallelism-1``;
- a **key group** is the unit in which keyed state is partitioned, routed, snapshotted and rescaled;
- an **attempt** is one run of the job's barrier stage: the first, then one per restart.

``NewType`` costs nothing at run time; type checkers keep a checkpoint id from being passed as a key group.

>>> CheckpointId(7) == 7
True
"""

from __future__ import annotations

from typing import NewType

__all__ = ["CheckpointId", "SlotIndex", "ChainIndex", "SubtaskIndex", "KeyGroup", "Attempt", "OperatorUid"]

CheckpointId = NewType("CheckpointId", int)
SlotIndex = NewType("SlotIndex", int)
ChainIndex = NewType("ChainIndex", int)
SubtaskIndex = NewType("SubtaskIndex", int)
KeyGroup = NewType("KeyGroup", int)
Attempt = NewType("Attempt", int)
OperatorUid = NewType("OperatorUid", str)
