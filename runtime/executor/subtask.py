"""One chain subtask: the thread that pulls its input, runs its operators back to back, and writes output.

A source chain polls its source; any other chain polls its input gate and hands the checkpoint barriers to its
:class:`~runtime.executor.barrier_handler.BarrierHandler`, which says when to snapshot. The synchronous part of a
snapshot is taken here, on this thread, between two batches; the asynchronous part goes to the slot's
:class:`~runtime.executor.snapshotter.Snapshotter`.

Time is handled here too, on the same thread, between batches: the input watermark (the minimum over the
input channels, :mod:`runtime.executor.watermarks`) goes through the chain's operators in order, each firing
its due event-time timers before the next sees the watermark, then to the output channels; operators that make
watermarks (``assign_timestamps_and_watermarks``) are asked for them every auto-watermark interval; and
processing-time timers fire when the wall clock reaches them, never from another thread.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import deque
from enum import Enum
from gc import set_threshold as set_gc_threshold

from operators.failed_records import process_isolating_failures
from operators.timers import processing_time_ms
from runtime.errors import FunctionContractError, KeySelectorError, RecordEncodingError, UnsupportedKeyError
from runtime.executor.barrier_handler import BarrierHandler
from runtime.executor.channel_state import ChannelState
from runtime.executor.counters import SubtaskCounters
from runtime.executor.failing_record import failing_record_repr
from runtime.executor.slot_services import SlotServices
from runtime.executor.snapshotter import OperatorSnapshot, SubtaskSnapshot
from runtime.executor.watermarks import InputWatermarks
from runtime.gc_pause import gc_paused
from runtime.graph.job_graph import Chain, OperatorNode
from runtime.ids import CheckpointId
from runtime.network.channels import Cancelled, InputGate
from runtime.network.codec import RecordCodec
from runtime.network.record_writer import RecordWriter
from runtime.protocol.events import (
    END_OF_INPUT,
    END_OF_INPUT_STOPPED,
    MAX_WATERMARK,
    CheckpointBarrier,
    EndOfInput,
    Watermark,
    WatermarkStatus,
)
from runtime.executor.queryable_state import read_as_json
from runtime.protocol.messages import FailurePhase, QueryState, StateAnswer, SubtaskFinished
from runtime.protocol.records import TimestampedBatch, count_records, slice_batch

__all__ = ["SubtaskRunner", "SubtaskStatus", "OperatorError"]

log = logging.getLogger(__name__)

# What the record writer raises about a record itself (its key, its encoding): the emitting operator's failure.
RECORD_ERRORS = (RecordEncodingError, UnsupportedKeyError, KeySelectorError, FunctionContractError)


class OperatorError(Exception):
    """An exception raised by an operator (usually the user's function), with the operator named."""

    def __init__(self, node: OperatorNode, cause: BaseException, phase: FailurePhase = FailurePhase.RUN):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.operator_name = node.name
        self.operator_uid = node.uid
        self.cause = cause
        self.phase = phase
        self.record = failing_record_repr(cause) if phase is FailurePhase.RUN else None  # the input that raised


class SubtaskStatus(Enum):
    RUNNING = "running"
    FINISHED = "finished"  # consumed all its input, flushed, sent end-of-input


class SubtaskRunner:
    """One chain subtask: pulls input from its gate (or its source), runs its operators, writes output."""

    def __init__(self, slot: SlotServices, chain: Chain, gate: InputGate | None):
        self.slot = slot
        self.chain = chain
        self.gate = gate
        self.operators = [node.operator for node in chain.operators]
        # Operators that declared a row type hand Rows on, as an edge would (None: they hand what they make).
        self.row_makers = [RecordCodec(node.output_type, node.name).as_rows
                           if node.output_type is not None and node.output_type.is_row and node.schema is None
                           else None for node in chain.operators]
        # Operators whose records that raise go to a side output (side_output_failed_records): their tag, else None.
        # A keyed operator in BATCH mode sets its failed records aside itself, when it runs each key's records.
        self.failed_tags = [None if getattr(op, "isolates_failed_records", False)
                            else getattr(op, "failed_records_tag", None) for op in self.operators]
        self.writer: RecordWriter | None = None
        self.buffer_timeout = slot.graph.buffer_timeout_ms / 1000.0
        # A columnar source's poll size counts rows of one Arrow batch, not Python records.
        self.batch_size = slot.graph.columnar_batch_size if chain.is_columnar_source else slot.graph.batch_size
        self.backends = [getattr(op.runtime_context, "keyed_backend", None) for op in self.operators]
        self.triggers: deque = deque()  # checkpoint ids to inject (sources), appended by the control thread
        self.notifications: deque = deque()  # completed checkpoint ids, appended by the control thread
        # lookups of queryable state (QueryState, when the slot read it), appended by the control thread
        self.queries: deque = deque()
        self.uids = {node.uid: index for index, node in enumerate(chain.operators)}
        self.wakeup = threading.Event()  # set by the control thread with each of those (and on cancel)
        self.status = SubtaskStatus.RUNNING
        self.last_checkpoint_id = CheckpointId(0)  # the newest checkpoint this subtask took its state for
        # The job stops with a savepoint without draining (stop_with_savepoint): this subtask's input stopped
        # rather than ended, so its operators are not finished and no end-of-input watermark fires timers.
        self.stopping = False
        checkpointing = slot.graph.checkpointing
        # Unaligned checkpoints: sends never wait (overdraft), so the subtask waits for its outputs before it
        # takes more input, and hands its barrier handler the barriers that overtook its input meanwhile.
        self.unaligned = checkpointing is not None and checkpointing.unaligned
        self.aligned_timeout_ms = checkpointing.aligned_timeout_ms if self.unaligned else 0.0
        self.barriers: BarrierHandler | None = None
        if gate is not None and checkpointing is not None:
            self.barriers = BarrierHandler(gate, self, checkpointing.exactly_once, self.unaligned,
                                           self.aligned_timeout_ms, self._channel_state, chain.describe())
        self.input_edges = {edge.id: edge for edge in chain.inputs}
        self.replay: list = []  # (input number, batch): channel state of the checkpoint restored, pushed first
        self.record_cost_s = [0.0, 0.0]  # seconds per record of input 1 and 2 through the chain, smoothed (slicing)
        self.watermarks = InputWatermarks(len(gate)) if gate is not None else None
        self.sent_idle = False  # whether this subtask told its consumers that it is idle
        interval_ms = slot.graph.auto_watermark_interval_ms
        self.generators = [(i, op) for i, op in enumerate(self.operators) if op.generates_watermarks]
        if chain.is_source and len(self.operators) > 1 and hasattr(self.operators[1], "split_source"):
            # Timestamps and watermarks right after the source: per split, where the source's reader keeps splits.
            self.operators[0].passes_splits = True
            self.operators[1].split_source = self.operators[0]
        self.watermark_interval = interval_ms / 1000.0 if self.generators and interval_ms > 0 else None
        self.timer_operators = [(i, op) for i, op in enumerate(self.operators) if op.has_processing_timers]
        # Per gate channel: whether it feeds the second input of a two-input head (connect), else None.
        self.second_input = None
        if gate is not None and any(edge.input_number == 2 for edge in chain.inputs):
            number_of = {edge.id: edge.input_number for edge in chain.inputs}
            self.second_input = [number_of[edge_id] == 2 for edge_id, _ in gate.channels]
        self.counters = SubtaskCounters.for_chain(len(self.operators))
        self._counts = self.counters.records if slot.graph.metrics_interval_ms > 0 else None  # metrics off: not counted

    def _call(self, index: int, method: str, *args):
        try:
            return getattr(self.operators[index], method)(*args)
        except (Cancelled, OperatorError):
            raise
        except Exception as exc:
            phase = FailurePhase.OPEN if method == "open" else FailurePhase.RUN
            raise OperatorError(self.chain.operators[index], exc, phase) from exc

    def _push_second(self, records: list) -> None:
        """Records of the second input of a two-input head operator (``connect``)."""
        if self._counts is not None:
            self._counts[0] += count_records(records)
        self._within_batch(self._second_through_chain, records)

    def _second_through_chain(self, records: list) -> None:
        try:
            records = self.operators[0].process_batch2(records)
        except Cancelled:
            raise
        except Exception as exc:
            raise OperatorError(self.chain.operators[0], exc) from exc
        if records:
            self._through_chain(records, 1)

    def _push(self, records: list, start: int) -> None:
        """``records``, the output of operator ``start - 1`` (the input when 0), through the rest of the chain."""
        self._within_batch(self._through_chain, records, start)

    def _within_batch(self, work, *args) -> None:
        """``work(*args)`` with the young generation's threshold raised: the collections its objects call for come
        after it (runtime.gc_pause)."""
        young = self.slot.young_thresholds
        set_gc_threshold(young.within)
        try:
            work(*args)
        finally:
            set_gc_threshold(young.between)

    def _through_chain(self, records: list, start: int) -> None:
        operators, counts, row_makers, failed_tags = self.operators, self._counts, self.row_makers, self.failed_tags
        if start and row_makers[start - 1] is not None:
            records = self._as_rows(start - 1, records)
        for i in range(start, len(operators)):
            if counts is not None:
                counts[i] += count_records(records)
            try:
                if failed_tags[i] is None:
                    records = operators[i].process_batch(records)
                else:
                    records = self._one_by_one(i, records)
            except Cancelled:
                raise
            except Exception as exc:
                raise OperatorError(self.chain.operators[i], exc) from exc
            if not records:
                return
            if row_makers[i] is not None:
                records = self._as_rows(i, records)
        if counts is not None:
            counts[-1] += count_records(records)
        self.writer.emit(records)

    def _one_by_one(self, index: int, records: list) -> list:
        """Operator ``index``'s output for ``records``, processed one at a time: a record whose processing raises
        becomes a FailedRecord on the operator's side output for failed records, and the others go on."""
        return process_isolating_failures(self.operators[index].process_batch, records, self.failed_tags[index],
                                          self.chain.operators[index].name, never_isolated=(Cancelled,))

    def _as_rows(self, index: int, records: list) -> list:
        try:
            return self.row_makers[index](records)
        except Exception as exc:  # a record that does not fit the declared type: the operator's fault
            raise OperatorError(self.chain.operators[index], exc) from exc

    def run(self) -> None:
        opened = 0  # operators whose open() ran: only they are closed (an async operator's thread stops then)
        try:
            for index in range(len(self.operators)):
                opened += 1
                self._call(index, "open")
            self._run_to_the_end()
        except RECORD_ERRORS as exc:  # raised by the writer: the chain's last operator emitted the record, unless
            # the error names the operator to blame (a key selector's error: the key_by's consumer)
            raise OperatorError(getattr(exc, "operator_node", None) or self.chain.operators[-1], exc) from exc
        finally:
            for node in self.chain.operators[:opened]:
                try:
                    node.operator.close()
                except Exception:  # close errors must not hide the error that ended the subtask
                    log.exception("close() of operator '%s' (uid %s) failed", node.name, node.uid)

    def _run_to_the_end(self) -> None:
        if self.chain.is_source:
            self._run_source()
        else:
            self._run_consumer()
        if not self.stopping:
            for index in range(len(self.operators)):
                leftover = self._call(index, "finish")
                if leftover:
                    self._push(leftover, index + 1)
        else:  # stopped with a savepoint: its final state is the savepoint's, with what goes ahead of it
            self._emit_pre_stop(CheckpointId(self.last_checkpoint_id + 1))
        self.writer.flush()
        self.writer.broadcast_event(END_OF_INPUT_STOPPED if self.stopping else END_OF_INPUT)
        self.writer.close()
        if self.slot.snapshotter is not None:
            # Checkpoints go on after this subtask finished, each holding this final state (Flink's FLIP-147):
            # the snapshotter stores it, then sends SubtaskFinished with its files. Its id is the first
            # checkpoint that can include it (a sink pre-commits there what a stopped input left open).
            final = self._snapshot(CheckpointId(self.last_checkpoint_id + 1), 0.0, final=uuid.uuid4().hex[:16])
            final.as_tables = self.stopping  # the stop's savepoint holds this final state
            self.slot.snapshotter.submit(final)
            self.status = SubtaskStatus.FINISHED
            self._await_checkpoint_with_final_state()
        else:
            self.status = SubtaskStatus.FINISHED
            self.slot.send(SubtaskFinished(self.slot.attempt, self.chain.index, self.slot.slot))

    def _await_checkpoint_with_final_state(self) -> None:
        """Wait until a checkpoint that includes this subtask's final state completes, handing its notification
        (and the earlier ones) to the operators: a sink commits there what it pre-committed at the end of
        input. Every checkpoint after the last one this subtask took part in includes its final state; when
        the whole job has finished, the coordinator's final checkpoint is one."""
        notifications, wakeup, stopped = self.notifications, self.wakeup, self.slot.stopped
        while not stopped.is_set():
            while notifications:
                checkpoint_id = notifications.popleft()
                self._notify(checkpoint_id)
                if checkpoint_id > self.last_checkpoint_id:
                    return
            wakeup.wait()
            wakeup.clear()
        raise Cancelled()

    # A source iteration (poll + the chained operators) should take about this long at most: checkpoint
    # triggers and notifications are handled between iterations, so it bounds their delay.
    SOURCE_ITERATION_S = 0.02

    def _run_source(self) -> None:
        stopped = self.slot.stopped
        writer = self.writer
        timeout = self.buffer_timeout
        next_flush = time.monotonic() + timeout
        triggers, notifications = self.triggers, self.notifications
        poll_size = min(self.batch_size, 64)  # grows to batch_size within a few iterations if the chain is fast
        # Records the chain emits per record it reads, smoothed: the consumers' debloated capacity bounds what
        # one poll may emit, so a selective chain (a filter passing 1%) may read that much more per poll.
        out_per_in = 1.0
        output_follows_input = all(operator.output_follows_input for operator in self.operators)
        columnar = self.chain.is_columnar_source
        interval = self.watermark_interval
        next_watermarks = time.monotonic() + interval if interval is not None else float("inf")
        timer_operators = self.timer_operators
        slot = self.slot
        unaligned = self.unaligned
        while not stopped.is_set():
            if slot.stop_sources is not None:  # stop_with_savepoint: this source reads no more
                if slot.stop_sources.drain:  # as at the end of its input: every timer fires
                    self._advance_watermark(MAX_WATERMARK, 1)
                else:
                    self.stopping = True
                return
            if triggers:
                self._checkpoint(*triggers.popleft())
            if notifications:
                self._notify(notifications.popleft())
            if self.queries:
                self._answer_queries()
            if unaligned and not writer.available():
                self._await_output()
                continue
            started = time.monotonic()
            if started >= next_watermarks:
                self._periodic_watermarks(started)
                next_watermarks = started + interval
            if timer_operators:  # chained operators' due timers (an async operator's finished calls)
                self._fire_processing_timers(started)
            # the consumers' debloated batches: no emit that waits long (unless the chain's output is not its input)
            capacity = writer.batch_capacity() if output_follows_input else None
            if capacity is not None:
                cap = max(1, int(capacity / out_per_in))
                if poll_size > cap:
                    poll_size = cap
            batch = self._call(0, "poll", poll_size)
            if batch is None:
                # Nothing to read at all finishes too: its final state keeps later checkpoints whole.
                self._advance_watermark(MAX_WATERMARK, 1)  # the end of a bounded input: every timer fires
                return
            if batch:
                if self.counters.first_record_at is None:
                    self.counters.first_record_at = time.time()
                emitted = writer.emitted
                self._push(batch, 1)
                if capacity is not None and not columnar:
                    ratio = (writer.emitted - emitted) / len(batch)
                    out_per_in = 0.8 * out_per_in + 0.2 * min(64.0, max(1 / 64, ratio))
            now = time.monotonic()
            if not batch:
                self.counters.source_idle_s += now - started
            if batch:  # adapt the poll size to the chain's speed: slow operators get small batches
                elapsed = now - started
                if elapsed > self.SOURCE_ITERATION_S and poll_size > 1:
                    poll_size = max(1, int(poll_size * self.SOURCE_ITERATION_S / elapsed))
                elif (elapsed < self.SOURCE_ITERATION_S / 4 and poll_size < self.batch_size
                      and (sum(b.num_rows for b in batch) if columnar else len(batch)) == poll_size):
                    poll_size = min(self.batch_size, poll_size * 2)
            if now >= next_flush:
                writer.flush()
                next_flush = now + timeout
        raise Cancelled()

    def _run_consumer(self) -> None:
        gate = self.gate
        writer = self.writer
        timeout = self.buffer_timeout
        open_channels = len(gate)
        now = time.monotonic()
        next_flush = now + timeout
        interval = self.watermark_interval
        next_watermarks = now + interval if interval is not None else float("inf")
        notifications = self.notifications
        barriers = self.barriers
        watermarks = self.watermarks
        timer_operators = self.timer_operators
        second_input = self.second_input
        self._replay_channel_state()
        unaligned = self.unaligned
        queries = self.queries
        counters = self.counters
        while open_channels:
            if notifications:
                self._notify(notifications.popleft())
            if queries:
                self._answer_queries()
            wake = min(next_flush, next_watermarks)
            if timer_operators:
                wake = min(wake, self._fire_processing_timers(now))
            if unaligned:
                wake = min(wake, barriers.tend())
                if not writer.available():
                    self._await_output()
            item = gate.poll(max(0.0005, wake - time.monotonic()))
            if item is not None:
                channel, payload = item
                kind = type(payload)
                if kind is list or kind is TimestampedBatch:
                    if counters.first_record_at is None:
                        counters.first_record_at = time.time()
                    if unaligned:
                        self._push_in_slices(channel, payload)
                    elif second_input is not None and second_input[channel]:
                        self._push_second(payload)
                    else:
                        self._push(payload, 0)
                elif kind is Watermark:
                    advanced = watermarks.on_watermark(channel, payload.timestamp)
                    if advanced is not None:
                        self._advance_watermark(advanced, 0)
                    self._forward_idleness()
                elif kind is CheckpointBarrier:
                    barriers.on_barrier(channel, payload)
                elif kind is WatermarkStatus:
                    if payload.idle:
                        advanced = watermarks.on_idle(channel)
                        if advanced is not None:
                            self._advance_watermark(advanced, 0)
                    else:
                        watermarks.on_active(channel)
                    self._forward_idleness()
                elif kind is EndOfInput:
                    open_channels -= 1
                    if barriers is not None:
                        barriers.on_end_of_input(channel)
                    if payload.stopped:  # its watermark holds: a stopped input has not ended
                        self.stopping = True
                    else:
                        advanced = watermarks.on_end_of_input(channel)
                        if advanced is not None:
                            self._advance_watermark(advanced, 0)
            now = time.monotonic()
            if now >= next_watermarks:
                self._periodic_watermarks(now)
                next_watermarks = now + interval
            if now >= next_flush:
                writer.flush()
                next_flush = now + timeout
        if barriers is not None:
            barriers.finish()

    def _replay_channel_state(self) -> None:
        """Push the records that were in flight at the unaligned checkpoint restored, before any new input.
        No barrier is taken meanwhile: the records still to replay are in no gate, a snapshot would miss them."""
        replay, self.replay = self.replay, []
        if replay:
            log.info("Replaying %d batches of records in flight at the checkpoint restored into %s", len(replay),
                     self.chain.describe())
        for number, batch in replay:
            while self.unaligned and not self.writer.available():
                if self.slot.stopped.is_set():
                    raise Cancelled()
                self.writer.wait_available(0.01)
            if number == 2:
                self._push_second(batch)
            else:
                self._push(batch, 0)

    # -- unaligned checkpoints ----------------------------------------------------------------------------

    SLICE_S = 0.02  # unaligned: a barrier that overtook the input waits about this long for the batch in hand
    FIRST_SLICE = 64  # records, until the chain's cost per record is measured

    def _push_in_slices(self, channel: int, batch: list) -> None:
        """Push ``batch`` in slices that take about ``SLICE_S`` each, so that a barrier overtaking the input waits
        for one slice rather than for a whole batch of user code (4,096 records at 2 ms each: 8 s). If one comes,
        the subtask snapshots between two slices, and the rest of the batch is recorded as in flight."""
        second = self.second_input is not None and self.second_input[channel]
        gate = self.gate
        total, start = len(batch), 0
        while start < total:
            if start:
                if gate.has_priority():
                    self.barriers.on_barrier(*gate.poll_priority(), leftover=(channel, batch, start))
                    continue
                self.barriers.tend((channel, batch, start))
            cost = self.record_cost_s[second]
            size = max(1, int(self.SLICE_S / cost)) if cost else self.FIRST_SLICE
            piece = batch if start == 0 and size >= total else slice_batch(batch, start, start + size)
            started = time.monotonic()
            if second:
                self._push_second(piece)
            else:
                self._push(piece, 0)
            per_record = (time.monotonic() - started) / len(piece)
            self.record_cost_s[second] = per_record if not cost else 0.8 * cost + 0.2 * per_record
            start += len(piece)

    def _channel_state(self, recorder) -> ChannelState:
        return ChannelState(recorder, self.gate.channels, self.input_edges, self.slot.graph.max_parallelism,
                            self.chain.describe())

    def _await_output(self) -> None:
        """Wait until every output channel can take a batch, taking meanwhile what must not wait behind
        backpressure: barriers that overtook the input, checkpoint triggers (a source), the aligned timeout."""
        writer, gate, stopped = self.writer, self.gate, self.slot.stopped
        self.counters.output_waits.start()
        try:
            self._await_output_until_available(writer, gate, stopped)
        finally:
            self.counters.output_waits.stop()

    def _await_output_until_available(self, writer: RecordWriter, gate: InputGate | None, stopped) -> None:
        while not writer.available():
            if stopped.is_set():
                raise Cancelled()
            if self.notifications:
                self._notify(self.notifications.popleft())
            if self.queries:
                self._answer_queries()
            if gate is None:
                if self.triggers:
                    self._checkpoint(*self.triggers.popleft())
                    continue
            else:
                item = gate.poll_priority()
                if item is not None:
                    self.barriers.on_barrier(*item)
                    continue
                self.barriers.tend()
            writer.wait_available(0.01)

    # -- time -------------------------------------------------------------------------------------------

    def _advance_watermark(self, watermark: int, start: int) -> None:
        """Hand ``watermark`` to the operators from ``start`` on, each emitting what its timers fire before the
        next sees it, then to the output channels. An operator that makes watermarks stops all but the last."""
        operators = self.operators
        self.counters.watermark = watermark
        for i in range(start, len(operators)):
            if operators[i].generates_watermarks and watermark != MAX_WATERMARK:
                return
            fired = self._call(i, "process_watermark", watermark)
            if fired:
                self._push(fired, i + 1)
        self.writer.broadcast_event(Watermark(watermark))

    def _periodic_watermarks(self, now: float) -> None:
        for index, operator in self.generators:
            for event in self._call(index, "on_periodic_emit", now):
                if type(event) is Watermark:
                    self._advance_watermark(event.timestamp, index + 1)
                else:
                    self.writer.broadcast_event(event)

    def _forward_idleness(self) -> None:
        """Every input channel idle: this subtask is idle for its consumers too, until one speaks again."""
        idle = self.watermarks.idle
        if idle != self.sent_idle and not self.generators:
            self.sent_idle = idle
            self.writer.broadcast_event(WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE)

    def _fire_processing_timers(self, now: float) -> float:
        """Fire the processing-time timers that are due; returns when (monotonic) the next one is."""
        wake = float("inf")
        now_ms = None
        for index, operator in self.timer_operators:
            due = operator.next_processing_time()
            if due is None:
                continue
            if now_ms is None:
                now_ms = processing_time_ms()
            if due <= now_ms:
                fired = self._call(index, "on_processing_time", now_ms)
                if fired:
                    self._push(fired, index + 1)
                due = operator.next_processing_time()
                if due is None:
                    continue
            wake = min(wake, now + (due - now_ms) / 1000.0)
        return wake

    def _checkpoint(self, checkpoint_id: CheckpointId, alignment_ms: float, savepoint: str | None = None,
                    triggered_at_ms: int = 0) -> None:
        """A source's checkpoint, triggered by the coordinator."""
        start_delay_ms = time.time() * 1000.0 - triggered_at_ms if triggered_at_ms else 0.0
        self.snapshot_aligned(checkpoint_id, alignment_ms, savepoint, triggered_at_ms, start_delay_ms)

    # -- what the barrier handler asks (runtime.executor.barrier_handler.CheckpointActions) -------------------

    def snapshot_aligned(self, checkpoint_id: CheckpointId, alignment_ms: float, savepoint: str | None,
                         triggered_at_ms: int, start_delay_ms: float) -> None:
        """The synchronous part: flush, freeze every operator's state, forward the barrier. ``savepoint``: the
        directory of the savepoint this checkpoint is. ``start_delay_ms``: from the trigger to the first
        barrier here."""
        self.last_checkpoint_id = checkpoint_id
        unaligned = self.unaligned and not self.aligned_timeout_ms and savepoint is None  # a source's, then
        self._emit_pre_barrier(checkpoint_id)
        self.writer.flush()
        with gc_paused():
            snapshot = self._snapshot(checkpoint_id, alignment_ms, full=savepoint is not None)
            snapshot.savepoint = savepoint
            snapshot.as_tables = savepoint is not None
            snapshot.start_delay_ms = max(0.0, start_delay_ms)
            snapshot.unaligned = unaligned
            self.writer.broadcast_event(CheckpointBarrier(checkpoint_id, savepoint, triggered_at_ms, unaligned))
        self.submit_snapshot(snapshot)

    def snapshot_unaligned(self, checkpoint_id: CheckpointId, triggered_at_ms: int,
                           start_delay_ms: float) -> SubtaskSnapshot:
        """The synchronous part ahead of the records in flight: the barrier overtakes the output, which never
        waits (overdraft), and the consumers record what it overtook."""
        self.last_checkpoint_id = checkpoint_id
        self._emit_pre_barrier(checkpoint_id)
        self.writer.flush()
        with gc_paused():
            snapshot = self._snapshot(checkpoint_id, 0.0)
            snapshot.unaligned = True
            snapshot.start_delay_ms = start_delay_ms
            self.writer.broadcast_event(CheckpointBarrier(checkpoint_id, None, triggered_at_ms, unaligned=True))
        return snapshot

    def submit_snapshot(self, snapshot: SubtaskSnapshot) -> None:
        self.slot.snapshotter.submit(snapshot)

    def _emit_pre_barrier(self, checkpoint_id: CheckpointId) -> None:
        """What each operator emits ahead of the barrier, through the rest of the chain."""
        for index in range(len(self.operators)):
            records = self._call(index, "prepare_snapshot_pre_barrier", checkpoint_id)
            if records:
                self._push(records, index + 1)

    def _emit_pre_stop(self, checkpoint_id: CheckpointId) -> None:
        """What each operator emits when its input stopped (stop_with_savepoint), through the rest of the chain."""
        for index in range(len(self.operators)):
            records = self._call(index, "prepare_stop", checkpoint_id)
            if records:
                self._push(records, index + 1)

    def _snapshot(self, checkpoint_id: CheckpointId, alignment_ms: float, final: str | None = None,
                  full: bool = False) -> SubtaskSnapshot:
        """Every operator's state frozen now (keyed snapshots are copy-on-write: records may flow on). ``full``
        (and for final states): keyed state written whole, as savepoints hold it, never incrementally."""
        full = full or final is not None
        started = time.monotonic()
        snapshots = []
        for index, (node, backend) in enumerate(zip(self.chain.operators, self.backends)):
            keyed = backend.snapshot(full) if backend is not None else None
            state = self._call(index, "snapshot_operator_state", checkpoint_id)
            position = node.operator.describe_position() if node.is_source else None
            declared = backend.declared_states() if keyed is not None and full else {}
            snapshots.append(OperatorSnapshot(node.uid, keyed, state, position, descriptors=declared))
        sync_ms = (time.monotonic() - started) * 1000.0
        return SubtaskSnapshot(checkpoint_id, self.chain.index, self.slot.slot, snapshots, sync_ms, alignment_ms,
                               started, self.chain.describe(), final)

    def runs(self, uid: str) -> bool:
        """Whether operator ``uid`` is in this subtask's chain."""
        return uid in self.uids

    def _answer_queries(self) -> None:
        while self.queries:
            query, read_at = self.queries.popleft()
            started = time.monotonic()
            answer = self._answer(query)
            self.slot.send(dataclasses.replace(answer, waited_ms=(started - read_at) * 1000.0,
                                               read_ms=(time.monotonic() - started) * 1000.0))

    def _answer(self, query: QueryState) -> StateAnswer:
        """The answer to a lookup of queryable state, read between two batches: what the operator would read."""
        attempt = self.slot.attempt
        backend = self.backends[self.uids[query.uid]]
        declared = self.slot.queryables.find(query.name)
        if backend is None:
            return StateAnswer(attempt, query.request, error=f"operator '{query.uid}' has no keyed state in "
                                                               f"subtask {self.slot.slot}")
        if declared is None:  # another subtask's function declared it: this one's takes it at its first record
            return StateAnswer(attempt, query.request, not_yet=True,
                               error=f"the function of operator '{query.uid}' in subtask {self.slot.slot} has not "
                                     f"taken state '{query.name}' yet (it does when it first needs it); ask again")
        try:
            return StateAnswer(attempt, query.request, value_json=read_as_json(backend, declared[1], query.key))
        except Exception as exc:  # the lookup fails, never the job
            return StateAnswer(attempt, query.request, error=f"reading state '{query.name}' for key {query.key!r} "
                                                               f"failed: {type(exc).__name__}: {exc}")

    def _notify(self, checkpoint_id: CheckpointId) -> None:
        for backend in self.backends:
            if backend is not None:
                backend.notify_checkpoint_complete(checkpoint_id)
        for index in range(len(self.operators)):
            self._call(index, "notify_checkpoint_complete", checkpoint_id)
