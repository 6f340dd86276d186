"""PyFlink's ``pyflink.datastream.formats.avro``, on ``fastavro``: Avro data files of generic records (dicts by field
name) for ``FileSink`` and ``env.create_input``, and Avro's binary encoding of one record to a
:class:`~runtime.types.Row` and back, for messages.

Files: :class:`AvroSchema` parses a schema; ``FileSink.for_bulk_format(path,
AvroBulkWriters.for_generic_record(schema))`` writes Avro data files, ``env.create_input(AvroInputFormat(path,
schema))`` reads them (a bounded stream of dicts). Records that do not fit the schema fail where they are written,
naming the field and the value.

>>> import fsspec
>>> from operators.file_sink import FileSink
>>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": ['
...                                  '{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]}')
>>> sink = FileSink("memory://avro-doc/users", format=AvroBulkWriters.for_generic_record(schema)); sink.validate()
>>> writer = sink.create_writer(subtask_index=0, parallelism=1); writer.open(None)
>>> writer.write_batch([{"name": "ann", "age": 31}, {"name": "bo", "age": None}])
>>> _ = writer.snapshot_state(checkpoint_id=1); writer.notify_checkpoint_complete(1)
>>> reader = AvroInputFormat("memory://avro-doc/users", schema).as_source().create_reader(0, 1)
>>> reader.open(None); reader.poll(10)
[{'name': 'ann', 'age': 31}, {'name': 'bo', 'age': None}]

Messages:

The schema is the Avro schema's JSON text; the Row's fields are the record's, in the schema's order (nested
records are Rows too). The serializer takes a Row or tuple by position (as Flink's does: a ``Types.ROW([...])``
stream's ``f0, f1`` fill the schema's first and second fields) or a dict by name. Messages are plain Avro binary,
without a schema registry's header.

>>> schema = '{"type": "record", "name": "T", "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}'
>>> data = AvroRowSerializationSchema(avro_schema_string=schema).serialize((1, "hi"))
>>> data, AvroRowDeserializationSchema(avro_schema_string=schema).deserialize(data)
(b'\\x02\\x04hi', Row(id=1, name='hi'))
"""

from __future__ import annotations

import io
import json

import os

import pyarrow as pa

from operators.file_source import FileSource
from runtime.common.serialization import BulkWriterFactory, DeserializationSchema, SerializationSchema
from runtime.datastream.formats._avro_files import AvroFileFormat, AvroFileWriterFactory
from runtime.errors import ApiUsageError, ConfigurationError, MalformedRecordError
from runtime.types import Row, TypeInformation

__all__ = ["AvroSchema", "GenericRecordAvroTypeInfo", "AvroInputFormat", "AvroBulkWriters",
           "AvroRowDeserializationSchema", "AvroRowSerializationSchema"]


def _parsed_schema(record_class: str | None, avro_schema_string: str | None, where: str):
    if record_class is not None:
        raise ConfigurationError(f"{where}(record_class={record_class!r}): record_class names a Java SpecificRecord "
                                 "class, which Chandy cannot load; pass avro_schema_string=<the class's Avro schema "
                                 "as JSON> instead.")
    if avro_schema_string is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    return _parsed_record_schema(avro_schema_string, where)


def _parsed_record_schema(text: str, where: str) -> dict:
    """The Avro record schema of the JSON ``text``, parsed by fastavro; a ConfigurationError says what is wrong."""
    import fastavro

    try:
        schema = fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as exc:
        raise ConfigurationError(f"{where}: the Avro schema does not parse ({exc}).") from None
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if kind != "record":
        raise ConfigurationError(f"{where}: the Avro schema must be a record (rows have fields), not {kind!r}.")
    return schema


class AvroSchema:
    """An Avro schema (PyFlink's ``AvroSchema``) of generic records: a record schema, parsed by fastavro. Make one
    with :meth:`parse_string` or :meth:`parse_file`; ``str()`` gives its JSON.

    >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
    >>> schema, str(schema)
    (AvroSchema('User'), '{"type": "record", "name": "User", "fields": []}')
    >>> AvroSchema.parse_string('{"type": "recrd"}')
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: AvroSchema.parse_string: the Avro schema does not parse (...).
    """

    def __init__(self, schema: str, where: str = "AvroSchema"):
        self._text = schema
        self._parsed = _parsed_record_schema(schema, where)

    @staticmethod
    def parse_string(json_schema: str) -> "AvroSchema":
        """The schema written as JSON in ``json_schema``."""
        return AvroSchema(json_schema, "AvroSchema.parse_string")

    @staticmethod
    def parse_file(file_path: str) -> "AvroSchema":
        """The schema in the file ``file_path`` (an ``.avsc`` file: the schema as JSON)."""
        try:
            with open(os.fspath(file_path), encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise ConfigurationError(f"AvroSchema.parse_file({file_path!r}): cannot read the file "
                                     f"({type(exc).__name__}: {exc}).") from None
        return AvroSchema(text, f"AvroSchema.parse_file({file_path!r})")

    @property
    def name(self) -> str:
        """The record's full name."""
        return self._parsed["name"]

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"AvroSchema({self.name!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, AvroSchema) and self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __getstate__(self):
        return {"text": self._text}

    def __setstate__(self, state):
        self.__init__(state["text"])


def avro_schema_of(schema, where: str) -> AvroSchema:
    """``schema`` if it is an AvroSchema; else an ApiUsageError saying how to make one."""
    if not isinstance(schema, AvroSchema):
        raise ApiUsageError(f"{where} expects an AvroSchema (AvroSchema.parse_string(json) or "
                            f"AvroSchema.parse_file(path)), got {type(schema).__name__}.")
    return schema


class GenericRecordAvroTypeInfo(TypeInformation):
    """The type of a stream of generic records of ``schema`` (PyFlink's): dicts, which travel pickled. Chandy's
    Avro writers take records of any declared type, so declaring it is optional.

    >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
    >>> GenericRecordAvroTypeInfo(schema), GenericRecordAvroTypeInfo(schema).schema
    (GenericRecordAvroTypeInfo('User'), AvroSchema('User'))
    """

    def __init__(self, schema: AvroSchema):
        schema = avro_schema_of(schema, "GenericRecordAvroTypeInfo(schema)")
        super().__init__(f"GenericRecordAvroTypeInfo({schema.name!r})", pa.binary())
        object.__setattr__(self, "schema", schema)


class AvroInputFormat:
    """Avro data files as generic records, for ``env.create_input(AvroInputFormat(path, schema))`` (PyFlink's): a
    bounded stream of dicts. ``path`` is a file, a directory (its files, hidden ones aside) or a glob, on any fsspec
    filesystem; each file is read with ``schema`` as Avro's reader schema, exactly once across failures.

    >>> AvroInputFormat("users/", AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}'))
    AvroInputFormat('users/', AvroSchema('User'))
    """

    def __init__(self, path: str, schema: AvroSchema):
        self.path = os.fspath(path)
        self.schema = avro_schema_of(schema, "AvroInputFormat(path, schema)")

    def get_produced_type(self) -> GenericRecordAvroTypeInfo:
        return GenericRecordAvroTypeInfo(self.schema)

    def as_source(self) -> FileSource:
        """The bounded source reading the files (what ``env.create_input`` reads from)."""
        return FileSource(self.path, format=AvroFileFormat(self.schema._parsed))

    def __repr__(self) -> str:
        return f"AvroInputFormat({self.path!r}, {self.schema!r})"


class AvroBulkWriters:
    """Makes the writer factory of Avro data files for ``FileSink.for_bulk_format`` (PyFlink's name).

    >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
    >>> AvroBulkWriters.for_generic_record(schema)
    AvroFileWriterFactory('User')
    """

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> BulkWriterFactory:
        """Writes generic records (dicts by field name) of ``schema`` into Avro data files, one per part."""
        schema = avro_schema_of(schema, "AvroBulkWriters.for_generic_record(schema)")
        return AvroFileWriterFactory(schema._parsed, "AvroBulkWriters")


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
