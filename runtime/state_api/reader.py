"""Reading a savepoint's or a checkpoint's state as data: Flink's ``SavepointReader`` (its State Processor API, which
is Java only), in Python, into Arrow tables and pandas.

A reader opens one savepoint or checkpoint (a savepoint's directory, a job's ``chk-<n>`` directory, or a job
directory with ``"latest"`` or an id) and reads an operator's state the way a restore would: every key group of
the operator is loaded into a heap backend by the runtime's own restore code, whichever backend wrote it (heap,
incremental heap, RocksDB's native files), so the reader never parses a file format of its own. Keyed state comes
as a table of ``key`` and ``value`` (and ``key_group`` on request): list state as the list, map state as the dict
of each key; a state with a time-to-live as the value itself beside its ``last_access_ms``. Columns are Arrow types
inferred from the values; values Arrow cannot hold (objects of your classes, mixed types) come as their pickled bytes,
in a column named ``value_pickled`` (or ``key_pickled``).

Timers and window contents are keyed state too, in internal states (:mod:`operators.timers`,
:mod:`operators.window`), which ``keyed_state`` reads as they are stored; ``timers(uid)`` and
``window_contents(uid)`` read them as tables of their own (Flink's reader reads them through a
``KeyedStateReaderFunction``'s context and ``SavepointReader.window(...)``).

>>> import pyarrow as pa
>>> _column("value", [1, 2, None])
('value', <pyarrow.lib.Int64Array object at ...>
[
  1,
  2,
  null
])
>>> _column("value", [1, "two"])[0]
'value_pickled'
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pyarrow as pa

from operators.timers import EVENT_TIMERS, PROCESSING_TIMERS
from operators.window.aligned import ALIGNED_WINDOW_STATE_PREFIX
from operators.window.evictors import TimestampedValue
from operators.window.operator import MERGING_WINDOWS_STATE, WINDOW_CONTENTS_STATE
from operators.window.windows import GlobalWindow, TimeWindow, Window
from runtime.errors import UnknownNameError
from runtime.executor.restore import operator_lists, restore_operator
from runtime.ids import CheckpointId
from runtime.keys.key_groups import KeyGroupRange
from runtime.protocol.checkpoints import CompletedCheckpoint, RestoreSpec
from runtime.tools.checkpoint_inspection import open_checkpoint
from state_backends.heap import HeapKeyedStateBackend
from state_backends.storage import CheckpointStorage, SavepointStorage

__all__ = ["SavepointReader", "OperatorInfo"]


@dataclass(frozen=True)
class OperatorInfo:
    """An operator of the checkpoint: its ``uid``, ``name`` and ``parallelism``, the names of its keyed states
    (internal ones too: timers start with ``__``, window contents with ``window/``) and of its operator (list)
    states; ``has_timers``: timers are registered (read them with ``timers(uid)``); ``has_windows``: windows hold
    contents (``window_contents(uid)``).

    >>> OperatorInfo("count", "Count", 2, ("count",), ()).has_timers
    False
    """

    uid: str
    name: str
    parallelism: int
    keyed_states: tuple[str, ...]
    operator_states: tuple[str, ...]
    has_timers: bool = False
    has_windows: bool = False


class SavepointReader:
    """The state of one savepoint or checkpoint. ``SavepointReader.read(path)`` opens it.

    ``path``: a savepoint's directory or a job's ``chk-<n>`` directory (as ``restore_from`` takes them); or a job's
    directory with ``checkpoint="latest"`` (the newest restorable checkpoint) or a checkpoint id.
    """

    def __init__(self, storage, checkpoint: CompletedCheckpoint):
        self.storage = storage
        self.checkpoint = checkpoint
        self._backends: dict[str, HeapKeyedStateBackend] = {}

    @classmethod
    def read(cls, path: str, checkpoint: int | str | None = None) -> "SavepointReader":
        storage, completed = open_checkpoint(path, checkpoint)
        return cls(storage, completed)

    @property
    def checkpoint_id(self) -> CheckpointId:
        return self.checkpoint.checkpoint_id

    @property
    def max_parallelism(self) -> int:
        return self.checkpoint.max_parallelism

    def operators(self) -> list[OperatorInfo]:
        """Every operator with state, in the job's order."""
        found = []
        for state in self.checkpoint.operators:
            keyed = tuple(sorted(self._backend(state.uid).state_names())) if self._keyed_handles(state) else ()
            operator = tuple(sorted(self._operator_lists(state.uid))) if self._operator_handles(state) else ()
            if keyed or operator:
                found.append(OperatorInfo(state.uid, state.name, state.parallelism, keyed, operator,
                                          has_timers=EVENT_TIMERS in keyed or PROCESSING_TIMERS in keyed,
                                          has_windows=any(_is_window_state(name) for name in keyed)))
        return found

    def keyed_state(self, uid: str, name: str, key_groups: bool = False) -> pa.Table:
        """The keyed state ``name`` of operator ``uid``: one row per key, ``key`` and ``value`` (with
        ``key_groups``, a ``key_group`` column first), ordered by key group.

        A state with a time-to-live has a third column, ``last_access_ms``: the processing time (epoch ms) of the
        entry's last access, as its expiry counts it: a number for value, reducing and aggregating state, one per
        element for list state (a list beside the list), one per map key for map state (a dict beside the dict);
        ``value`` is the value itself. Entries expired since the checkpoint are included: a snapshot leaves out
        what had expired at its barrier, but the reader does not know the job's clock or the state's time-to-live
        (a checkpoint does not record it), so whether an entry is still live is yours to judge
        (``last_access_ms + ttl <= now`` has expired)."""
        backend = self._backend(uid)
        if name not in backend.state_names():
            known = sorted(backend.state_names())
            raise UnknownNameError(f"Operator '{uid}' of checkpoint {self.checkpoint_id} has no keyed state '{name}': "
                                   f"its keyed states are {known}.")
        rows = sorted(backend.raw_entries(name), key=lambda row: row[0])
        values = [value for _, _, value in rows]
        columns = [_column("key", [key for _, key, _ in rows])]
        if backend.restored_with_ttl(name):
            unwrapped = [_untimed(entry) for entry in values]
            columns += [_column("value", [value for value, _ in unwrapped]),
                        _column("last_access_ms", [times for _, times in unwrapped])]
        else:
            columns.append(_column("value", values))
        if key_groups:
            columns.insert(0, _key_group_column(group for group, _, _ in rows))
        return pa.table(dict(columns))

    def timers(self, uid: str, key_groups: bool = False) -> pa.Table:
        """The timers registered in operator ``uid`` and not fired yet: one row per timer, ``key``, ``timestamp``
        (ms: event time for ``kind`` ``"event"``, epoch processing time for ``"processing"``), ordered by key group
        (with ``key_groups``, a ``key_group`` column first), then timestamp; at one time, event timers first.

        A timer of a window operator belongs to a window, named by the columns ``window_contents`` names its
        windows by (``window_start`` and ``window_end`` for time windows); another operator's timers that carry
        a namespace (an interval join's) have it in a ``namespace`` column. An operator without timers gives an
        empty table. Timers are stored as keyed state, ``__timers__/event`` and ``__timers__/processing``: each
        key's ``{(timestamp, namespace): None}`` (:mod:`operators.timers`), so they read from every backend.

        >>> from runtime.state_api import SavepointWriter
        >>> path = (SavepointWriter.new_savepoint(128)     # timers written as a timer service stores them
        ...         .with_keyed_state("alerts", "__timers__/event", {"ann": {(900, None): None, (300, None): None}})
        ...         .with_keyed_state("alerts", "__timers__/processing", {"bob": {(1_700_000_000_000, None): None}})
        ...         .write("memory://state-reader-doc/timers"))
        >>> reader = SavepointReader.read(path)
        >>> [op.has_timers for op in reader.operators()]
        [True]
        >>> for row in reader.timers("alerts").to_pylist(): print(row)
        {'key': 'ann', 'timestamp': 300, 'kind': 'event'}
        {'key': 'ann', 'timestamp': 900, 'kind': 'event'}
        {'key': 'bob', 'timestamp': 1700000000000, 'kind': 'processing'}
        """
        backend = self._backend(uid)
        rows = []  # (key group, timestamp, kind, key, namespace)
        for kind, name in (("event", EVENT_TIMERS), ("processing", PROCESSING_TIMERS)):
            for group, key, registered in backend.raw_entries(name):
                rows.extend((group, timestamp, kind, key, namespace) for timestamp, namespace in registered)
        rows.sort(key=lambda row: (row[0], row[1]))  # stable: event timers before processing ones at one time
        columns = [_column("key", [row[3] for row in rows]),
                   ("timestamp", pa.array([row[1] for row in rows], pa.int64())),
                   ("kind", pa.array([row[2] for row in rows], pa.string()))]
        namespaces = [row[4] for row in rows]
        if any(namespace is not None for namespace in namespaces):
            if all(isinstance(namespace, Window) for namespace in namespaces):
                columns += _window_columns(namespaces)
            else:
                columns.append(_column("namespace", namespaces))
        if key_groups:
            columns.insert(0, _key_group_column(row[0] for row in rows))
        return pa.table(dict(columns))

    def window_contents(self, uid: str, key_groups: bool = False) -> pa.Table:
        """What the windows of window operator ``uid`` hold: one row per key and window, ordered by key group (with
        ``key_groups``, a ``key_group`` column first), then window. A window is there from its first element until
        its contents are cleared: at its cleanup time (its end, plus the allowed lateness: a window that fired is
        kept that long for late elements), or when its trigger purges it (count windows do).

        The window: ``window_start`` and ``window_end`` (ms, the end exclusive) for time windows (tumbling, sliding,
        session: a session is the merged window, as its function would see it); ``window`` ``"global"`` for the
        one window of each key of ``GlobalWindows`` and count windows (``count_window``: the elements counted so
        far); any other window in ``window``, pickled if Arrow cannot hold it. The contents, as the operator
        stores them: ``value``, the pane's accumulated value of a ``reduce`` (the reduction so far) or an
        ``aggregate`` (its accumulator: ``get_result`` is not applied, the reader has no function); or
        ``elements``, the list of a process or apply window function's elements, in their order of arrival (with
        an evictor, their timestamps in ``element_timestamps``). Which of the two is told by what is stored: panes
        that are all lists are ``elements``, so a reduce whose values are lists reads as ``elements`` too.

        Both of the operator's layouts read: its general one (``window/contents``: each key's ``{window: pane}``,
        and ``window/merging-windows`` for sessions) and the aligned one of tumbling and sliding event-time windows
        with ``reduce`` or ``aggregate`` (``window/aligned/<start>/<end>``: a value state per window). An operator
        without windows holding contents gives an empty table.

        >>> from runtime.state_api import SavepointWriter
        >>> path = (SavepointWriter.new_savepoint(128)     # panes written as aligned windows store them
        ...         .with_keyed_state("clicks", "window/aligned/60000/120000", {"ann": 3})
        ...         .with_keyed_state("clicks", "window/aligned/0/60000", {"ann": 5, "bob": 1})
        ...         .write("memory://state-reader-doc/windows"))
        >>> reader = SavepointReader.read(path)
        >>> for row in reader.window_contents("clicks").to_pylist(): print(row)
        {'key': 'ann', 'window_start': 0, 'window_end': 60000, 'value': 5}
        {'key': 'ann', 'window_start': 60000, 'window_end': 120000, 'value': 3}
        {'key': 'bob', 'window_start': 0, 'window_end': 60000, 'value': 1}
        """
        backend = self._backend(uid)
        state_windows: dict = {}  # key -> {state window: window}, of merging (session) windows
        for _, key, mapping in backend.raw_entries(MERGING_WINDOWS_STATE):
            state_windows[key] = {state_window: window for window, state_window in mapping.items()}
        general = []  # (key group, key, window, pane)
        for group, key, panes in backend.raw_entries(WINDOW_CONTENTS_STATE):
            merged = state_windows.get(key, {})
            general.extend((group, key, merged.get(window, window), pane) for window, pane in panes.items())
        aligned = []
        for name in backend.state_names():
            if name.startswith(ALIGNED_WINDOW_STATE_PREFIX):
                start, end = (int(part) for part in name[len(ALIGNED_WINDOW_STATE_PREFIX):].split("/"))
                window = TimeWindow(start, end)
                aligned.extend((group, key, window, value) for group, key, value in backend.raw_entries(name))
        # A pane of Elements is a list (aligned panes never are: they are reduce or aggregate accumulators).
        elements = bool(general) and not aligned and all(type(pane) is list for *_, pane in general)
        rows = general + aligned
        rows.sort(key=lambda row: (row[0], _window_order(row[2])))
        columns = [_column("key", [row[1] for row in rows]), *_window_columns([row[2] for row in rows])]
        panes = [row[3] for row in rows]
        if elements:
            timed = any(type(element) is TimestampedValue for pane in panes for element in pane)
            columns.append(_column("elements", [[_plain(element) for element in pane] for pane in panes]))
            if timed:
                columns.append(_column("element_timestamps", [[element.timestamp for element in pane]
                                                              for pane in panes]))
        else:
            columns.append(_column("value", panes))
        if key_groups:
            columns.insert(0, _key_group_column(row[0] for row in rows))
        return pa.table(dict(columns))

    def operator_state(self, uid: str, name: str) -> pa.Table:
        """The operator list state ``name`` of operator ``uid``: one row per item, from every subtask in turn."""
        lists = self._operator_lists(uid)
        if name not in lists:
            raise UnknownNameError(f"Operator '{uid}' of checkpoint {self.checkpoint_id} has no operator state "
                                   f"'{name}': its operator states are {sorted(lists)}.")
        return pa.table(dict([_column("value", lists[name])]))

    def keyed_state_frame(self, spark, uid: str, name: str, pickled: bool = False):
        """The keyed state ``name`` of ``uid`` as a Spark DataFrame with the columns of ``keyed_state`` (``key``,
        ``value``; with a time-to-live, ``last_access_ms`` too), read in parallel on the executors: one partition
        per state file, each restored on its own, so state larger than the driver's memory reads at the cluster's
        speed. The executors must reach the checkpoint's storage (a shared file system or an object store).

        Spark infers the columns' types from the values. With ``pickled``, ``key`` and ``value`` are the pickled
        bytes instead (for values Spark has no type for: unpickle them with ``pickle.loads``), and one state file
        is read ahead to learn whether the state has a time-to-live.

        A state with a time-to-live reads as in ``keyed_state``: ``value`` is the value itself (pickled without its
        time), ``last_access_ms`` the processing time (epoch ms) of the entry's last access: a number for value,
        reducing and aggregating state, a list beside the list of a list state, a dict beside the dict of a map
        state (with ``pickled``, that dict is pickled too: it is keyed by the map's keys). Entries expired since
        the checkpoint are included, as in ``keyed_state``."""
        tasks = self._frame_tasks(uid, name, pickled)
        rows = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(_read_one_file)
        if pickled:  # the schema is given, so the columns must be known: the first row tells them
            first = rows.take(1)
            return spark.createDataFrame(rows, _pickled_schema(first[0] if first else None))
        frame = spark.createDataFrame(rows)  # the types inferred, and the columns counted, from the rows
        return frame.toDF(*_FRAME_COLUMNS[:len(frame.columns)])

    def _frame_tasks(self, uid: str, name: str, pickled: bool) -> list[tuple]:
        """``keyed_state_frame``'s tasks, one per state file of ``uid``: what ``_read_one_file`` reads."""
        if isinstance(self.storage, SavepointStorage):
            where = ("savepoint", self.storage.url)
        else:
            where = ("checkpoints", self.storage.url, self.storage.job_name)
        return [(where, int(self.checkpoint_id), self.max_parallelism, handle, name, pickled)
                for handle in self._keyed_handles(self._state(uid))]

    # -- loading ---------------------------------------------------------------------------------------------

    def _state(self, uid: str):
        state = self.checkpoint.operator(uid)
        if state is None:
            raise UnknownNameError(f"Checkpoint {self.checkpoint_id} has no operator with uid '{uid}': its operators "
                                   f"are {[op.uid for op in self.checkpoint.operators]}.")
        return state

    @staticmethod
    def _keyed_handles(state) -> tuple:
        return tuple(h for h in state.handles if h.keyed_groups or h.is_native)

    @staticmethod
    def _operator_handles(state) -> tuple:
        return tuple(h for h in state.handles if h.has_operator_state)

    def _backend(self, uid: str) -> HeapKeyedStateBackend:
        """Every key group of operator ``uid``, restored by the runtime's restore code into one heap backend."""
        backend = self._backends.get(uid)
        if backend is None:
            backend = self._backends[uid] = _restored(self.storage, self.checkpoint_id, self.max_parallelism, uid,
                                                      self._keyed_handles(self._state(uid)),
                                                      (0, self.max_parallelism - 1))
        return backend

    def _operator_lists(self, uid: str) -> dict[str, list]:
        handles = sorted(self._operator_handles(self._state(uid)), key=lambda h: h.subtask)
        return operator_lists(self.storage, self.checkpoint_id, handles)


_FRAME_COLUMNS = ("key", "value", "last_access_ms")


def _read_one_file(task) -> list[tuple]:
    """On an executor: the rows of one state file's state ``name``: ``(key, value)``, or with a time-to-live
    ``(key, value, last access)`` (the value without its times, as ``keyed_state`` reads it). With ``pickled``,
    the key, the value and a map state's dict of times are pickled."""
    where, checkpoint_id, max_parallelism, handle, name, pickled = task
    if where[0] == "savepoint":
        storage = SavepointStorage(where[1])
    else:
        storage = CheckpointStorage(where[1], where[2])
    groups = handle.keyed_groups
    backend = _restored(storage, CheckpointId(checkpoint_id), max_parallelism, handle.uid, (handle,),
                        (min(groups), max(groups)))
    timed = backend.restored_with_ttl(name)
    rows = []
    for _, key, entry in backend.raw_entries(name):
        value, *times = _untimed(entry) if timed else (entry,)
        if pickled:
            key, value = pickle.dumps(key), pickle.dumps(value)
            times = [pickle.dumps(t) if type(t) is dict else t for t in times]
        rows.append((key, value, *times))
    return rows


def _pickled_schema(first_row: tuple | None):
    """The Spark schema of ``keyed_state_frame(pickled=True)``, from its first row (None: it has none): ``key`` and
    ``value`` as bytes; with a time-to-live, ``last_access_ms`` as the row holds it: a number, a list of numbers
    (list state), or pickled (a map state's dict).

    >>> [(field.name, field.dataType.simpleString()) for field in _pickled_schema((b"k", b"v", [1, 2])).fields]
    [('key', 'binary'), ('value', 'binary'), ('last_access_ms', 'array<bigint>')]
    >>> _pickled_schema(None).fieldNames(), _pickled_schema((b"k", b"v", 5)).fields[2].dataType.simpleString()
    (['key', 'value'], 'bigint')
    """
    from pyspark.sql.types import ArrayType, BinaryType, LongType, StructField, StructType

    fields = [StructField("key", BinaryType()), StructField("value", BinaryType())]
    if first_row is not None and len(first_row) == len(_FRAME_COLUMNS):
        times = first_row[2]
        kind = (ArrayType(LongType()) if type(times) is list else BinaryType() if type(times) is bytes
                else LongType())
        fields.append(StructField("last_access_ms", kind))
    return StructType(fields)


def _restored(storage, checkpoint_id: CheckpointId, max_parallelism: int, uid: str, handles: tuple,
              key_groups: tuple[int, int]) -> HeapKeyedStateBackend:
    """A heap backend holding key groups ``key_groups`` (inclusive) of ``handles``, loaded by the restore code."""
    backend = HeapKeyedStateBackend(max_parallelism, KeyGroupRange(*key_groups), operator_uid=uid)
    restore_operator(storage, RestoreSpec(checkpoint_id, tuple(handles), (), key_groups), None, backend, 0, 1)
    return backend


def _key_group_column(groups) -> tuple[str, pa.Array]:
    return "key_group", pa.array(list(groups), pa.int32())


def _is_window_state(name: str) -> bool:
    """Whether ``name`` holds a window operator's panes (either layout)."""
    return name == WINDOW_CONTENTS_STATE or name.startswith(ALIGNED_WINDOW_STATE_PREFIX)


def _untimed(entry) -> tuple:
    """``(value, last access)`` of an entry stored with a time-to-live (:mod:`state_backends.heap.ttl_states`):
    a value, reducing or aggregating state's ``(value, t)``; a list state's ``[(element, t), ...]`` gives the
    list and the list of times; a map state's ``{k: (v, t)}`` the dict and the dict of times.

    >>> _untimed(("v", 5)), _untimed([("a", 1), ("b", 2)]), _untimed({"k": ("v", 3)})
    (('v', 5), (['a', 'b'], [1, 2]), ({'k': 'v'}, {'k': 3}))
    """
    if type(entry) is list:
        return [element for element, _ in entry], [time for _, time in entry]
    if type(entry) is dict:
        return {k: value for k, (value, _) in entry.items()}, {k: time for k, (_, time) in entry.items()}
    value, time = entry
    return value, time


def _window_columns(windows: list) -> list[tuple[str, pa.Array]]:
    """The columns naming ``windows``: ``window_start`` and ``window_end`` for time windows, ``window`` otherwise
    (``"global"`` for the global window; other windows as Arrow holds them, or pickled).

    >>> from operators.window.windows import GlobalWindow, TimeWindow
    >>> [name for name, _ in _window_columns([TimeWindow(0, 10)])], _window_columns([GlobalWindow.get()])[0][0]
    (['window_start', 'window_end'], 'window')
    """
    if all(type(window) is TimeWindow for window in windows):
        return [("window_start", pa.array([window.start for window in windows], pa.int64())),
                ("window_end", pa.array([window.end for window in windows], pa.int64()))]
    if all(type(window) is GlobalWindow for window in windows):
        return [("window", pa.array(["global"] * len(windows), pa.string()))]
    return [_column("window", windows)]


def _window_order(window) -> tuple:
    return (window.start, window.end) if type(window) is TimeWindow else ()


def _plain(element):
    """An element of a pane without the timestamp an evictor's pane keeps with it."""
    return element.value if type(element) is TimestampedValue else element


def _column(name: str, values: list) -> tuple[str, pa.Array]:
    """``(name, Arrow array)`` of ``values``, or ``(name + "_pickled", their pickled bytes)`` when Arrow cannot hold
    them as they are."""
    try:
        return name, pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return f"{name}_pickled", pa.array([pickle.dumps(v, protocol=5) for v in values], pa.binary())
