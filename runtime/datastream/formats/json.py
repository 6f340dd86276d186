"""PyFlink's ``pyflink.datastream.formats.json``: JSON objects to :class:`~runtime.types.Row` s and back.

Fields are matched by name: a ``Types.ROW([...])`` is named ``f0``, ``f1``, ... as in Flink, so its JSON keys are
those; name them with ``Types.ROW_NAMED(names, types)``. A missing field is ``None`` (``fail_on_missing_field()``
makes it an error), numbers and booleans are also read from strings, dates and times are ISO-8601.

>>> from runtime.types import Types
>>> row_type = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
>>> schema = JsonRowDeserializationSchema.builder().type_info(row_type).build()
>>> schema.deserialize(b'{"id": 7, "name": "ann"}')
Row(id=7, name='ann')
>>> JsonRowSerializationSchema.builder().with_type_info(row_type).build().serialize(schema.deserialize(b'{"id": 7}'))
b'{"id":7,"name":null}'
"""

from __future__ import annotations

import json

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.datastream.formats._values import from_text, to_text_value
from runtime.errors import ConfigurationError, MalformedRecordError
from runtime.types import Row, TypeInformation, Types

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]


def _row_type(type_info, where: str) -> TypeInformation:
    if not isinstance(type_info, TypeInformation) or not type_info.field_names:
        raise ConfigurationError(f"{where}: the type must be a row, Types.ROW([...]) or Types.ROW_NAMED(names, "
                                 f"types), not {type_info!r}.")
    return type_info


class JsonRowDeserializationSchema(DeserializationSchema):
    """Bytes of a JSON object to a Row of ``type_info`` (Flink's ``JsonRowDeserializationSchema``).

    ``ignore_parse_errors``: a message that is not JSON gives ``None`` (a source then skips it) and a field that
    does not fit its type is ``None``, instead of failing the job.

    >>> from runtime.types import Types
    >>> lenient = JsonRowDeserializationSchema.builder().type_info(Types.ROW([Types.INT()])).ignore_parse_errors() \\
    ...     .build()
    >>> lenient.deserialize(b'{"f0": "x"}'), lenient.deserialize(b'not json')
    (Row(f0=None), None)
    """

    def __init__(self, type_info: TypeInformation, fail_on_missing_field: bool = False,
                 ignore_parse_errors: bool = False):
        self.type_info = _row_type(type_info, "JsonRowDeserializationSchema")
        if fail_on_missing_field and ignore_parse_errors:
            raise ConfigurationError("JsonRowDeserializationSchema: fail_on_missing_field() and ignore_parse_errors() "
                                     "contradict each other (as in Flink): choose one.")
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors

    @staticmethod
    def builder() -> "JsonRowDeserializationSchema.Builder":
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        """PyFlink's builder: ``type_info(...)`` or ``json_schema(...)``, then the options, then ``build()``."""

        def __init__(self):
            self._type_info = None
            self._fail_on_missing_field = False
            self._ignore_parse_errors = False

        def type_info(self, type_info: TypeInformation) -> "JsonRowDeserializationSchema.Builder":
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str) -> "JsonRowDeserializationSchema.Builder":
            """The row type from a JSON Schema document (``type: object`` with ``properties``)."""
            if json_schema is None:
                raise TypeError("json_schema should not be None.")
            self._type_info = _from_json_schema(json.loads(json_schema), "json_schema")
            return self

        def fail_on_missing_field(self) -> "JsonRowDeserializationSchema.Builder":
            self._fail_on_missing_field = True
            return self

        def ignore_parse_errors(self) -> "JsonRowDeserializationSchema.Builder":
            self._ignore_parse_errors = True
            return self

        def build(self) -> "JsonRowDeserializationSchema":
            if self._type_info is None:
                raise ConfigurationError("JsonRowDeserializationSchema.Builder: set the row type with type_info(...) "
                                         "or json_schema(...) before build().")
            return JsonRowDeserializationSchema(self._type_info, self._fail_on_missing_field,
                                                self._ignore_parse_errors)

    def deserialize(self, message: bytes) -> Row | None:
        try:
            parsed = json.loads(message)
        except ValueError as exc:
            if self.ignore_parse_errors:
                return None
            raise MalformedRecordError(f"Failed to deserialize JSON {bytes(message)[:200]!r}: {exc}. Fix the "
                                       "producer, or build the schema with ignore_parse_errors().") from None
        if not isinstance(parsed, dict):
            if self.ignore_parse_errors:
                return None
            raise MalformedRecordError(f"Failed to deserialize JSON {bytes(message)[:200]!r}: a row needs a JSON "
                                       "object.")
        values = []
        for name, field_type in zip(self.type_info.field_names, self.type_info.fields):
            if name not in parsed and self.fail_on_missing_field:
                raise MalformedRecordError(f"Could not find field with name '{name}' in JSON "
                                           f"{bytes(message)[:200]!r} (fail_on_missing_field is set).")
            try:
                values.append(from_text(parsed.get(name), field_type))
            except (ValueError, TypeError, ArithmeticError) as exc:
                if not self.ignore_parse_errors:
                    raise MalformedRecordError(f"Failed to deserialize JSON {bytes(message)[:200]!r}: field '{name}' "
                                               f"is not {field_type!r} ({exc}).") from None
                values.append(None)
        return Row.of(self.type_info.field_names, values)


class JsonRowSerializationSchema(SerializationSchema):
    """A Row (or tuple, by position, or dict, by name) of ``type_info`` to the bytes of a JSON object.

    >>> from runtime.types import Types
    >>> schema = JsonRowSerializationSchema.builder().with_type_info(Types.ROW([Types.INT(), Types.STRING()])).build()
    >>> schema.serialize((1, "hi"))
    b'{"f0":1,"f1":"hi"}'
    """

    def __init__(self, type_info: TypeInformation):
        self.type_info = _row_type(type_info, "JsonRowSerializationSchema")

    @staticmethod
    def builder() -> "JsonRowSerializationSchema.Builder":
        return JsonRowSerializationSchema.Builder()

    class Builder:
        def __init__(self):
            self._type_info = None

        def with_type_info(self, type_info: TypeInformation) -> "JsonRowSerializationSchema.Builder":
            self._type_info = type_info
            return self

        def build(self) -> "JsonRowSerializationSchema":
            if self._type_info is None:
                raise TypeError("Typeinfo should be set.")
            return JsonRowSerializationSchema(self._type_info)

    def serialize(self, element) -> bytes:
        names = self.type_info.field_names
        if isinstance(element, dict):
            values = [element.get(name) for name in names]
        else:
            values = list(element)
            if len(values) != len(names):
                raise MalformedRecordError(f"JsonRowSerializationSchema: {element!r:.200} has {len(values)} fields, "
                                           f"the row type {len(names)} ({', '.join(names)}).")
        return json.dumps({name: to_text_value(v) for name, v in zip(names, values)},
                          separators=(",", ":"), ensure_ascii=False).encode()


_JSON_SCHEMA_TYPES = {"string": Types.STRING, "integer": Types.LONG, "number": Types.DOUBLE,
                      "boolean": Types.BOOLEAN}


def _from_json_schema(schema: dict, where: str) -> TypeInformation:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["null", "string"]: nullable, every type is here
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object":
        properties = schema.get("properties") or {}
        return Types.ROW_NAMED(list(properties), [_from_json_schema(p, f"{where}.{n}") for n, p in properties.items()])
    if kind == "array":
        return Types.LIST(_from_json_schema(schema.get("items") or {"type": "string"}, f"{where}[]"))
    if kind == "string" and schema.get("format") == "date-time":
        return Types.SQL_TIMESTAMP()
    if kind == "string" and schema.get("format") == "date":
        return Types.SQL_DATE()
    if kind in _JSON_SCHEMA_TYPES:
        return _JSON_SCHEMA_TYPES[kind]()
    raise ConfigurationError(f"JSON schema at {where}: type {kind!r} is not one Chandy maps to a field type (object, "
                             "array, string, integer, number, boolean).")
