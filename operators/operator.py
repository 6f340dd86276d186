"""The operator kinds the runtime knows: one-input operators, sources and sinks.

Operators work on batches (lists of records) rather than single records: one Python call per batch per
operator instead of one per record is most of the difference between a slow and a fast Python engine.
"""

from __future__ import annotations

from typing import Any

from operators.context import StreamingRuntimeContext, SubtaskInfo
from runtime.protocol.events import MIN_WATERMARK

__all__ = ["StreamOperator", "OneInputOperator", "SourceOperator", "SinkOperator"]


class StreamOperator:
    """An operator instance: built on the driver, shipped to the executors, one copy per subtask."""

    keyed = False
    side_tags: frozenset = frozenset()  # side-output tags with consumers; set by the job graph
    emits_side_outputs = False  # whether its output may hold SideOutputRecords (then it ends its chain)

    USER_STATE_PREFIX = "user:"
    # Makes the stream's watermarks itself (assign_timestamps_and_watermarks): watermarks from upstream stop
    # here, except the final one at the end of input.
    generates_watermarks = False
    has_processing_timers = False  # the subtask asks next_processing_time() and calls on_processing_time()
    # Emits about as many records as it takes in. A sink's writer that emits a few records per checkpoint says
    # False: the small batches its consumer asks for (buffer debloating) must not shrink what its source reads.
    output_follows_input = True
    watermark = MIN_WATERMARK  # the operator's input watermark, set by process_watermark

    def __init__(self, name: str, function: Any = None):
        self.name = name
        self.function = function
        self.info: SubtaskInfo | None = None
        self.runtime_context: StreamingRuntimeContext | None = None
        self._list_states: dict[str, list] = {}
        self._restored_lists: dict[str, list] = {}

    def setup(self, info: SubtaskInfo, keyed_backend=None) -> None:
        self.info = info
        self.runtime_context = StreamingRuntimeContext(info, keyed_backend, self)

    def operator_list(self, name: str) -> list:
        """The live list behind the user's operator list state ``name`` (restored content on first use)."""
        items = self._list_states.get(name)
        if items is None:
            items = self._list_states[name] = list(self._restored_lists.pop(name, []))
        return items

    def open(self) -> None:
        opener = getattr(self.function, "open", None)
        if opener is not None and callable(opener):
            opener(self.runtime_context)

    def process_watermark(self, watermark: int) -> list:
        """The input watermark advanced to ``watermark``: fire what is due and return the records to emit
        before the watermark goes on downstream."""
        self.watermark = watermark
        return []

    def next_processing_time(self) -> int | None:
        """When the earliest processing-time timer falls due (epoch ms), if there is one."""
        return None

    def on_processing_time(self, now_ms: int) -> list:
        """Fire the processing-time timers due at ``now_ms``; return the records they emit."""
        return []

    def finish(self) -> list:
        """End of input: records still to emit (none for most operators)."""
        return []

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> list:
        """Records to emit downstream ahead of barrier ``checkpoint_id``, just before the snapshot (Flink's
        ``prepareSnapshotPreBarrier``): a sink's writer hands its committer what it wrote since the last barrier,
        so that the committer's state in the same checkpoint holds it."""
        return []

    def prepare_stop(self, checkpoint_id: int) -> list:
        """Records to emit when the job stops with a savepoint without draining (``stop_with_savepoint``): this
        subtask's input stopped, no ``finish`` comes, and its final state, the savepoint's, follows under
        ``checkpoint_id`` (the first checkpoint that can include it). What goes ahead of a barrier by default;
        unlike a barrier, nothing follows it in this run."""
        return self.prepare_snapshot_pre_barrier(checkpoint_id)

    def snapshot_operator_state(self, checkpoint_id: int) -> dict[str, list]:
        """Non-keyed list state at a barrier, by name (synchronous part: return copies, not live lists).

        On a restore at another parallelism, each list is split round-robin over the new subtasks; a list
        whose name starts with ``union:`` goes whole to every subtask (Flink's union list state).
        Subclasses add their own lists to this one's (the user function's operator list states).
        """
        prefix = self.USER_STATE_PREFIX
        return {prefix + name: list(items) for name, items in self._list_states.items()}

    def restore_operator_state(self, state: dict[str, list]) -> None:
        """Load this subtask's share of the list state; called before ``open``."""
        prefix = self.USER_STATE_PREFIX
        self._restored_lists = {name[len(prefix):]: items for name, items in state.items()
                                if name.startswith(prefix)}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` (and all before it) is committed. Forwarded to the user function."""
        notify = getattr(self.function, "notify_checkpoint_complete", None)
        if notify is not None and callable(notify):
            notify(checkpoint_id)

    def close(self) -> None:
        closer = getattr(self.function, "close", None)
        if closer is not None and callable(closer):
            closer()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class OneInputOperator(StreamOperator):
    def process_batch(self, records: list) -> list:
        raise NotImplementedError


class SourceOperator(StreamOperator):
    def poll(self, max_records: int) -> list | None:
        """Up to ``max_records`` records; ``[]`` when none are ready; ``None`` once exhausted."""
        raise NotImplementedError

    def describe_position(self) -> str | None:
        """The position taken by the last ``snapshot_operator_state``, for people (checkpoint metadata, CLI)."""
        return None


class SinkOperator(StreamOperator):
    def process_batch(self, records: list) -> list:
        raise NotImplementedError

    def result(self) -> Any:
        """What the driver receives from this subtask when the job ends (None for most sinks)."""
        return None
