"""A live status line in the terminal while a job runs: records per second in and out, the last checkpoint,
restarts and watermark lag, rewritten in place once a second.

Shown only when stdout is a terminal, and not when ``spark.chandy.progress=false``; log lines that Chandy
prints meanwhile clear it first (:func:`runtime.driver.terminal.show_chandy_logs`), so the two never mix.

>>> class Job:
...     job_name, restarts, started_ms = "clicks", 1, 0
...     status = type("S", (), {"name": "RUNNING"})()
>>> print(status_line(Job(), (812_000.0, 810_500.0), {"id": 12, "end_to_end_duration": 412.0,
...                                                   "state_size": 1_300_000}, lag_ms=1_250, now_ms=83_000))
clicks RUNNING 0:01:23 | in 812k/s out 810k/s | checkpoint 12: 412 ms, 1.2 MiB | restarts 1 | watermark lag 1.2 s
"""

from __future__ import annotations

import shutil
import sys
import threading
import time

from runtime.settings.units import human_bytes, human_count

__all__ = ["ProgressLine", "status_line", "active_line"]

_CLEAR = "\r\x1b[K"

_active_lock = threading.Lock()
_active: list["ProgressLine"] = []


def active_line() -> "ProgressLine | None":
    with _active_lock:
        return _active[-1] if _active else None


def status_line(master, throughput: tuple[float, float], checkpoint: dict | None, lag_ms: float | None,
                now_ms: float) -> str:
    start = master.started_ms if master.started_ms is not None else now_ms
    seconds = int(max(0, now_ms - start) / 1000)
    elapsed = f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    read, written = throughput
    parts = [f"{master.job_name} {master.status.name} {elapsed}",
             f"in {human_count(read)}/s out {human_count(written)}/s"]
    if checkpoint is not None:
        parts.append(f"checkpoint {checkpoint['id']}: {checkpoint['end_to_end_duration']:.0f} ms, "
                     f"{human_bytes(checkpoint['state_size'])}")
    parts.append(f"restarts {master.restarts}")
    if lag_ms is not None:
        parts.append(f"watermark lag {lag_ms / 1000:.1f} s")
    return " | ".join(parts)


class ProgressLine:
    """Rewrites the status line of ``master`` every ``interval`` seconds on ``stream`` until :meth:`close`."""

    def __init__(self, master, stream=None, interval: float = 1.0):
        self.master = master
        self.stream = stream or sys.stdout
        self.interval = interval
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._shown = False
        self._thread = threading.Thread(target=self._run, name="chandy-progress", daemon=True)

    def start(self) -> None:
        with _active_lock:
            _active.append(self)
        self._thread.start()

    def _line(self) -> str:
        master = self.master
        checkpoint = None
        if master.coordinator is not None:
            checkpoint = master.coordinator.history.latest_completed()
        operators = master.metrics.operators()
        marks = [op.watermark for op in operators if op.watermark is not None]
        now_ms = time.time() * 1000
        lag = max(0.0, now_ms - min(marks)) if marks else None
        return status_line(master, master.metrics.throughput(), checkpoint, lag, now_ms)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.draw(self._line())
            except Exception:  # a status line is never worth an error: it just stops
                return

    def draw(self, line: str) -> None:
        width = shutil.get_terminal_size((200, 20)).columns - 1  # a longer line would wrap: no redraw in place
        with self._write_lock:
            self.stream.write(_CLEAR + line[:width])
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        """Before a log line: the terminal's line is free again (redrawn at the next tick)."""
        with self._write_lock:
            if self._shown:
                self.stream.write(_CLEAR)
                self.stream.flush()
                self._shown = False

    def close(self) -> None:
        """The job ended: its final line stays, followed by a new line."""
        self._stop.set()
        self._thread.join(5)
        with _active_lock:
            if self in _active:
                _active.remove(self)
        try:
            self.draw(self._line())
            with self._write_lock:
                self.stream.write("\n")
                self.stream.flush()
        except Exception:
            pass
