"""Avro generic records (dicts) in Parquet files, laid out as parquet-avro (Flink's ``AvroParquetWriters``) lays
them out: a record is a group of its fields, an array a list, a map a map of strings, an enum a string, and a
union of several types other than null a group of ``member0``, ``member1``, ... of which one is set.

:class:`AvroRecords` converts records to Arrow batches for ``ParquetWriterFactory`` (each record checked against
the schema first, by fastavro), and :class:`AvroShape` makes the records of a Parquet file back into dicts.

>>> import fastavro
>>> schema = fastavro.parse_schema({"type": "record", "name": "T", "fields": [
...     {"name": "id", "type": "long"}, {"name": "value", "type": ["null", "int", "string"]},
...     {"name": "tags", "type": {"type": "map", "values": "long"}}]})
>>> records = AvroRecords(schema, "AvroParquetWriters")
>>> records.schema.field("value").type
StructType(struct<member0: int32, member1: string>)
>>> batch = records.to_batch([{"id": 1, "value": "x", "tags": {"a": 1}}, {"id": 2, "value": None, "tags": {}}])
>>> batch.column("value").to_pylist()
[{'member0': None, 'member1': 'x'}, None]
>>> [records.record_of(row) for row in batch.to_pylist()]
[{'id': 1, 'value': 'x', 'tags': {'a': 1}}, {'id': 2, 'value': None, 'tags': {}}]
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

from operators.file_formats.parquet import RecordShape
from runtime.datastream.formats._avro_files import check_record
from runtime.errors import ConfigurationError, RecordEncodingError

__all__ = ["AvroRecords", "AvroShape"]

_PRIMITIVES = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
               "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
_UTC = "+00:00"  # Arrow hands these back as datetime.timezone.utc
_LOGICAL = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
            "timestamp-millis": pa.timestamp("ms", tz=_UTC), "timestamp-micros": pa.timestamp("us", tz=_UTC),
            "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us"),
            "uuid": pa.string()}


class AvroRecords:
    """Generic records of the parsed Avro record ``schema`` and Arrow batches of :attr:`schema` (its Parquet
    layout), both ways; ``where`` names the writer in messages."""

    def __init__(self, schema: dict, where: str):
        self.avro = schema
        self.where = where
        self.named = schema.get("__named_schemas", {})
        self.schema = pa.schema([self._field(field) for field in schema["fields"]])

    # -- the layout ----------------------------------------------------------------------------------------

    def _resolve(self, schema):
        return self.named.get(schema, schema) if isinstance(schema, str) else schema

    def _field(self, field: dict) -> pa.Field:
        return pa.field(field["name"], self._arrow(field["type"]), _nullable(field["type"]))

    def _arrow(self, schema) -> pa.DataType:
        schema = self._resolve(schema)
        if isinstance(schema, str):
            if schema not in _PRIMITIVES:
                raise ConfigurationError(f"{self.where}: the Avro type {schema!r} is not defined in the schema.")
            return _PRIMITIVES[schema]
        if isinstance(schema, list):
            branches = _non_null(schema)
            if len(branches) == 1:
                return self._arrow(branches[0])
            return pa.struct([pa.field(f"member{i}", self._arrow(branch)) for i, branch in enumerate(branches)])
        kind, logical = schema["type"], schema.get("logicalType")
        if logical == "decimal":
            precision, scale = schema["precision"], schema.get("scale", 0)
            return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        if logical in _LOGICAL:
            return _LOGICAL[logical]
        if kind == "record":
            return pa.struct([self._field(field) for field in schema["fields"]])
        if kind == "enum":
            return pa.string()
        if kind == "fixed":
            return pa.binary(schema["size"])
        if kind == "array":
            return pa.list_(pa.field("element", self._arrow(schema["items"]), _nullable(schema["items"])))
        if kind == "map":
            return pa.map_(pa.string(), pa.field("value", self._arrow(schema["values"]), _nullable(schema["values"])))
        return self._arrow(kind)

    # -- records to Arrow ------------------------------------------------------------------------------------

    def to_batch(self, records: list) -> pa.RecordBatch:
        for record in records:
            check_record(record, self.avro, self.where)
        rows = [self._to_arrow(record, self.avro) for record in records]
        try:
            return pa.RecordBatch.from_pylist(rows, schema=self.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            raise RecordEncodingError(f"{self.where}: a record of {records!r:.200} does not fit the Parquet layout of "
                                      f"the Avro schema {self.avro.get('name')}: {exc}. Fix the records (a map "
                                      "before the sink), or the schema.") from exc

    def _to_arrow(self, value, schema):
        schema = self._resolve(schema)
        if value is None:
            return None
        if isinstance(schema, list):
            branches = _non_null(schema)
            if len(branches) == 1:
                return self._to_arrow(value, branches[0])
            chosen = next((i for i, branch in enumerate(branches) if self._fits(value, branch)), 0)
            return {f"member{i}": self._to_arrow(value, branch) if i == chosen else None
                    for i, branch in enumerate(branches)}
        if isinstance(schema, dict):
            kind = schema["type"]
            if kind == "record":
                return {field["name"]: self._to_arrow(value.get(field["name"], field.get("default")), field["type"])
                        for field in schema["fields"]}
            if kind == "array":
                return [self._to_arrow(item, schema["items"]) for item in value]
            if kind == "map":
                return {key: self._to_arrow(item, schema["values"]) for key, item in value.items()}
        return value

    def _fits(self, value, branch) -> bool:
        """Whether ``value`` is of the union branch ``branch`` (the record was checked whole already)."""
        branch = self._resolve(branch)
        kind = branch if isinstance(branch, str) else branch["type"]
        logical = branch.get("logicalType") if isinstance(branch, dict) else None
        if logical == "decimal":
            return isinstance(value, decimal.Decimal)
        if logical in ("date",):
            return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
        if logical and logical.startswith(("timestamp", "local-timestamp")):
            return isinstance(value, datetime.datetime)
        if logical and logical.startswith("time-"):
            return isinstance(value, datetime.time)
        checks = {"boolean": lambda v: isinstance(v, bool),
                  "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
                  "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
                  "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                  "double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                  "string": lambda v: isinstance(v, str),
                  "bytes": lambda v: isinstance(v, (bytes, bytearray)),
                  "enum": lambda v: isinstance(v, str) and v in branch["symbols"],
                  "fixed": lambda v: isinstance(v, (bytes, bytearray)) and len(v) == branch["size"],
                  "record": lambda v: isinstance(v, dict) and set(v) <= {f["name"] for f in branch["fields"]},
                  "map": lambda v: isinstance(v, dict),
                  "array": lambda v: isinstance(v, (list, tuple))}
        return checks.get(kind, lambda v: False)(value)

    # -- Arrow to records ------------------------------------------------------------------------------------

    def record_of(self, row: dict) -> dict:
        """A row of a Parquet file (as Arrow's ``to_pylist`` gives it) as a generic record of the schema."""
        return self._from_arrow(row, self.avro)

    def _from_arrow(self, value, schema):
        schema = self._resolve(schema)
        if value is None:
            return None
        if isinstance(schema, list):
            branches = _non_null(schema)
            if len(branches) == 1:
                return self._from_arrow(value, branches[0])
            if isinstance(value, dict) and set(value) == {f"member{i}" for i in range(len(branches))}:
                for i, branch in enumerate(branches):
                    if value[f"member{i}"] is not None:
                        return self._from_arrow(value[f"member{i}"], branch)
                return None
            return value
        if isinstance(schema, dict):
            kind = schema["type"]
            if kind == "record":
                return {field["name"]: self._from_arrow(value.get(field["name"], field.get("default")), field["type"])
                        for field in schema["fields"]}
            if kind == "array":
                return [self._from_arrow(item, schema["items"]) for item in value]
            if kind == "map":
                pairs = value.items() if isinstance(value, dict) else value
                return {key: self._from_arrow(item, schema["values"]) for key, item in pairs}
        return value


def _non_null(union: list) -> list:
    return [branch for branch in union if branch != "null"]


def _nullable(schema) -> bool:
    return schema == "null" or (isinstance(schema, list) and "null" in schema)


class AvroShape(RecordShape):
    """Generic records of the parsed Avro record ``schema`` from a Parquet file: its fields' columns (a field the
    file lacks takes its default, or None), made back into dicts.

    >>> import fastavro
    >>> AvroShape(fastavro.parse_schema({"type": "record", "name": "T", "fields": []}))
    AvroShape('T')
    """

    def __init__(self, schema: dict):
        self.avro = schema

    def __repr__(self) -> str:
        return f"AvroShape({self.avro.get('name')!r})"

    def plan(self, file, path):
        records = AvroRecords(self.avro, "AvroParquetReaders")
        present = set(file.schema_arrow.names)
        columns = [field["name"] for field in self.avro["fields"] if field["name"] in present]

        def to_records(batch: pa.RecordBatch) -> list:
            return [records.record_of(row) for row in batch.to_pylist()]

        return columns, to_records
