"""Values between Python and text formats, by declared type: shared by the JSON and CSV row formats.

A :class:`~runtime.types.TypeInformation` names what a field holds; :func:`from_text` turns a value parsed from
JSON or CSV into it (numbers from numeric strings too, as Flink's formats accept them), :func:`to_text_value`
turns a Python value into what JSON can hold.

>>> from runtime.types import Types
>>> from_text("42", Types.INT()), from_text(1.5, Types.DOUBLE()), from_text("true", Types.BOOLEAN())
(42, 1.5, True)
>>> import datetime
>>> from_text("2024-01-02T03:04:05", Types.SQL_TIMESTAMP()), to_text_value(datetime.date(2024, 1, 2))
(datetime.datetime(2024, 1, 2, 3, 4, 5), '2024-01-02')
"""

from __future__ import annotations

import base64
import datetime
import decimal

from runtime.types import Row, TypeInformation

__all__ = ["from_text", "to_text_value", "kind_of"]

_INTEGERS = ("BYTE", "SHORT", "INT", "LONG")


def kind_of(type_info: TypeInformation) -> str:
    """The type's kind: its name up to the first parenthesis (``ROW_NAMED``, ``LIST``, ``INT`` ...)."""
    return type_info.name.split("(", 1)[0]


def from_text(value, type_info: TypeInformation):
    """``value`` (parsed from JSON, or a CSV field's text) as the Python value of ``type_info``; ``None`` stays
    ``None``. Raises ValueError or TypeError when it does not fit."""
    if value is None:
        return None
    kind = kind_of(type_info)
    if kind in _INTEGERS:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"{value!r} is not an integer")
        return int(value.strip()) if isinstance(value, str) else int(value)
    if kind in ("FLOAT", "DOUBLE"):
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        return float(value)
    if kind == "BOOLEAN":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"{value!r} is not a boolean")
        return text == "true"
    if kind == "STRING":
        return value if isinstance(value, str) else _json_text(value)
    if kind == "BIG_DEC":
        return decimal.Decimal(str(value))
    if kind == "SQL_DATE":
        return datetime.date.fromisoformat(str(value))
    if kind == "SQL_TIME":
        return datetime.time.fromisoformat(str(value))
    if kind in ("SQL_TIMESTAMP", "INSTANT"):
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00").replace(" ", "T", 1))
        if kind == "INSTANT":
            return (moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)).astimezone(
                datetime.timezone.utc)
        return moment.astimezone(datetime.timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment
    if kind in ("LIST", "BASIC_ARRAY", "PRIMITIVE_ARRAY"):
        (element,) = type_info.fields
        if kind == "PRIMITIVE_ARRAY" and kind_of(element) == "BYTE":
            return base64.b64decode(value) if isinstance(value, str) else bytes(value)
        if not isinstance(value, list):
            raise ValueError(f"{_json_text(value)[:50]} is not an array")
        return [from_text(v, element) for v in value]
    if kind == "MAP":
        key_type, value_type = type_info.fields
        if not isinstance(value, dict):
            raise ValueError(f"{_json_text(value)[:50]} is not an object")
        return {from_text(k, key_type): from_text(v, value_type) for k, v in value.items()}
    if type_info.field_names:  # ROW, ROW_NAMED, TUPLE
        if isinstance(value, dict):
            values = [from_text(value.get(name), t) for name, t in zip(type_info.field_names, type_info.fields)]
        elif isinstance(value, (list, tuple)) and len(value) == len(type_info.fields):
            values = [from_text(v, t) for v, t in zip(value, type_info.fields)]
        else:
            raise ValueError(f"{_json_text(value)[:50]} is not a row of {len(type_info.fields)} fields")
        return Row.of(type_info.field_names, values) if type_info.is_row else tuple(values)
    return value  # PICKLED_BYTE_ARRAY and the like: as parsed


def to_text_value(value):
    """``value`` as JSON can hold it: dates and times in ISO-8601, decimals as numbers, bytes in base64, Rows and
    tuples of named fields as objects."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return value.astimezone(datetime.timezone.utc).replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):  # a JSON number (Python's json writes no Decimal: beyond a float's
        return int(value) if value == value.to_integral_value() else float(value)  # digits, precision is lost)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Row):
        try:
            return {k: to_text_value(v) for k, v in value.as_dict().items()}
        except TypeError:  # a Row without names
            return [to_text_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_text_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_text_value(v) for v in value]
    return str(value)


def _json_text(value) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), default=str)
