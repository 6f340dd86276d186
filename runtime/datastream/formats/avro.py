"""PyFlink's ``pyflink.datastream.formats.avro``: Avro's binary encoding of one record to a
:class:`~runtime.types.Row` and back, on ``fastavro``.

The schema is the Avro schema's JSON text; the Row's fields are the record's, in the schema's order (nested
records are Rows too). The serializer takes a Row or tuple by position (as Flink's does: a ``Types.ROW([...])``
stream's ``f0, f1`` fill the schema's first and second fields) or a dict by name. Messages are plain Avro binary,
without a schema registry's header.

>>> schema = '{"type": "record", "name": "T", "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}'
>>> data = AvroRowSerializationSchema(avro_schema_string=schema).serialize((1, "hi"))
>>> data, AvroRowDeserializationSchema(avro_schema_string=schema).deserialize(data)
(b'\\x02\\x04hi', Row(id=1, name='hi'))

(``AvroSchema``, ``GenericRecordAvroTypeInfo``, ``AvroInputFormat`` and ``AvroBulkWriters`` are PyFlink's wrappers
of Flink's Java Avro file formats, which Chandy does not run.)
"""

from __future__ import annotations

import io
import json

from runtime.common.serialization import DeserializationSchema, SerializationSchema
from runtime.errors import ConfigurationError, MalformedRecordError
from runtime.types import Row

__all__ = ["AvroRowDeserializationSchema", "AvroRowSerializationSchema"]


def _parsed_schema(record_class: str | None, avro_schema_string: str | None, where: str):
    import fastavro

    if record_class is not None:
        raise ConfigurationError(f"{where}(record_class={record_class!r}): record_class names a Java SpecificRecord "
                                 "class, which Chandy cannot load; pass avro_schema_string=<the class's Avro schema "
                                 "as JSON> instead.")
    if avro_schema_string is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    try:
        schema = fastavro.parse_schema(json.loads(avro_schema_string))
    except (ValueError, fastavro.schema.SchemaParseException) as exc:
        raise ConfigurationError(f"{where}: the Avro schema does not parse ({exc}).") from None
    if schema.get("type") != "record":
        raise ConfigurationError(f"{where}: the Avro schema must be a record (rows have fields), not "
                                 f"{schema.get('type')!r}.")
    return schema


def _named_types(schema, found: dict | None = None) -> dict:
    """Every named type (record, enum, fixed) of ``schema`` by its full name: later uses refer to it by name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            _named_types(branch, found)
    elif isinstance(schema, dict):
        if "name" in schema and schema.get("type") in ("record", "enum", "fixed"):
            found[schema["name"]] = schema
        for field in schema.get("fields", ()):
            _named_types(field["type"], found)
        for key in ("items", "values"):
            if key in schema:
                _named_types(schema[key], found)
    return found


class AvroRowDeserializationSchema(DeserializationSchema):
    """Avro binary to a Row with the schema's fields (Flink's ``AvroRowDeserializationSchema``)."""

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        self.avro_schema_string = avro_schema_string
        self._schema = _parsed_schema(record_class, avro_schema_string, "AvroRowDeserializationSchema")
        self._named = _named_types(self._schema)

    def __getstate__(self):
        return {"avro_schema_string": self.avro_schema_string}

    def __setstate__(self, state):
        self.__init__(avro_schema_string=state["avro_schema_string"])

    def deserialize(self, message: bytes) -> Row:
        import fastavro

        try:
            record = fastavro.schemaless_reader(io.BytesIO(message), self._schema, None)
        except Exception as exc:  # fastavro raises what the bytes make it raise
            raise MalformedRecordError(f"Failed to deserialize Avro record {bytes(message)[:100]!r} with schema "
                                       f"{self._schema.get('name')}: {type(exc).__name__}: {exc}.") from None
        return _rows(record, self._schema, self._named)


def _rows(value, schema, named: dict):
    """A decoded value as Rows where the schema has records."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):  # a union: the branch that fits the value
        for branch in schema:
            if _fits(value, named.get(branch, branch) if isinstance(branch, str) else branch):
                return _rows(value, branch, named)
        return value
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record" and isinstance(value, dict):
            names = [f["name"] for f in schema["fields"]]
            return Row.of(names, [_rows(value.get(f["name"]), f["type"], named) for f in schema["fields"]])
        if kind == "array" and isinstance(value, list):
            return [_rows(v, schema["items"], named) for v in value]
        if kind == "map" and isinstance(value, dict):
            return {k: _rows(v, schema["values"], named) for k, v in value.items()}
    return value


def _fits(value, branch) -> bool:
    kind = branch.get("type") if isinstance(branch, dict) else branch
    if value is None:
        return kind == "null"
    if kind == "record":
        return isinstance(value, dict)
    if kind in ("array",):
        return isinstance(value, list)
    if kind == "map":
        return isinstance(value, dict)
    return kind != "null"


class AvroRowSerializationSchema(SerializationSchema):
    """A Row or tuple (by position) or a dict (by name) to Avro binary (Flink's ``AvroRowSerializationSchema``)."""

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        self.avro_schema_string = avro_schema_string
        self._schema = _parsed_schema(record_class, avro_schema_string, "AvroRowSerializationSchema")
        self._named = _named_types(self._schema)

    def __getstate__(self):
        return {"avro_schema_string": self.avro_schema_string}

    def __setstate__(self, state):
        self.__init__(avro_schema_string=state["avro_schema_string"])

    def serialize(self, element) -> bytes:
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._schema, _record(element, self._schema, self._named))
        except (ValueError, TypeError, AttributeError) as exc:
            raise MalformedRecordError(f"AvroRowSerializationSchema: {element!r:.200} does not fit the Avro schema "
                                       f"{self._schema.get('name')}: {exc}.") from None
        return out.getvalue()


def _record(value, schema, named: dict):
    """``value`` as fastavro writes a record of ``schema``: a dict by field name."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):  # a union: null for None, else its first other branch (["null", X] is the usual)
        branches = [b for b in schema if (b == "null") == (value is None)]
        return _record(value, branches[0], named) if branches else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "record":
        fields = schema["fields"]
        if isinstance(value, dict):
            return {f["name"]: _record(value.get(f["name"]), f["type"], named) for f in fields}
        if isinstance(value, (Row, tuple, list)):
            values = list(value)
            if len(values) != len(fields):
                raise ValueError(f"{len(values)} fields for a record of {len(fields)}")
            return {f["name"]: _record(v, f["type"], named) for f, v in zip(fields, values)}
    if kind == "array" and isinstance(value, (list, tuple)):
        return [_record(v, schema["items"], named) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _record(v, schema["values"], named) for k, v in value.items()}
    return value
