"""The windows in flight of one key under a merging (session) assigner: Flink's ``MergingWindowSet``.

It maps each window in flight to its *state window*: the window whose namespace holds the pane's contents.
When windows merge, the merged window keeps the state window of one of them, so that only the contents of
the others move (Flink's trick to avoid copying state on every merge). The operator keeps the mapping, a
plain dict, in keyed state: it builds a set from the stored dict for each element or timer of a key, and
stores ``persist()`` back when ``changed``.

>>> from operators.window.assigners import EventTimeSessionWindows
>>> from operators.window.windows import TimeWindow
>>> sessions = MergingWindowSet(EventTimeSessionWindows.with_gap(10), {})
>>> sessions.add_window(TimeWindow(0, 10), print)
TimeWindow(start=0, end=10)
>>> sessions.add_window(TimeWindow(5, 15), print)  # merge_function(result, merged, state window, merged states)
TimeWindow(start=0, end=15) [TimeWindow(start=0, end=10)] TimeWindow(start=0, end=10) []
TimeWindow(start=0, end=15)
>>> sessions.persist()
{TimeWindow(start=0, end=15): TimeWindow(start=0, end=10)}
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["MergingWindowSet"]


class _Collect:
    __slots__ = ("merges",)

    def __init__(self):
        self.merges: list = []

    def merge(self, to_be_merged, merge_result) -> None:
        self.merges.append((merge_result, list(dict.fromkeys(to_be_merged))))


class MergingWindowSet:
    """The in-flight windows of one key and their state windows, over a plain dict ``{window: state
    window}`` (copied: the dict given is not changed).

    ``add_window(new_window, merge_function)`` adds a window, merges it with the windows in flight as the
    assigner decides, and returns the window it ended up in: the new window itself, or the merged window.
    When windows merge, ``merge_function(merge_result, merged_windows, state_window_result,
    merged_state_windows)`` is called (Flink's ``MergeFunction``): ``merged_windows`` are the in-flight
    windows that merged into ``merge_result`` (never the new window), ``state_window_result`` is the state
    window the result keeps, ``merged_state_windows`` the state windows whose contents must now be merged
    into it. It is not called when the new window merely falls inside an existing one.

    >>> from operators.window.assigners import EventTimeSessionWindows
    >>> from operators.window.windows import TimeWindow
    >>> calls = []
    >>> merging = MergingWindowSet(EventTimeSessionWindows.with_gap(10),
    ...                            {TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(20, 30): TimeWindow(20, 30)})
    >>> merging.add_window(TimeWindow(10, 20), lambda *args: calls.append(args))  # touches both: bridges them
    TimeWindow(start=0, end=30)
    >>> calls  # doctest: +NORMALIZE_WHITESPACE
    [(TimeWindow(start=0, end=30), [TimeWindow(start=0, end=10), TimeWindow(start=20, end=30)],
      TimeWindow(start=0, end=10), [TimeWindow(start=20, end=30)])]
    >>> merging.get_state_window(TimeWindow(0, 30)), merging.changed
    (TimeWindow(start=0, end=10), True)
    """

    __slots__ = ("_assigner", "_mapping", "changed")

    def __init__(self, assigner, mapping: dict | None = None):
        self._assigner = assigner
        self._mapping = dict(mapping) if mapping else {}
        self.changed = False

    def get_state_window(self, window) -> Any:
        """The state window of in-flight ``window`` (None if it is not in flight).

        >>> from operators.window.windows import TimeWindow
        >>> MergingWindowSet(None, {TimeWindow(0, 9): TimeWindow(2, 9)}).get_state_window(TimeWindow(0, 9))
        TimeWindow(start=2, end=9)
        """
        return self._mapping.get(window)

    def retire_window(self, window) -> None:
        """Removes ``window`` from the windows in flight (its pane was purged for good).

        >>> from operators.window.windows import TimeWindow
        >>> merging = MergingWindowSet(None, {TimeWindow(0, 9): TimeWindow(0, 9)})
        >>> merging.retire_window(TimeWindow(0, 9)); merging.persist(), merging.changed
        ({}, True)
        """
        if self._mapping.pop(window, None) is None:
            raise LookupError(f"Window {window!r} is not in the in-flight window set {self!r}.")
        self.changed = True

    def persist(self) -> dict:
        """A copy of the mapping ``{window: state window}``, to store in keyed state (clear the state
        instead when it is empty).

        >>> MergingWindowSet(None, {}).persist()
        {}
        """
        return dict(self._mapping)

    def windows(self) -> list:
        """The windows in flight.

        >>> from operators.window.windows import TimeWindow
        >>> MergingWindowSet(None, {TimeWindow(0, 9): TimeWindow(2, 9)}).windows()
        [TimeWindow(start=0, end=9)]
        """
        return list(self._mapping)

    def __len__(self) -> int:
        return len(self._mapping)

    def __contains__(self, window) -> bool:
        return window in self._mapping

    def add_window(self, new_window, merge_function: Callable) -> Any:
        """Adds ``new_window``; returns the window it is now part of (see the class docstring).

        >>> from operators.window.assigners import EventTimeSessionWindows
        >>> from operators.window.windows import TimeWindow
        >>> merging = MergingWindowSet(EventTimeSessionWindows.with_gap(10), {TimeWindow(0, 20): TimeWindow(0, 10)})
        >>> merging.add_window(TimeWindow(3, 13), print), merging.get_state_window(TimeWindow(0, 20))
        (TimeWindow(start=0, end=20), TimeWindow(start=0, end=10))
        """
        merge = getattr(merge_function, "merge", merge_function)  # a Flink-style MergeFunction object too
        mapping = self._mapping
        collect = _Collect()
        self._assigner.merge_windows([*self._merge_candidates(new_window), new_window], collect)

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in collect.merges:
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            if not merged_windows:
                mapping.setdefault(merge_result, merge_result)  # a custom assigner "merged" only the new window
                self.changed = True
                continue
            if len(merged_windows) == 1 and merged_windows[0] == merge_result:
                continue  # the new window falls inside one in flight, which stays as it is: nothing to merge
            # Flink keeps the state window of any one of the merged windows (a hash set's first); this keeps
            # the first the assigner lists: for sessions, that of the earliest window
            state_window = mapping.get(merged_windows[0])
            merged_state_windows = []
            for window in merged_windows:
                removed = mapping.pop(window, None)
                if removed is not None and removed != state_window:
                    merged_state_windows.append(removed)
            mapping[merge_result] = state_window
            self.changed = True
            merge(merge_result, merged_windows, state_window, merged_state_windows)

        if not collect.merges or (result_window == new_window and not merged_new_window):
            # setdefault, not Flink's put: a new window equal to one in flight (possible with dynamic gaps)
            # keeps that window's state window instead of orphaning its contents
            if new_window not in mapping:
                mapping[new_window] = new_window
                self.changed = True
        return result_window

    def _merge_candidates(self, new_window) -> list:
        """The windows in flight that the assigner is given with ``new_window``. Flink gives it all of them, and
        so does this for an assigner of its own. Sessions merge exactly the windows that intersect, and windows in
        flight never intersect each other (they would have merged), and the cover of two intersecting windows
        meets only what one of them meets: so only the windows that intersect the new one can take part, and
        sorting the others for each record made a key with thousands of sessions waiting for the watermark cost
        quadratic time.

        >>> from operators.window.assigners import EventTimeSessionWindows
        >>> from operators.window.windows import TimeWindow
        >>> in_flight = {TimeWindow(0, 10): TimeWindow(0, 10), TimeWindow(30, 40): TimeWindow(30, 40)}
        >>> MergingWindowSet(EventTimeSessionWindows.with_gap(10), in_flight)._merge_candidates(TimeWindow(8, 18))
        [TimeWindow(start=0, end=10)]
        """
        if not getattr(self._assigner, "merges_intersecting_time_windows", False):
            return list(self._mapping)
        start, end = new_window.start, new_window.end
        return [window for window in self._mapping if window.start <= end and window.end >= start]

    def __repr__(self) -> str:
        return f"MergingWindowSet({self._mapping!r})"

