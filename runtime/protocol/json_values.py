"""Values of a job (state, keys) as JSON for people and other programs: what the REST API shows of them.

Made where the values live (a worker answering a lookup), so that whoever reads them never unpickles anything.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import json
from typing import Any

__all__ = ["to_json"]

_SCALARS = (str, int, float, bool, type(None))


def to_json(value: Any) -> str:
    """``value`` as JSON text, for people and other programs: tuples and sets as lists, a dict whose keys are not
    strings or numbers as a list of ``[key, value]`` pairs, rows and dataclasses as objects, dates as ISO text,
    decimals as text, bytes as base64, anything else as its ``repr``.

    >>> to_json({"a": (1, 2.5), "b": {3}}), to_json(datetime.date(2026, 11, 27)), to_json(b"\\x00")
    ('{"a": [1, 2.5], "b": [3]}', '"2026-11-27"', '"AA=="')
    """
    return json.dumps(_plain(value), ensure_ascii=False, allow_nan=True)


def _plain(value: Any) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        if all(isinstance(k, _SCALARS) for k in value):
            return {k if isinstance(k, str) else json.dumps(k): _plain(v) for k, v in value.items()}
        return [[_plain(k), _plain(v)] for k, v in value.items()]
    if isinstance(value, (list, tuple, set, frozenset)):
        if hasattr(value, "as_dict"):  # a Row with field names
            try:
                return _plain(value.as_dict())
            except Exception:  # a Row without names: its fields in order
                pass
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_plain(item) for item in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if hasattr(value, "as_dict"):
        try:
            return _plain(value.as_dict())
        except Exception:
            pass
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _plain(value.tolist())
    return repr(value)
