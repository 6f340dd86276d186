"""A keyed operator at parallelism p as a job runs it, without Spark: one test harness per subtask, each fed the
records whose keys it owns (as a ``key_by`` edge routes them), every record of a broadcast second input, and
every watermark (each channel carries them to every subtask); and a bounded input stamped by a job's own
WatermarkStrategy, a batch at a time, each batch followed by the watermark its generator gives then (as a source
subtask emits one between batches).

>>> subtasks = KeyedSubtasks(lambda ds: ds.key_by(lambda w: w).reduce(lambda a, b: a + b), lambda w: w, 2)
>>> subtasks.open(); subtasks.process_elements(["a", "b", "a"])
>>> sorted(subtasks.output())
['a', 'aa', 'b']
"""

from __future__ import annotations

from typing import Callable, Iterator

from runtime.testing import KeyedOperatorHarness


class KeyedSubtasks:
    """Every subtask of the keyed operator ``build`` declares (keyed by ``key_selector``) at ``parallelism``, or
    at the parallelism the operator sets itself (a ``window_all`` runs one subtask). With ``two_inputs``, ``build``
    takes two streams, and :meth:`process_elements2` feeds the second: a broadcast input, whose records every
    subtask gets.

    >>> from operators.functions import KeyedBroadcastProcessFunction
    >>> from state_backends.descriptors import MapStateDescriptor
    >>> LIMIT = MapStateDescriptor("limit")
    >>> class Over(KeyedBroadcastProcessFunction):
    ...     def process_element(self, value, ctx): yield value, value > ctx.get_broadcast_state(LIMIT).get("max")
    ...     def process_broadcast_element(self, value, ctx): ctx.get_broadcast_state(LIMIT).put("max", value)
    >>> subtasks = KeyedSubtasks(lambda numbers, limits: numbers.key_by(lambda n: n)
    ...                          .connect(limits.broadcast(LIMIT)).process(Over()), lambda n: n, 2, two_inputs=True)
    >>> subtasks.open(); subtasks.process_elements2([2]); subtasks.process_elements([1, 2, 3, 4])
    >>> sorted(subtasks.output())
    [(1, False), (2, False), (3, True), (4, True)]
    """

    def __init__(self, build: Callable, key_selector: Callable, parallelism: int = 1, two_inputs: bool = False):
        factory = KeyedOperatorHarness.for_two_inputs if two_inputs else KeyedOperatorHarness.for_stream
        first = factory(build, parallelism=parallelism)
        self.harnesses = [first] + [factory(build, parallelism=first.parallelism, subtask_index=i)
                                    for i in range(1, first.parallelism)]
        self.key_selector = key_selector
        self._owners: dict = {}  # key: the index of the subtask that owns it (keys here are hashable)

    def open(self) -> None:
        for harness in self.harnesses:
            harness.open()

    def process_elements(self, records: list, timestamps: list | None = None) -> None:
        """Each record (with its timestamp) to the subtask that owns its key, in their order."""
        if len(self.harnesses) == 1:
            self.harnesses[0].process_elements(records, timestamps)
            return
        shares = [([], []) for _ in self.harnesses]
        stamps = timestamps if timestamps is not None else [None] * len(records)
        for record, timestamp in zip(records, stamps):
            records_of, timestamps_of = shares[self._owner(self.key_selector(record))]
            records_of.append(record)
            timestamps_of.append(timestamp)
        for harness, (records_of, timestamps_of) in zip(self.harnesses, shares):
            harness.process_elements(records_of, timestamps_of if timestamps is not None else None)

    def _owner(self, key) -> int:
        owner = self._owners.get(key)
        if owner is None:
            owner = self._owners[key] = next(i for i, harness in enumerate(self.harnesses) if harness.owns_key(key))
        return owner

    def process_elements2(self, records: list, timestamps: list | None = None) -> None:
        """Records of the second input, a broadcast one: every subtask gets every record."""
        for harness in self.harnesses:
            harness.process_elements2(records, timestamps)

    def process_watermark(self, watermark: int) -> None:
        for harness in self.harnesses:
            harness.process_watermark(watermark)

    def set_processing_time(self, now_ms: int) -> None:
        for harness in self.harnesses:
            harness.set_processing_time(now_ms)

    def end_input(self) -> None:
        for harness in self.harnesses:
            harness.end_input()

    def output(self) -> list:
        """What every subtask emitted, subtask after subtask."""
        return [record for harness in self.harnesses for record in harness.output()]

    def output_with_timestamps(self) -> list:
        return [pair for harness in self.harnesses for pair in harness.output_with_timestamps()]

    def side_output(self, tag) -> list:
        return [record for harness in self.harnesses for record in harness.side_output(tag)]


def stamped_batches(records: list, strategy, batch_size: int) -> Iterator[tuple[list, list, int]]:
    """``(batch, timestamps, watermark)`` per ``batch_size`` records: the timestamps ``strategy``'s assigner gives,
    and the watermark its generator gives once it saw the batch.

    >>> from runtime import Duration, WatermarkStrategy
    >>> bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))
    >>> list(stamped_batches([10, 30, 20], bounded.with_timestamp_assigner(lambda n, _: n), batch_size=2))
    [([10, 30], [10, 30], 24), ([20], [20], 24)]
    """
    assigner = strategy.create_timestamp_assigner()
    generator = strategy.create_watermark_generator()
    for start in range(0, len(records), batch_size):
        batch = records[start:start + batch_size]
        timestamps = [assigner.extract_timestamp(record, None) for record in batch]
        generator.on_batch(timestamps, batch)
        yield batch, timestamps, generator.current_watermark()
