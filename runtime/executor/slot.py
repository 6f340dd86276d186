"""What runs inside one Spark barrier task: a slot hosting subtask ``i`` of every chain of the job.

Per slot: one thread per hosted chain subtask (its operators run back to back on it), one data server
whose reader threads feed the input gates, and one thread listening to the coordinator. Records between
chains of the same slot are handed over as Python lists; to other slots they go over Arrow IPC streams.

Life of a slot: bind the data server, register with the driver's coordinator, receive every slot's
address (rendezvous through the coordinator, not Spark's ``barrier()``: see DESIGN §5), connect output
channels, run until every chain finished its input (or the coordinator cancels, or something raises),
then report. A failure is reported with its traceback and the failing operator's name before the barrier
task raises, so the driver can show the user's own error rather than Spark's.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
import traceback
from typing import Any

import cloudpickle

from operators.context import SubtaskInfo
from runtime.errors import AuthenticationError, ProtocolError, is_retryable
from runtime.executor.channel_state import read_channel_state
from runtime.executor.gil_switch import switch_interval
from runtime.executor.metrics import metrics_report
from runtime.executor.queryable_state import SlotQueryableStates
from runtime.executor.restore import restore_operator
from runtime.executor.snapshotter import Snapshotter
from runtime.executor.subtask import OperatorError, SubtaskRunner, SubtaskStatus
from runtime.gc_pause import long_lived_frozen, young_collections_between_batches
from runtime.graph.job_graph import JobGraph
from runtime.ids import Attempt, ChainIndex, CheckpointId, SlotIndex, SubtaskIndex
from runtime.keys.key_groups import key_group_range
from runtime.network.channels import Cancelled, DataServer, InputGate, LocalChannel, RemoteChannel
from runtime.network.codec import codec_for
from runtime.network.record_writer import ColumnarEdgeWriter, EdgeWriter, RecordWriter
from runtime.network.security import ConnectionSecurity
from runtime.protocol import startup as marks
from runtime.protocol.checkpoints import RestoreSpec
from runtime.protocol.messages import (
    Addresses,
    Cancel,
    FailurePhase,
    Heartbeat,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    QueryState,
    Register,
    SlotFailed,
    SlotFinished,
    StateAnswer,
    StopSources,
    TriggerCheckpoint,
)
from runtime.protocol.wire import ConnectionClosed, MessageSocket
from state_backends.base import KeyedStateBackend

__all__ = ["SlotRunner", "report_before_registering"]

log = logging.getLogger(__name__)

REGISTRATION_TIMEOUT_S = 300.0
JOIN_TIMEOUT_S = 10.0


class SlotRunner:
    """Everything one barrier task runs; see the module docstring."""

    def __init__(self, graph: JobGraph, coordinator: tuple[str, int], attempt: Attempt, slot: SlotIndex, host: str,
                 security: ConnectionSecurity, restore: dict[str, dict[SubtaskIndex, RestoreSpec]] | None = None,
                 restore_storage=None, stop_sources: StopSources | None = None,
                 startup: dict[str, float] | None = None):
        self.graph = graph
        # Start-up marks (runtime.protocol.startup), the barrier task's first ones given: sent in metrics reports.
        self.startup: dict[str, float] = dict(startup or {})
        self.security = security  # what every connection of this attempt proves (and checks) first
        # Set once the job stops with a savepoint (stop_with_savepoint): source subtasks read no more. Given at
        # the start of an attempt that follows such a request, so that they read nothing at all.
        self.stop_sources = stop_sources
        self.restore = restore or {}
        self.restore_storage = restore_storage
        self.snapshotter: Snapshotter | None = None
        self.coordinator = coordinator
        self.attempt = attempt
        self.slot = slot
        self.host = host
        self.stopped = threading.Event()
        self.queryables = SlotQueryableStates(attempt, slot, self.send)
        self._done = threading.Condition()
        self._failure: BaseException | None = None  # the first; an OperatorError names its operator
        self._remote_channels: list[RemoteChannel] = []
        self.runners: list[SubtaskRunner] = []
        self.backends: list[KeyedStateBackend] = []
        self.gates: dict[ChainIndex, InputGate] = {}
        self.control: MessageSocket | None = None
        self.server: DataServer | None = None
        self._finished = 0
        self._reporter: threading.Thread | None = None  # sends the metrics every interval

    # -- building -------------------------------------------------------------------------------------

    def _build_runners(self) -> None:
        graph = self.graph
        restored_id = max((spec.checkpoint_id for specs in self.restore.values() for spec in specs.values()),
                          default=0)
        for chain in graph.chains:
            if chain.parallelism <= self.slot:
                continue
            gate = None
            if not chain.is_source:
                channels = [(edge.id, p) for edge in chain.inputs for p in edge.producers_of(self.slot)]
                columnar = any(edge.schema is not None for edge in chain.inputs)  # Arrow batches: not sized here
                debloat = graph.debloat_target_ms / 1000.0 if graph.debloat_target_ms and not columnar else None
                gate = self.gates[chain.index] = InputGate(channels, debloat_target_s=debloat,
                                                           max_batch=graph.batch_size)
            for node in chain.operators:
                keyed = getattr(node.operator, "keyed", False)
                info = SubtaskInfo(node.name, self.slot, chain.parallelism, graph.max_parallelism, self.attempt,
                                   graph.job_parameters, restored_checkpoint_id=restored_id,
                                   declare_queryable=self.queryables.declarer(node.uid) if keyed else None)
                backend = None
                if keyed:
                    backend = graph.state_backend.create_keyed_state_backend(
                        node.uid, graph.max_parallelism,
                        key_group_range(graph.max_parallelism, chain.parallelism, self.slot))
                    self.backends.append(backend)
                node.operator.setup(info, backend)
                spec = self.restore.get(node.uid, {}).get(self.slot)
                if spec is not None:
                    own = graph.checkpointing.storage if graph.checkpointing is not None else None
                    restore_operator(self.restore_storage, spec, node.operator, backend, self.slot,
                                     chain.parallelism, own.job_dir if own is not None else None)
            runner = SubtaskRunner(self, chain, gate)
            runner.last_checkpoint_id = CheckpointId(restored_id)  # this run's checkpoints come after it
            spec = self.restore.get(chain.operators[0].uid, {}).get(self.slot)
            if spec is not None and spec.channel:  # records in flight at an unaligned checkpoint: replayed first
                runner.replay = read_channel_state(self.restore_storage, spec, self.slot, chain.parallelism)
            self.runners.append(runner)

    def _route(self, edge_id: int, producer: int, consumer: int, peer: str):
        """The gate, channel index and codec of a data connection's header; ProtocolError naming the peer when the
        header names a channel this slot does not have."""
        edges = self.graph.edges
        if not 0 <= edge_id < len(edges):
            raise ProtocolError(f"the data connection from {peer} names edge {edge_id}, but the job has edges "
                                f"0..{len(edges) - 1}")
        edge = edges[edge_id]
        if consumer != self.slot:
            raise ProtocolError(f"the data connection from {peer} is for subtask {consumer}, but arrived at slot "
                                f"{self.slot}")
        gate = self.gates.get(edge.target_chain)
        index = gate.index_of.get((edge_id, producer)) if gate is not None else None
        if index is None:
            raise ProtocolError(f"the data connection from {peer} names producer subtask {producer} of edge {edge_id}, "
                                f"which sends nothing to subtask {self.slot}")
        producer_name = self.graph.chains[edge.source_chain].operators[-1].name
        return gate, index, codec_for(edge.type_info, edge.schema, producer_name)

    def _connect_outputs(self, addresses: tuple[tuple[str, int], ...]) -> None:
        graph = self.graph
        unaligned = graph.checkpointing is not None and graph.checkpointing.unaligned
        for runner in self.runners:
            edge_writers = []
            tail = runner.chain.operators[-1].name
            for edge in runner.chain.outputs:
                codec = codec_for(edge.type_info, edge.schema, tail)
                channels: dict[int, Any] = {}
                for target in edge.targets_of(self.slot):
                    if target == self.slot:
                        gate = self.gates[edge.target_chain]
                        channels[target] = LocalChannel(gate, gate.index_of[(edge.id, self.slot)])
                    else:
                        channel = RemoteChannel(addresses[target], self.security, self.attempt, edge.id, self.slot,
                                                target, codec)
                        self._remote_channels.append(channel)
                        channels[target] = channel
                    channels[target].overdraft = unaligned
                if edge.schema is not None:
                    edge_writers.append(ColumnarEdgeWriter(edge, self.slot, channels, graph.columnar_batch_size,
                                                           graph.max_parallelism))
                else:
                    edge_writers.append(EdgeWriter(edge, self.slot, channels, graph.batch_size,
                                                   graph.max_parallelism,
                                                   graph.chains[edge.target_chain].operators[0]))
            tail = runner.chain.operators[-1].operator
            runner.writer = RecordWriter(edge_writers, getattr(tail, "emits_side_outputs", False))

    # -- control --------------------------------------------------------------------------------------

    def _register(self) -> tuple[tuple[str, int], ...]:
        stream = self.security.connect(self.coordinator, "control", timeout_s=30)
        stream.settimeout(REGISTRATION_TIMEOUT_S)
        self.control = MessageSocket(stream, "the driver")
        self.control.send(Register(self.attempt, self.slot, self.server.address[0], self.server.address[1],
                                   os.getpid()))
        self._mark(marks.REGISTERED)
        # Beat from now on: waiting for slots that restore large state is no hang.
        threading.Thread(target=self._beat, name="chandy-heartbeat", daemon=True).start()
        while True:
            message = self.control.receive()
            if message.attempt != self.attempt:
                continue
            if isinstance(message, Addresses):
                self._mark(marks.ADDRESSES)
                stream.settimeout(None)
                return message.addresses
            if isinstance(message, Cancel):
                raise Cancelled()

    def _listen_control(self) -> None:
        try:
            while not self.stopped.is_set():
                message = self.control.receive()
                if message.attempt != self.attempt:
                    continue
                if isinstance(message, Cancel):
                    self.cancel()
                    return
                if isinstance(message, TriggerCheckpoint):
                    for runner in self.runners:
                        if not runner.chain.is_source:
                            continue
                        if runner.status is SubtaskStatus.FINISHED:
                            continue  # its final state (SubtaskFinished) stands in for it in every checkpoint
                        else:
                            runner.triggers.append((message.checkpoint_id, 0.0, message.savepoint,
                                                    message.triggered_at_ms))
                            runner.wakeup.set()
                elif isinstance(message, StopSources):
                    self.stop_sources = message
                elif isinstance(message, NotifyCheckpointAborted):
                    if self.snapshotter is not None:
                        self.snapshotter.abort(message.checkpoint_id)
                    for runner in self.runners:  # an unaligned snapshot may still be recording records in flight
                        if runner.unaligned and runner.barriers is not None and runner.status is SubtaskStatus.RUNNING:
                            runner.barriers.abort_later(message.checkpoint_id)
                elif isinstance(message, QueryState):
                    self._route_query(message)
                elif isinstance(message, NotifyCheckpointComplete):
                    for runner in self.runners:  # finished ones too: they wait for a checkpoint with their end
                        runner.notifications.append(message.checkpoint_id)
                        runner.wakeup.set()
        except (ConnectionClosed, OSError):
            if not self.stopped.is_set():
                self.cancel()  # the driver is gone: nobody will ever read our results

    def send(self, message) -> None:
        self.control.send(message)

    def _route_query(self, query: QueryState) -> None:
        """Hand a lookup of queryable state to the subtask that runs its operator; it answers between batches."""
        for runner in self.runners:
            if runner.runs(query.uid):
                if runner.status is SubtaskStatus.RUNNING:
                    runner.queries.append((query, time.monotonic()))
                    runner.wakeup.set()
                    if runner.gate is not None:
                        runner.gate.wake()
                    return
                error = (f"subtask {self.slot} of the operator with state '{query.name}' has finished; its state is "
                         "in the job's final checkpoint (read it with SavepointReader)")
                break
        else:
            error = f"slot {self.slot} runs no operator '{query.uid}'"
        self.send(StateAnswer(self.attempt, query.request, error=error))

    def _beat(self) -> None:
        """Tell the driver this process runs, every heartbeat interval, until the slot stops."""
        interval = self.graph.heartbeat_interval_ms / 1000.0
        while not self.stopped.wait(interval):
            try:
                self.control.send(Heartbeat(self.attempt, self.slot))
            except OSError:  # the control connection is gone: its listener cancels the slot
                return

    def _mark(self, name: str) -> None:
        self.startup[name] = time.time()
        log.debug("slot %d of attempt %d: %s", self.slot, self.attempt, name)

    def startup_marks(self) -> tuple[tuple[str, float], ...]:
        """The slot's start-up marks so far, with its subtasks' first records (a source's, a sink's)."""
        firsts: dict[str, float] = {}
        for runner in self.runners:
            at = runner.counters.first_record_at
            if at is None:
                continue
            for mark, holds in ((marks.FIRST_SOURCE_RECORD, runner.chain.is_source),
                                (marks.FIRST_SINK_RECORD, any(node.is_sink for node in runner.chain.operators))):
                if holds and at < firsts.get(mark, float("inf")):
                    firsts[mark] = at
        return tuple(self.startup.items()) + tuple(firsts.items())

    def _send_final_metrics(self) -> None:
        """The final counts (what the job processed, exactly), after any periodic report: none overtakes it."""
        if self._reporter is None:
            return
        self._reporter.join(JOIN_TIMEOUT_S)
        try:
            report = metrics_report(self.attempt, self.slot, self.runners, self.startup_marks())
        except Exception:  # the slot finished its work: a bug in a report must not fail it now
            log.exception("the final metrics of slot %d could not be gathered", self.slot)
            return
        self.control.send(report)

    def _report_metrics(self) -> None:
        """Send the subtasks' counters every metrics interval until the slot stops."""
        interval = self.graph.metrics_interval_ms / 1000.0
        while not self.stopped.wait(interval):
            try:
                report = metrics_report(self.attempt, self.slot, self.runners, self.startup_marks())
            except Exception:  # a bug in a report must not fail the job: no metrics, said once
                log.exception("metrics of slot %d could not be gathered; no more reports from it", self.slot)
                return
            try:
                self.control.send(report)
            except OSError:  # the control connection is gone: its listener cancels the slot
                return

    # -- running --------------------------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """Fail the slot; ``exc`` is an :class:`OperatorError` when an operator raised."""
        first = False
        with self._done:
            if self._failure is None and not isinstance(exc, Cancelled) and not self.stopped.is_set():
                self._failure = exc
                first = True
            self._done.notify_all()
        if first:
            # Report before tearing channels down: peers then see a broken stream, and the driver must
            # hear about the cause before it hears about their consequential errors.
            self._report_failure(exc)
        self.cancel()

    def cancel(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        for gate in self.gates.values():
            gate.close()
        if self.server is not None:
            self.server.close()
        for channel in self._remote_channels:
            channel.abort()
        with self._done:
            self._done.notify_all()
        for runner in self.runners:
            runner.wakeup.set()

    def _run_runner(self, runner: SubtaskRunner) -> None:
        try:
            runner.run()
        except OperatorError as exc:
            self.fail(exc)
        except Cancelled:
            self.cancel()
        except BaseException as exc:  # the runtime's own failure (a broken channel ...): no operator to blame
            if not self.stopped.is_set():
                self.fail(exc)
        finally:
            with self._done:
                self._finished += 1
                self._done.notify_all()

    def _failure_report(self, failure: BaseException, phase: FailurePhase = FailurePhase.RUNTIME,
                        context: str = "") -> SlotFailed:
        """The message that tells the driver about ``failure`` (an :class:`OperatorError` names its operator)."""
        name = uid = record = None
        exc = failure
        if isinstance(failure, OperatorError):
            exc, name, uid, phase = failure.cause, failure.operator_name, failure.operator_uid, failure.phase
            record = failure.record
        try:
            blob = cloudpickle.dumps(exc)
            pickle.loads(blob)
        except Exception:  # exceptions that do not survive pickling travel as text only
            blob = None
        return SlotFailed(self.attempt, self.slot, name, uid, SubtaskIndex(self.slot), type(exc).__name__,
                          f"{context}{exc}", "".join(traceback.format_exception(exc)), blob, is_retryable(exc), phase,
                          record)

    def _report_failure(self, failure: BaseException) -> None:
        message = self._failure_report(failure)
        try:
            self.control.send(message)
        except (OSError, AttributeError):
            log.error("Could not report failure to the driver:\n%s", message.traceback)

    def run(self) -> dict[str, Any] | None:
        """Run the slot to the end; returns each hosted sink's result by operator uid, or None when the driver
        cancelled the attempt (a cancel is no error: Spark's task ends quietly, and the driver, which asked for it,
        reads no result)."""
        with switch_interval(self.graph.switch_interval_ms), long_lived_frozen() as heap, \
                young_collections_between_batches() as self.young_thresholds:
            return self._run(heap)

    def _run(self, heap) -> dict[str, Any] | None:
        try:
            self._build_runners()  # restores state: before the data server takes connections for the gates
        except BaseException as exc:  # nobody is connected yet: report on a connection of its own
            report_before_registering(self.coordinator, self.security, self._failure_report(
                exc, FailurePhase.LOAD, "setting up the slot (restoring its state) failed: "))
            raise
        heap.freeze()  # the worker's modules, the operators and the state they restored: no full collection walks them
        self.server = DataServer(self.host, self.attempt, self.security, self.slot, self._route, self.fail)
        self.server.start()
        self._mark(marks.BUILT)
        threads: list[threading.Thread] = []
        listener = None
        try:
            addresses = self._register()
            self._connect_outputs(addresses)
            self._mark(marks.CONNECTED)
            if self.graph.checkpointing is not None:
                self.snapshotter = Snapshotter(self.graph.checkpointing.storage, self.attempt, self.send, self.fail)
            listener = threading.Thread(target=self._listen_control, name="chandy-control", daemon=True)
            listener.start()
            for runner in self.runners:
                thread = threading.Thread(target=self._run_runner, args=(runner,), daemon=True,
                                          name=f"chandy-{runner.chain.index}.{self.slot}")
                threads.append(thread)
                thread.start()
            if self.graph.metrics_interval_ms > 0:
                self._reporter = threading.Thread(target=self._report_metrics, name="chandy-metrics", daemon=True)
                self._reporter.start()
            with self._done:
                while self._finished < len(threads) and self._failure is None and not self.stopped.is_set():
                    self._done.wait()
        except Cancelled:
            self.cancel()
        except BaseException as exc:
            self.fail(exc)
        if self._failure is not None or self.stopped.is_set():
            self.cancel()
            self._teardown(threads, listener, stop_snapshots=True)
            if self._failure is not None:  # Spark's view of it, short: the driver has the user's traceback
                raise RuntimeError(f"Chandy slot {self.slot} failed: {self._failure} (the driver reports the "
                                   "traceback)") from None
            return None
        results = {node.uid: node.operator.result() for r in self.runners for node in r.chain.operators
                   if node.is_sink}
        if self.snapshotter is not None:
            self.snapshotter.close(JOIN_TIMEOUT_S)  # let acks of checkpoints taken before the end go out
        self.stopped.set()
        self._send_final_metrics()
        self.control.send(SlotFinished(self.attempt, self.slot))
        self._teardown(threads, listener)
        return results

    def _teardown(self, threads: list[threading.Thread], listener: threading.Thread | None,
                  stop_snapshots: bool = False) -> None:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if stop_snapshots and self.snapshotter is not None:  # after the subtasks: none submits any more
            self.snapshotter.stop(max(0.0, deadline - time.monotonic()))
        if self.server is not None:
            self.server.close()
            self.server.join(max(0.0, deadline - time.monotonic()))
        if self.control is not None:
            self.control.close()
        if listener is not None:
            listener.join(max(0.0, deadline - time.monotonic()))
        for backend in self.backends:
            try:
                backend.close()
            except Exception:  # what it held is the process's; the slot's outcome is decided already
                log.exception("closing a keyed state backend failed")


def report_before_registering(coordinator: tuple[str, int], security: ConnectionSecurity, message: SlotFailed) -> None:
    """Tell the driver about a failure before the slot has a control connection."""
    try:
        connection = MessageSocket(security.connect(coordinator, "control", timeout_s=30), "the driver")
    except (OSError, AuthenticationError) as exc:
        log.error("Could not report to the driver (%s): %s", exc, message.error_message)
        return
    try:
        connection.send(message)
    except OSError as exc:
        log.error("Could not report to the driver (%s): %s", exc, message.error_message)
    finally:
        connection.close()
