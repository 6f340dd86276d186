"""An operator test harness: the operator a job would run, driven one call at a time, without Spark.

Python's counterpart of Flink's ``OneInputStreamOperatorTestHarness`` and, for the operators of ``connect`` and
``broadcast``, of its ``TwoInputStreamOperatorTestHarness`` (:meth:`OperatorHarness.for_two_inputs`). The harness
declares the operator on a stream (:mod:`runtime.testing.declared`), so it is the job graph's own operator, and
drives it as a subtask does (:mod:`runtime.executor.subtask`): set up with its subtask's place, restored before it
opens, records in batches, the input watermark only when it advances (fired timers emitted before the watermark
goes on), processing-time timers when the clock reaches them, snapshots between two calls, end of input, close.
What the subtask's record writer would have sent is collected (:mod:`runtime.testing.output`). Exceptions of the
user's function reach the test as they are.

>>> harness = OperatorHarness.for_flat_map(str.split)
>>> harness.open()
>>> harness.process_element("to be", timestamp=5); harness.process_watermark(10)
>>> harness.output_with_timestamps(), harness.watermarks()
([('to', 5), ('be', 5)], [10])
>>> harness.close()
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Iterable

from operators.context import SubtaskInfo
from operators.failed_records import process_isolating_failures
from operators.functions import KeyedProcessFunction
from runtime.datastream.data_stream import DataStream
from runtime.executor.watermarks import InputWatermarks
from runtime.network.codec import RecordCodec
from runtime.protocol.events import MAX_WATERMARK
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag
from runtime.testing.clock import ManualClock
from runtime.testing.declared import DeclaredOperator, declare_operator
from runtime.testing.errors import HarnessError
from runtime.testing.output import CollectedOutput
from runtime.testing.snapshots import HarnessSnapshot, restore_snapshots, take_snapshot
from runtime.types import TypeInformation

__all__ = ["OperatorHarness", "Lifecycle"]


class Lifecycle(Enum):
    """Where a harness's operator is in the life a subtask gives it.

    >>> [state.value for state in Lifecycle]
    ['created', 'restored', 'open', 'ended', 'closed']
    """

    CREATED = "created"  # set up: restore(...) may load state, open() starts it
    RESTORED = "restored"  # state loaded: open() next
    OPEN = "open"  # takes records, watermarks and processing time
    ENDED = "ended"  # end_input() ran: snapshots and notifications only
    CLOSED = "closed"


_BEFORE_OPEN = "before open(): call open() first (a subtask opens its operator before it hands it anything)"
_NOT_NOW = {
    Lifecycle.CREATED: _BEFORE_OPEN,
    Lifecycle.RESTORED: _BEFORE_OPEN,
    Lifecycle.OPEN: "after open(): call restore(...) before open(), as a restarted job loads its operators' state "
                    "before they open",
    Lifecycle.ENDED: "after end_input(): the input has ended; to go on, restore a snapshot into a new harness",
    Lifecycle.CLOSED: "after close(): to go on, restore a snapshot into a new harness",
}


class OperatorHarness:
    """Drives the operator of a stream that is not keyed: ``map``, ``flat_map``, ``filter``, ``process`` ...
    (:class:`~runtime.testing.keyed.KeyedOperatorHarness` drives keyed ones). Build one with a ``for_...``
    factory; ``open()`` it, feed it, read what it emitted, ``close()`` it.

    >>> from operators.functions import ProcessFunction
    >>> from runtime.side_outputs import OutputTag
    >>> negative = OutputTag("negative")
    >>> class Sign(ProcessFunction):
    ...     def process_element(self, value, ctx):
    ...         yield (negative, value) if value < 0 else value
    >>> harness = OperatorHarness.for_process_function(Sign())
    >>> harness.open()
    >>> harness.process_elements([3, -1, 4])
    >>> harness.output(), harness.side_output(negative)
    ([3, 4], [-1])
    """

    keyed = False  # whether it drives keyed operators (with a keyed state backend and key groups)

    def __init__(self, declared: DeclaredOperator, subtask_index: int = 0):
        """Use a ``for_...`` factory: it declares the operator."""
        node = declared.node
        operator = node.operator
        if bool(getattr(operator, "keyed", False)) != self.keyed:
            raise HarnessError(self._wrong_kind(node.name, type(operator).__name__))
        if type(subtask_index) is not int or not 0 <= subtask_index < node.parallelism:
            raise HarnessError(f"subtask_index={subtask_index!r}: operator '{node.name}' has parallelism "
                               f"{node.parallelism}, so its subtasks are 0..{node.parallelism - 1}.")
        self._declared = declared
        self.operator = operator  # the job's own operator instance, for assertions on it
        self.subtask_index = subtask_index
        self.parallelism = node.parallelism
        self.max_parallelism = declared.graph.max_parallelism
        self._clock = ManualClock()
        self._backend = self._create_backend()
        self._output = CollectedOutput()
        self._input_watermarks = InputWatermarks(declared.inputs)  # one channel per input: the least of them
        # What the subtask does around process_batch: records that raise set aside on a side output (opt-in), and
        # tuples made Rows where the operator declared a row type.
        isolated = getattr(operator, "isolates_failed_records", False)
        self._failed_tag = None if isolated else getattr(operator, "failed_records_tag", None)
        self._as_rows = (RecordCodec(node.output_type, node.name).as_rows if node.output_type is not None
                         and node.output_type.is_row and node.schema is None else None)
        graph = declared.graph
        # The harness's clock is the subtask's: timers, windows, trigger contexts and TTL all read it.
        operator.setup(SubtaskInfo(node.name, subtask_index, node.parallelism, graph.max_parallelism, 0,
                                   graph.job_parameters, clock=self._clock.now_ms), self._backend)
        self._lifecycle = Lifecycle.CREATED

    def _create_backend(self):
        """The keyed state backend of the operator's subtask: none, unless the operator is keyed."""
        return None

    @classmethod
    def _wrong_kind(cls, name: str, kind: str) -> str:
        return (f"Operator '{name}' ({kind}) is keyed: harness it with KeyedOperatorHarness (its factories take the "
                "key selector), which gives it a keyed state backend and its subtask's key groups.")

    # -- building ----------------------------------------------------------------------------------------

    @classmethod
    def for_stream(cls, build: Callable[[DataStream], DataStream], *, parallelism: int = 1,
                   subtask_index: int = 0, max_parallelism: int = 128,
                   input_type: TypeInformation | None = None) -> "OperatorHarness":
        """A harness of the operator ``build`` declares on the stream it is given (of ``input_type``): subtask
        ``subtask_index`` of ``parallelism``, with ``max_parallelism`` key groups. Every other factory is one of
        these.

        >>> from runtime.side_outputs import OutputTag
        >>> failed = OutputTag("failed")
        >>> harness = OperatorHarness.for_stream(lambda ds: ds.map(int).side_output_failed_records(failed))
        >>> harness.open(); harness.process_elements(["1", "x", "2"])
        >>> harness.output(), [f.record for f in harness.side_output(failed)]
        ([1, 2], ['x'])
        """
        return cls(declare_operator(build, parallelism, max_parallelism, input_type), subtask_index)

    @classmethod
    def for_two_inputs(cls, build: Callable[[DataStream, DataStream], DataStream], *, parallelism: int = 1,
                       subtask_index: int = 0, max_parallelism: int = 128, input_type: TypeInformation | None = None,
                       second_input_type: TypeInformation | None = None) -> "OperatorHarness":
        """A harness of the operator of two inputs that ``build`` declares on the two streams it is given
        (``connect``, ``broadcast``); ``process_element`` and its kin feed the first input, ``process_element2``,
        ``process_elements2`` and ``process_watermark2`` the second. Its input watermark is the least of the two
        inputs', as in a job. The harness class follows the operator: :class:`KeyedOperatorHarness` where the first
        input is keyed (``keyed.connect(...)``, ``connect(...).key_by(...)``).

        >>> from operators.functions import CoMapFunction
        >>> class Tag(CoMapFunction):
        ...     def map1(self, value): return "number", value
        ...     def map2(self, value): return "word", value
        >>> harness = OperatorHarness.for_two_inputs(lambda numbers, words: numbers.connect(words).map(Tag()))
        >>> harness.open(); harness.process_element(1); harness.process_element2("to"); harness.output()
        [('number', 1), ('word', 'to')]
        >>> harness.process_watermark(10); harness.watermarks()   # the second input holds it back
        []
        >>> harness.process_watermark2(7); harness.watermarks()
        [7]
        """
        return cls(declare_operator(build, parallelism, max_parallelism, input_type, inputs=2,
                                    second_input_type=second_input_type), subtask_index)

    @classmethod
    def for_map(cls, function, output_type: TypeInformation | None = None, **placement) -> "OperatorHarness":
        """A harness of ``stream.map(function)``; ``placement``: ``parallelism``, ``subtask_index``,
        ``max_parallelism`` (see :meth:`for_stream`).

        >>> harness = OperatorHarness.for_map(lambda x: x * 10, parallelism=2, subtask_index=1)
        >>> harness.open(); harness.process_element(4); harness.output()
        [40]
        """
        return cls.for_stream(lambda ds: ds.map(function, output_type), **placement)

    @classmethod
    def for_flat_map(cls, function, output_type: TypeInformation | None = None, **placement) -> "OperatorHarness":
        """A harness of ``stream.flat_map(function)``.

        >>> harness = OperatorHarness.for_flat_map(lambda line: line.split(","))
        >>> harness.open(); harness.process_element("a,b"); harness.output()
        ['a', 'b']
        """
        return cls.for_stream(lambda ds: ds.flat_map(function, output_type), **placement)

    @classmethod
    def for_filter(cls, function, **placement) -> "OperatorHarness":
        """A harness of ``stream.filter(function)``.

        >>> harness = OperatorHarness.for_filter(lambda x: x > 1)
        >>> harness.open(); harness.process_elements([1, 2, 3]); harness.output()
        [2, 3]
        """
        return cls.for_stream(lambda ds: ds.filter(function), **placement)

    @classmethod
    def for_process_function(cls, function, output_type: TypeInformation | None = None,
                             **placement) -> "OperatorHarness":
        """A harness of ``stream.process(function)``, a :class:`~operators.functions.ProcessFunction`.

        >>> from operators.functions import KeyedProcessFunction
        >>> OperatorHarness.for_process_function(KeyedProcessFunction())
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: KeyedProcessFunction is a KeyedProcessFunction, which runs on a keyed...
        """
        if isinstance(function, KeyedProcessFunction):
            raise HarnessError(f"{type(function).__name__} is a KeyedProcessFunction, which runs on a keyed stream: "
                               "harness it with KeyedOperatorHarness.for_process_function(function, key_selector).")
        return cls.for_stream(lambda ds: ds.process(function, output_type), **placement)

    # -- the lifecycle -----------------------------------------------------------------------------------

    def _require(self, method: str, *allowed: Lifecycle) -> None:
        if self._lifecycle not in allowed:
            raise HarnessError(f"{method}() {_NOT_NOW[self._lifecycle]}.")

    @property
    def lifecycle(self) -> Lifecycle:
        return self._lifecycle

    def restore(self, *snapshots: HarnessSnapshot) -> None:
        """Load the state ``snapshots`` hold, before ``open()``: one snapshot of a harness of the same parallelism,
        or the snapshots of every subtask of harnesses of another parallelism (each harness takes the key groups
        it owns, and its round-robin share of operator list state, as a restored job's subtask does).

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); harness.restore(harness.snapshot(1))
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: restore() after open(): call restore(...) before open(), as a...
        """
        if self._lifecycle is Lifecycle.RESTORED:
            raise HarnessError("restore() twice: pass every snapshot to one call, restore(*snapshots).")
        self._require("restore", Lifecycle.CREATED)
        restore_snapshots(snapshots, self._declared, self.operator, self._backend, self.subtask_index)
        self._lifecycle = Lifecycle.RESTORED

    def open(self) -> None:
        """Open the operator (and the user's function), as a subtask does before its first record.

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.process_element(1)
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: process_element() before open(): call open() first (a subtask opens...
        """
        self._require("open", Lifecycle.CREATED, Lifecycle.RESTORED)
        self._lifecycle = Lifecycle.OPEN  # before the call: a subtask closes an operator whose open() raised too
        self.operator.open()

    def end_input(self) -> None:
        """The input ended (both, for an operator of two inputs): the final watermark fires every event-time timer,
        then the operator finishes (a processing-time window fires its panes), as at the end of a bounded job.

        >>> from runtime.protocol.events import MAX_WATERMARK
        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); harness.end_input(); harness.watermarks() == [MAX_WATERMARK]
        True
        """
        self._require("end_input", Lifecycle.OPEN)
        for channel in range(self._declared.inputs):  # every input ends
            advanced = self._input_watermarks.on_end_of_input(channel)
            if advanced is not None:
                self._advance_watermark(advanced)
        self._emit(self.operator.finish())
        self._lifecycle = Lifecycle.ENDED

    def close(self) -> None:
        """Close the operator (and the user's function) if it was opened, and its state backend. Closing twice
        does nothing.

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); harness.close(); harness.close(); harness.lifecycle.value
        'closed'
        """
        if self._lifecycle is Lifecycle.CLOSED:
            return
        if self._lifecycle in (Lifecycle.OPEN, Lifecycle.ENDED):
            self.operator.close()
        if self._backend is not None:
            self._backend.close()
        self._lifecycle = Lifecycle.CLOSED

    # -- input -------------------------------------------------------------------------------------------

    def process_element(self, record: Any, timestamp: int | None = None) -> None:
        """One record, with its event timestamp (None: it has none); the first input's, for an operator of two.

        >>> harness = OperatorHarness.for_map(lambda x: -x)
        >>> harness.open(); harness.process_element(7, timestamp=100); harness.output_with_timestamps()
        [(-7, 100)]
        """
        self._require("process_element", Lifecycle.OPEN)
        self._process([record], None if timestamp is None else [timestamp], 1)

    def process_elements(self, records: Iterable, timestamps: Iterable[int | None] | None = None) -> None:
        """A batch of records, handed to the operator in one call as a subtask hands it a batch from its input
        (a window operator folds such a batch in one pass); ``timestamps``: one per record. The first input's, for
        an operator of two.

        >>> harness = OperatorHarness.for_filter(bool)
        >>> harness.open(); harness.process_elements([0, 1, 2], timestamps=[5, 6, 7])
        >>> harness.output_with_timestamps()
        [(1, 6), (2, 7)]
        """
        self._require("process_elements", Lifecycle.OPEN)
        self._process(list(records), timestamps, 1)

    def process_element2(self, record: Any, timestamp: int | None = None) -> None:
        """One record of the second input of an operator of two (:meth:`for_two_inputs`).

        >>> OperatorHarness.for_map(str).process_element2("x")
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: process_element2(): operator 'Map' has one input: feed it with process_...
        """
        self._require_second("process_element2")
        self._process([record], None if timestamp is None else [timestamp], 2)

    def process_elements2(self, records: Iterable, timestamps: Iterable[int | None] | None = None) -> None:
        """A batch of records of the second input of an operator of two, in one call.

        >>> from operators.functions import CoFlatMapFunction
        >>> class Words(CoFlatMapFunction):
        ...     def flat_map1(self, line): yield from line.split()
        ...     def flat_map2(self, word): yield word.upper()
        >>> harness = OperatorHarness.for_two_inputs(lambda lines, words: lines.connect(words).flat_map(Words()))
        >>> harness.open(); harness.process_elements2(["or", "not"], timestamps=[3, 4])
        >>> harness.output_with_timestamps()
        [('OR', 3), ('NOT', 4)]
        """
        self._require_second("process_elements2")
        self._process(list(records), timestamps, 2)

    def _require_second(self, method: str) -> None:
        if self._declared.inputs != 2:
            raise HarnessError(f"{method}(): operator '{self._declared.node.name}' has one input: feed it with "
                               f"{method[:-1]}(); for_two_inputs() harnesses operators of two (connect, broadcast).")
        self._require(method, Lifecycle.OPEN)

    def _process(self, records: list, timestamps: Iterable[int | None] | None, input_number: int) -> None:
        if timestamps is not None:
            timestamps = list(timestamps)
            if len(timestamps) != len(records) or not all(t is None or type(t) is int for t in timestamps):
                raise HarnessError(f"process_elements() got {len(records)} records and timestamps {timestamps!r}: "
                                   "give one timestamp per record, each an int of milliseconds or None.")
            records = TimestampedBatch.of(records, timestamps)
        if not records:
            return
        self._admit(records, input_number)
        operator = self.operator
        if input_number == 2:  # as a subtask hands its second input's batches on (no failed-records isolation)
            self._emit(operator.process_batch2(records))
        elif self._failed_tag is None:
            self._emit(operator.process_batch(records))
        else:
            self._emit(process_isolating_failures(operator.process_batch, records, self._failed_tag, operator.name))

    def _admit(self, records: list, input_number: int) -> None:
        """Refuse records this subtask would never be sent (a keyed harness checks their keys)."""

    def process_watermark(self, watermark: int) -> None:
        """A watermark from the input (the first, for an operator of two): if it advances the input watermark, the
        operator fires the event-time timers and windows due, their records are emitted, then the watermark goes
        on (a watermark that does not advance changes nothing, as in a job).

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); harness.process_watermark(10); harness.process_watermark(5); harness.watermarks()
        [10]
        """
        self._require("process_watermark", Lifecycle.OPEN)
        self._watermark(watermark, 0)

    def process_watermark2(self, watermark: int) -> None:
        """A watermark from the second input of an operator of two: the input watermark is the least of the two
        inputs' (see :meth:`for_two_inputs`)."""
        self._require_second("process_watermark2")
        self._watermark(watermark, 1)

    def _watermark(self, watermark: int, channel: int) -> None:
        if type(watermark) is not int:
            raise HarnessError(f"process_watermark({watermark!r}): a watermark is an int of milliseconds.")
        advanced = self._input_watermarks.on_watermark(channel, watermark)
        if advanced is not None:
            self._advance_watermark(advanced)

    def _advance_watermark(self, watermark: int) -> None:
        operator = self.operator
        if operator.generates_watermarks and watermark != MAX_WATERMARK:
            return  # it makes the stream's watermarks itself: the input's stop here
        self._emit(operator.process_watermark(watermark))
        self._output.emit_watermark(watermark)

    @property
    def processing_time(self) -> int:
        """The harness's processing time in epoch milliseconds (0 until set)."""
        return self._clock.now_ms()

    def set_processing_time(self, now_ms: int) -> None:
        """Move processing time to ``now_ms``: the processing-time timers due by then fire (once open), and
        ``ctx.timer_service().current_processing_time()`` and state time-to-live read it.

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.set_processing_time(1_000); harness.processing_time
        1000
        """
        self._require("set_processing_time", Lifecycle.CREATED, Lifecycle.RESTORED, Lifecycle.OPEN)
        self._clock.set(now_ms)
        operator = self.operator
        if self._lifecycle is Lifecycle.OPEN and operator.has_processing_timers:
            due = operator.next_processing_time()
            if due is not None and due <= now_ms:
                self._emit(operator.on_processing_time(now_ms))

    # -- checkpoints -------------------------------------------------------------------------------------

    def snapshot(self, checkpoint_id: int = 1) -> HarnessSnapshot:
        """The operator's state now, as checkpoint ``checkpoint_id`` would store it (keyed state, operator list
        state, timers): picklable, for :meth:`restore` into a new harness.

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); snapshot = harness.snapshot(checkpoint_id=7)
        >>> snapshot.checkpoint_id, snapshot.operator_name, snapshot.rows
        (7, 'Map', ())
        """
        self._require("snapshot", Lifecycle.OPEN, Lifecycle.ENDED)
        if self.lifecycle is Lifecycle.OPEN:
            self._emit(self.operator.prepare_snapshot_pre_barrier(checkpoint_id))
        return take_snapshot(self._declared, self.operator, self._backend, checkpoint_id, self.subtask_index)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: the state backend and the operator (and the user's function's
        ``notify_checkpoint_complete``) are told, as after the coordinator committed it.

        >>> from operators.functions import MapFunction
        >>> class Committing(MapFunction):
        ...     def map(self, value): return value
        ...     def notify_checkpoint_complete(self, checkpoint_id): print("committed", checkpoint_id)
        >>> harness = OperatorHarness.for_map(Committing())
        >>> harness.open(); harness.notify_checkpoint_complete(3)
        committed 3
        """
        self._require("notify_checkpoint_complete", Lifecycle.OPEN, Lifecycle.ENDED)
        if self._backend is not None:
            self._backend.notify_checkpoint_complete(checkpoint_id)
        self.operator.notify_checkpoint_complete(checkpoint_id)

    # -- output ------------------------------------------------------------------------------------------

    def _emit(self, records: list) -> None:
        if not records:
            return
        if self._as_rows is not None:
            records = self._as_rows(records)
        self._output.emit(records)

    def output(self) -> list:
        """The records emitted so far (main output), in order."""
        return [record for record, _ in self._output.records]

    def output_with_timestamps(self) -> list[tuple[Any, int | None]]:
        """The records emitted so far as ``(record, timestamp)``; None where a record has no timestamp."""
        return list(self._output.records)

    def side_output(self, tag: OutputTag) -> list:
        """The records emitted so far under ``tag`` (every side output is collected, read or not).

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.side_output("late")
        Traceback (most recent call last):
            ...
        runtime.testing.errors.HarnessError: side_output() takes an OutputTag, e.g. OutputTag('late'), not a str.
        """
        if not isinstance(tag, OutputTag):
            raise HarnessError(f"side_output() takes an OutputTag, e.g. OutputTag('late'), not a {type(tag).__name__}.")
        return [record for record, _ in self._output.side_outputs.get(tag.tag_id, ())]

    def watermarks(self) -> list[int]:
        """The watermarks sent on downstream so far."""
        return list(self._output.watermarks)

    def clear_output(self) -> None:
        """Forget the records, side outputs and watermarks collected so far.

        >>> harness = OperatorHarness.for_map(str)
        >>> harness.open(); harness.process_element(1); harness.clear_output(); harness.output()
        []
        """
        self._output.clear()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._declared.node.name!r}, subtask {self.subtask_index} of "
                f"{self.parallelism}, {self._lifecycle.value})")
