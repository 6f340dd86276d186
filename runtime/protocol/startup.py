"""A job attempt's start-up as marks on the wall clock, taken by the driver and by each slot, and the phases
between them: from ``execute()`` to the first record at a sink (issue 36).

A mark is a name and ``time.time()`` seconds: the driver's marks and the executors' are compared, which is exact on
one machine (a local master) and as good as the hosts' clock synchronisation on a cluster. Slots send theirs in
their metrics reports (:class:`~runtime.protocol.messages.MetricsReport`); the driver keeps its own on the job
master. Marks cost a ``time.time()`` each and change nothing the job does.

Each phase ends at a milestone: the driver's marks, then the slowest slot's (every slot must be connected before
records flow everywhere), then the first record anywhere. A milestone never comes before the one ahead of it (a
source of a slot already connected may read while another slot still connects), so the phases add up to the total.

>>> driver = {CALLED: 10.0, COMPILED: 10.03, PICKLED: 10.035, SUBMITTED: 10.04}
>>> reused = {WORKER_STARTED: 3.0, TASK_STARTED: 10.1, LOADED: 10.11, BUILT: 10.13, REGISTERED: 10.13,
...           ADDRESSES: 10.15, CONNECTED: 10.16, FIRST_SOURCE_RECORD: 10.161}
>>> forked = {**reused, WORKER_STARTED: 10.06, TASK_STARTED: 10.09, FIRST_SOURCE_RECORD: 10.2}
>>> phases = startup_phases(driver, [reused, forked], first_sink_record=10.4)
>>> {name: round(ms, 1) for name, ms in phases.items()}  # doctest: +NORMALIZE_WHITESPACE
{'compile': 30.0, 'pickling': 5.0, 'launch': 5.0, 'stage submission': 60.0, 'worker start': 0.0,
 'unpickling': 10.0, 'slot setup': 20.0, 'rendezvous': 30.0, 'first record at source': 1.0,
 'first record at sink': 239.0, 'total': 400.0}

The slot whose task started last decides between stage submission and worker start: a worker forked after the
stage was submitted starts there, a reused one takes no time.

>>> startup_phases(driver, [forked])["worker start"], startup_phases(driver, [])["rendezvous"]
(30.0, None)
"""

from __future__ import annotations

__all__ = [
    "CALLED", "COMPILED", "PICKLED", "SUBMITTED", "WORKER_STARTED", "TASK_STARTED", "LOADED", "BUILT", "REGISTERED",
    "ADDRESSES", "CONNECTED", "FIRST_SOURCE_RECORD", "FIRST_SINK_RECORD", "PHASES", "startup_phases",
]

# The driver's marks.
CALLED = "called"  # execute() or execute_async() was called
COMPILED = "compiled"  # the job graph is built and checked, the Spark conf read, the slots counted
PICKLED = "pickled"  # the job graph (operators, the user's functions) is pickled for the executors
SUBMITTED = "submitted"  # the job master's stage thread hands the barrier stage to Spark (collect())
# A slot's marks.
WORKER_STARTED = "worker started"  # its Python worker process started (long before, when Spark reused it)
TASK_STARTED = "task started"  # the barrier task's function runs in the worker
LOADED = "loaded"  # the job graph is unpickled
BUILT = "built"  # its operators are set up, their state restored, its data server listens
REGISTERED = "registered"  # it told the driver its address
ADDRESSES = "addresses"  # the driver sent every slot's address (every slot registered)
CONNECTED = "connected"  # its output channels are connected: its subtasks start
FIRST_SOURCE_RECORD = "first source record"  # a source subtask of the slot read its first record
FIRST_SINK_RECORD = "first sink record"  # a subtask with a sink received its first record

# Each phase, its milestone, and whether the milestone is the first slot's (min) or the last one's (max).
PHASES = (
    ("compile", COMPILED, None),
    ("pickling", PICKLED, None),
    ("launch", SUBMITTED, None),  # the job master's thread, its control server, the stage's thread
    ("stage submission", None, None),  # Spark schedules the barrier tasks onto Python workers
    ("worker start", TASK_STARTED, max),  # a forked worker's start and imports (0 when reused)
    ("unpickling", LOADED, max),
    ("slot setup", BUILT, max),
    ("rendezvous", CONNECTED, max),  # registering, every slot's address, channels connected
    ("first record at source", FIRST_SOURCE_RECORD, min),
    ("first record at sink", FIRST_SINK_RECORD, min),
)


def _task_start(driver: dict[str, float], slots: list[dict[str, float]]) -> float | None:
    """When the slot whose task started last had a worker to run in: its worker's start when forked after the stage
    was submitted, else its task's start (a reused worker)."""
    last = max((slot for slot in slots if TASK_STARTED in slot), key=lambda slot: slot[TASK_STARTED], default=None)
    if last is None:
        return None
    worker = last.get(WORKER_STARTED)
    submitted = driver.get(SUBMITTED)
    if worker is not None and submitted is not None and submitted < worker < last[TASK_STARTED]:
        return worker
    return last[TASK_STARTED]


def startup_phases(driver: dict[str, float], slots: list[dict[str, float]],
                   first_sink_record: float | None = None, origin: str = CALLED,
                   phases_marked: tuple = PHASES) -> dict[str, float | None]:
    """Milliseconds of each phase of :data:`PHASES` and their ``total``, from the driver's marks and each slot's;
    ``first_sink_record``: the time a sink noted itself, instead of the slots' :data:`FIRST_SINK_RECORD`. A phase
    whose milestone is missing is None, and the next one counts from the last milestone there was. ``origin`` and
    ``phases_marked``: another timeline ending the same way, a restart's (:mod:`runtime.driver.recovery_timeline`)."""
    if origin not in driver:
        raise ValueError(f"the driver's marks have no {origin!r} mark to count from: {sorted(driver)}")
    phases: dict[str, float | None] = {}
    reached = driver[origin]
    for name, mark, across in phases_marked:
        if name == "stage submission":
            at = _task_start(driver, slots)
        elif mark == FIRST_SINK_RECORD and first_sink_record is not None:
            at = first_sink_record
        elif across is None:
            at = driver.get(mark)
        else:
            values = [slot[mark] for slot in slots if mark in slot]
            at = across(values) if values else None
        if at is None:
            phases[name] = None
            continue
        at = max(at, reached)
        phases[name] = round((at - reached) * 1000, 3)
        reached = at
    phases["total"] = round((reached - driver[origin]) * 1000, 3)
    return phases
