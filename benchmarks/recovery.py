"""Recovery: from a worker killed with SIGKILL to the job processing at full rate again.

The reference job runs with 1 s checkpoints; after a completed checkpoint and ``kill_after`` records one
worker kills itself (writing the time first). The sink records when each batch arrives; the recovery time
is from the kill to the first 0.5 s window after it whose rate reaches 90% of ``full_rate``.
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
            self.killed = os.path.exists(self.marker)
            if self.killed:
                return value
            with open(self.marker, "w") as f:
                f.write(repr(time.time()))
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
    full. ``full_rate``: None to take the job's own rate before the kill, once its state was full."""
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
        result = env.execute("benchmark-recovery")
        killed_at = float(open(marker).read())
    (arrivals,) = result.sink_results.values()  # the sink's state is not checkpointed: the last attempt's only
    if full_rate is None:
        full_rate = _rate_before(arrivals, killed_at, keys)
    after = [(t, n) for t, n in arrivals if t > killed_at]
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
    }


def _rate_before(arrivals: list, killed_at: float, keys: int) -> float:
    """The median rate (records/s) of the 0.5 s windows before ``killed_at``, from when ``keys`` records (the
    state full) had arrived."""
    seen, start = 0, None
    for t, n in arrivals:
        seen += n
        if seen >= keys:
            start = t
            break
    if start is None:
        return 0.0
    counts: dict[int, int] = {}
    for t, n in arrivals:
        if start <= t < killed_at:
            counts[int((t - start) / WINDOW_S)] = counts.get(int((t - start) / WINDOW_S), 0) + n
    full = sorted(counts.items())[:-1]  # the last window is cut short by the kill
    return statistics.median(n / WINDOW_S for _, n in full) if full else 0.0
