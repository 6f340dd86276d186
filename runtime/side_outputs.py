"""Side outputs, as in PyFlink: an operator emits extra records under an ``OutputTag``; downstream,
``stream.get_side_output(tag)`` is a stream of just those.

Inside the producing operator's output a side record travels wrapped in :class:`SideOutputRecord`; the
producer's output edges unwrap the ones for their tag and drop them from the main stream. An operator
with side outputs is always the last of its chain, so wrapped records never reach a chained operator.

>>> bad = OutputTag("malformed")
>>> SideOutputRecord(bad.tag_id, "x").value
'x'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OutputTag", "SideOutputRecord", "FailedRecord"]


@dataclass(frozen=True)
class OutputTag:
    """Names a side output. ``type_info`` is optional, as everywhere in Chandy.

    >>> from runtime import StreamExecutionEnvironment
    >>> from runtime.types import Types
    >>> late = OutputTag("late", Types.STRING())
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> env.from_collection(["a"]).get_side_output(late).get_type(), late
    (STRING, OutputTag(tag_id='late', type_info=STRING))
    """

    tag_id: str
    type_info: Any = None


class SideOutputRecord:
    __slots__ = ("tag", "value")

    def __init__(self, tag: str, value: Any):
        self.tag = tag
        self.value = value

    def __reduce__(self):
        return (SideOutputRecord, (self.tag, self.value))


@dataclass(frozen=True)
class FailedRecord:
    """A record whose function raised, on the side output chosen with
    ``stream.side_output_failed_records(tag)``: the record, the operator, and the error with its traceback.

    >>> failed = FailedRecord("x", "parse", "ValueError", "invalid literal for int() with base 10: 'x'", "...")
    >>> failed.record, failed
    ('x', FailedRecord('x' in 'parse': ValueError: invalid literal for int() with base 10: 'x'))
    """

    record: Any
    operator: str
    error_type: str
    message: str
    traceback: str

    def __repr__(self) -> str:
        return f"FailedRecord({self.record!r:.200} in {self.operator!r}: {self.error_type}: {self.message:.500})"
