"""Records and Arrow record batches of a declared schema, both ways: what the Parquet and ORC part writers and the
Parquet reader use.

:class:`RowConverter` takes Rows (by field name when they have names), tuples and lists (by position) and dicts
(by name), and checks every value against its field's type, so a record that does not fit fails where it is
written, naming the field and the value. :func:`rows_of` turns a batch back into Rows.

>>> import datetime, decimal
>>> schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("price", pa.decimal128(4, 1)),
...                     pa.field("tags", pa.list_(pa.string()))])
>>> converter = RowConverter(schema, "ParquetBulkWriters")
>>> batch = converter.to_batch([Row(id=1, price=decimal.Decimal("2.25"), tags=["a"]), (2, None, [])])
>>> rows_of(batch)
[Row(id=1, price=Decimal('2.3'), tags=['a']), Row(id=2, price=None, tags=[])]
>>> converter.to_batch([Row(id="one", price=None, tags=None)])
Traceback (most recent call last):
...
runtime.errors.RecordEncodingError: ParquetBulkWriters: the record Row(id='one', price=None, tags=None) does not fit
the row type: field 'id' (int32) cannot hold 'one' (str): ... Fix the records (a map before the sink), or the row type.
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

from runtime.errors import RecordEncodingError
from runtime.types import Row

__all__ = ["RowConverter", "rows_of", "python_values"]


class RowConverter:
    """Records to Arrow record batches of ``schema``; ``where`` (the writer's name) and ``type_names`` (how the
    user declared each field's type, such as ``INT``) make the messages."""

    def __init__(self, schema: pa.Schema, where: str, type_names: list[str] | None = None):
        self.schema = schema
        self.where = where
        self.names = tuple(schema.names)
        self.type_names = type_names or [str(field.type) for field in schema]
        self._prepared = [_needs_preparing(field.type) for field in schema]

    def to_batch(self, records: list) -> pa.RecordBatch:
        values = [self._values(record) for record in records]
        columns = list(zip(*values)) if values else [()] * len(self.names)
        arrays = [self._column(list(column), index, records) for index, column in enumerate(columns)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _values(self, record) -> list:
        names = self.names
        if isinstance(record, Row):
            fields = record._fields
            if fields is None or fields == names:
                values = record._values
            elif set(names) <= set(fields):
                values = record.get_fields_by_names(names)
            else:
                missing = [name for name in names if name not in fields]
                raise self._misfit(record, f"it has no field {missing[0]!r} (its fields are {list(fields)}; the "
                                           f"row type's are {list(names)})")
        elif isinstance(record, (tuple, list)):
            values = record
        elif isinstance(record, dict):
            return [record.get(name) for name in names]
        else:
            raise self._misfit(record, f"a Row, a tuple of the {len(names)} fields {list(names)} in order, or a "
                                       f"dict by field name was expected, not {type(record).__name__}")
        if len(values) != len(names):
            raise self._misfit(record, f"it has {len(values)} fields where the row type has {len(names)}: "
                                       f"{list(names)}")
        return values

    def _column(self, values: list, index: int, records: list) -> pa.Array:
        field = self.schema.field(index)
        if not field.nullable and None in values:
            record = records[values.index(None)]
            raise self._misfit(record, f"field {field.name!r} ({self.type_names[index]}) is NOT NULL, and the "
                                       "record has None there")
        misfit = _misfit_time(values, field.type)
        if misfit is not None:
            raise self._misfit(records[values.index(misfit)],
                               self._cannot_hold(index, misfit, _time_hint(field.type)))
        try:
            prepared = [_prepare(value, field.type) for value in values] if self._prepared[index] else values
            return pa.array(prepared, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError, ArithmeticError):
            pass
        for position, value in enumerate(values):  # the first value that does not fit, for the message
            try:
                pa.array([_prepare(value, field.type)], type=field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError, ArithmeticError) as exc:
                raise self._misfit(records[position], self._cannot_hold(index, value, str(exc))) from exc
        raise self._misfit(records[0], f"field {field.name!r} ({self.type_names[index]}) cannot hold its values")

    def _cannot_hold(self, index: int, value, why: str) -> str:
        field = self.schema.field(index)
        return (f"field {field.name!r} ({self.type_names[index]}) cannot hold {value!r:.100} "
                f"({type(value).__name__}): {why}")

    def _misfit(self, record, detail: str) -> RecordEncodingError:
        return RecordEncodingError(f"{self.where}: the record {record!r:.200} does not fit the row type: {detail}. "
                                   "Fix the records (a map before the sink), or the row type.")


def _needs_preparing(arrow_type: pa.DataType) -> bool:
    """Whether values of ``arrow_type`` need changing before Arrow takes them (Rows in structs, decimals)."""
    if pa.types.is_struct(arrow_type):
        return True
    if pa.types.is_decimal(arrow_type):
        return True
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _needs_preparing(arrow_type.value_type)
    if pa.types.is_map(arrow_type):
        return _needs_preparing(arrow_type.key_type) or _needs_preparing(arrow_type.item_type)
    return False


def _prepare(value, arrow_type: pa.DataType):
    """``value`` as Arrow takes it for ``arrow_type``: a Row of a struct as a dict (or its values in order), a
    number of a decimal rounded half up to the decimal's scale (as Flink writes a DECIMAL)."""
    if value is None:
        return None
    if pa.types.is_decimal(arrow_type):
        if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int, float)):
            return value  # Arrow refuses it, and the message names it
        exponent = decimal.Decimal(1).scaleb(-arrow_type.scale)
        return decimal.Decimal(value).quantize(exponent, rounding=decimal.ROUND_HALF_UP)
    if pa.types.is_struct(arrow_type):
        if isinstance(value, Row):
            value = value.as_dict() if value._fields is not None else list(value)
        if isinstance(value, dict):
            return {field.name: _prepare(value.get(field.name), field.type) for field in arrow_type}
        if isinstance(value, (list, tuple)) and len(value) == arrow_type.num_fields:
            return {field.name: _prepare(v, field.type) for field, v in zip(arrow_type, value)}
        return value
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        if isinstance(value, (list, tuple)):
            return [_prepare(v, arrow_type.value_type) for v in value]
        return value
    if pa.types.is_map(arrow_type):
        pairs = value.items() if isinstance(value, dict) else value
        return [(_prepare(k, arrow_type.key_type), _prepare(v, arrow_type.item_type)) for k, v in pairs]
    return value


def _misfit_time(values: list, arrow_type: pa.DataType):
    """The first value Arrow would silently change for ``arrow_type``: an aware datetime for a naive timestamp
    (or the other way round), a datetime for a date. None if there is none."""
    if pa.types.is_timestamp(arrow_type):
        aware = arrow_type.tz is not None
        return next((v for v in values if v is not None and (not isinstance(v, datetime.datetime)
                                                             or (v.tzinfo is not None) is not aware)), None)
    if pa.types.is_date(arrow_type):
        return next((v for v in values if isinstance(v, datetime.datetime)), None)
    return None


def _time_hint(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is None:
        return ("a timestamp without time zone takes naive datetime.datetime values (a wall-clock time); declare a "
                "timestamp with local time zone (TIMESTAMP_LTZ) for points in time")
    if pa.types.is_timestamp(arrow_type):
        return ("a timestamp with local time zone takes timezone-aware datetime.datetime values (a point in time; "
                "value.replace(tzinfo=timezone.utc) for a naive one in UTC)")
    return "a date takes datetime.date values: value.date() of a datetime"


def python_values(array: pa.Array) -> list:
    """The Python values of ``array``: structs as Rows named by their fields, maps as dicts.

    >>> python_values(pa.array([{"k": 1, "m": [("a", 2)]}],
    ...                        pa.struct([("k", pa.int8()), ("m", pa.map_(pa.string(), pa.int8()))])))
    [Row(k=1, m={'a': 2})]
    """
    return [_python(value, array.type) for value in array.to_pylist()] if _needs_python(array.type) \
        else array.to_pylist()


def _needs_python(arrow_type: pa.DataType) -> bool:
    if pa.types.is_struct(arrow_type) or pa.types.is_map(arrow_type):
        return True
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _needs_python(arrow_type.value_type)
    return False


def _python(value, arrow_type: pa.DataType):
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return Row.of([f.name for f in arrow_type], [_python(value[f.name], f.type) for f in arrow_type])
    if pa.types.is_map(arrow_type):
        return {_python(k, arrow_type.key_type): _python(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_python(v, arrow_type.value_type) for v in value]
    return value


def rows_of(batch: pa.RecordBatch | pa.Table) -> list[Row]:
    """The rows of ``batch`` as Rows named by its columns."""
    names = tuple(batch.schema.names)
    columns = [python_values(column) for column in batch.columns]
    return [Row.of(names, list(values)) for values in zip(*columns)] if columns else [Row.of((), [])] * batch.num_rows
