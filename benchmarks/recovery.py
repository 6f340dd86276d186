"""Recovery: from a worker killed with SIGKILL to the job processing at full rate again.

The reference job runs with 1 s checkpoints; after a completed checkpoint and ``kill_after`` records one
worker kills itself (writing the time first). The sink records when each batch arrives; the recovery time
is from the kill to the first 0.5 s window after it whose rate reaches 90% of ``full_rate``. ``parts_ms`` says where
the time to the first record went, from the driver's and the restarted slots' marks
(:mod:`runtime.driver.recovery_timeline`): the failure noticed, the grace for further reports, the old stage ended,
its slots disconnected, the restart decided, and the new attempt's start-up.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time

from operators import MapFunction, Sink, SinkWriter
from runtime import RestartStrategies, StreamExecutionEnvironment, Types
from runtime.tools.demo import CountPerKey

WINDOW_S = 0.5


class KillOnce(MapFunction):
    def __init__(self, marker: str, after: int):
        self.marker, self.after = marker, after

    def open(self, runtime_context):
        self.seen = 0
        self.checkpointed = False
        self.killed = False  # by this subtask or another: then the marker exists, and is not looked for again

    def notify_checkpoint_complete(self, checkpoint_id):
        self.checkpointed = True

    def map(self, value):
        self.seen += 1
        if self.seen >= self.after and self.checkpointed and not self.killed:
            # Looked for once, not for every record: a file-system call per record halved the job's rate.
            try:  # created by one subtask only: two kills at once would be two failures
                marker = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                self.killed = True
                return value
            os.write(marker, repr(time.time()).encode())
            os.close(marker)
            os.kill(os.getpid(), signal.SIGKILL)
        return value


class _ArrivalWriter(SinkWriter):
    def __init__(self):
        self.arrivals: list[tuple[float, int]] = []

    def write_batch(self, records: list) -> None:
        self.arrivals.append((time.time(), len(records)))

    def result(self):
        return self.arrivals


class ArrivalSink(Sink):
    name = "arrivals"

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _ArrivalWriter()

    def merge_results(self, results: list) -> list:
        return sorted(a for part in results for a in part)


def run_recovery(spark, records: int, keys: int, parallelism: int, full_rate: float | None = None,
                 state_backend=None, value_bytes: int = 0, kill_after_share: float = 1 / 3,
                 interval_ms: int = 1000) -> dict:
    """``value_bytes``: 0 for the reference job (a count per key), else a payload of that size per key (state of
    ``keys`` x ``value_bytes``), the kill coming after ``kill_after_share`` of the records, once the state is
    full. ``full_rate``: None to take the job's own steady rate once recovered (:func:`_steady_rate`)."""
    env = StreamExecutionEnvironment.get_execution_environment(spark).set_parallelism(parallelism)
    env.enable_checkpointing(interval_ms)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    if state_backend is not None:
        env.set_state_backend(state_backend)
    with tempfile.TemporaryDirectory(prefix="chandy-recovery-") as directory:
        env.get_checkpoint_config().set_checkpoint_storage(os.path.join(directory, "ck"))
        marker = os.path.join(directory, "killed-at")
        from benchmarks.checkpoint_dip import KeepPayload

        (env.from_sequence(0, records - 1)
            .map(lambda x: x % keys, output_type=Types.LONG())
            .key_by(lambda x: x).process(KeepPayload(value_bytes) if value_bytes else CountPerKey())
            .map(KillOnce(marker, int(records / parallelism * kill_after_share)))
            .sink_to(ArrivalSink()))
        client = env.execute_async("benchmark-recovery")
        result = client.get_job_execution_result()
        killed_at = float(open(marker).read())
    (arrivals,) = result.sink_results.values()  # the sink's state is not checkpointed: the last attempt's only
    after = [(t, n) for t, n in arrivals if t > killed_at]
    # the restarted slots' marks came with their final metrics reports, read before the job ended
    parts = client._run.recovery_phases(killed_at, after[0][0] if after else None)
    if full_rate is None:
        full_rate = _steady_rate(after)
    first = after[0][0] if after else None
    recovered = None
    for i, (start, _) in enumerate(after):
        window = sum(n for t, n in after[i:] if t < start + WINDOW_S)
        if window / WINDOW_S >= 0.9 * full_rate:
            recovered = start
            break
    windows = []
    if after:
        t0 = after[0][0]
        for t, n in after:
            index = int((t - t0) / WINDOW_S)
            while len(windows) <= index:
                windows.append(0)
            windows[index] += n
    return {
        "state_backend": repr(state_backend or env.get_state_backend()),
        "state_bytes": keys * value_bytes if value_bytes else None,
        "checkpoint_bytes": max((s.bytes for s in result.checkpoints), default=None),
        "rates_after_restart": [round(w / WINDOW_S) for w in windows],
        "restarts": result.restarts,
        "first_record_after_kill_s": round(first - killed_at, 2) if first else None,
        "full_rate_after_kill_s": round(recovered - killed_at, 2) if recovered else None,
        "full_rate": round(full_rate),
        "parts_ms": {name: None if ms is None else round(ms) for name, ms in (parts or {}).items()},
    }


def _steady_rate(arrivals: list) -> float:
    """The median rate (records/s) of the 0.5 s windows of the second half of ``arrivals`` (the job's rate once
    recovered: the sink keeps only the last attempt's arrivals, so the rate before the kill is not known)."""
    if not arrivals:
        return 0.0
    t0 = arrivals[0][0]
    counts: dict[int, int] = {}
    for t, n in arrivals:
        counts[int((t - t0) / WINDOW_S)] = counts.get(int((t - t0) / WINDOW_S), 0) + n
    windows = [counts.get(i, 0) / WINDOW_S for i in range(max(counts))]  # the last window is partial
    second_half = windows[len(windows) // 2:]
    return statistics.median(second_half) if second_half else 0.0
