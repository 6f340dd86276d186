"""Records <-> Arrow record batches, per edge.

Measured here (4096-record batches, encode + decode per record): pickling the whole batch into one
``large_binary`` value costs ~170 ns; pickling each record into its own row ~4 us; a typed ``int64`` column
~50 ns; typed columns for tuples ~450 ns (building Python tuples back from columns dominates). So scalar-typed
edges travel as typed Arrow columns, and everything else as one pickled value per batch. cloudpickle, not
pickle, so records of classes defined in the user's ``__main__`` survive the trip.

Rows (edges declared ``Types.ROW``/``ROW_NAMED``) arrive as :class:`~runtime.types.Row` values. Pickling the
Row objects themselves costs ~3.3 us per 4-field record (cloudpickle reduces each one in Python), so their
values travel instead: as typed Arrow columns, checked against the field types, when every field comes back
from Arrow unchanged (~0.9 us; the same as pickling lists of values, ~0.95 us), else as pickled lists of
values. Building the Rows back (~0.3 us) dominates. Times (``SQL_TIMESTAMP``, ``INSTANT``, ``SQL_DATE``,
``SQL_TIME``) come back through numpy: Arrow's own conversion costs 1.4 us per naive datetime and 4.8 us per
aware one, against ~0.3 and ~0.6 us encode + decode here (~2.2 us to pickle a datetime with cloudpickle).

Columnar edges (streams of Arrow record batches, see :mod:`operators.columnar`) need no encoding at all:
their batches are the wire format (:class:`ColumnarCodec`).

Event timestamps travel as a nullable ``int64`` column beside a typed column, and inside the pickled batch
otherwise. Events (end of input, checkpoint barriers, watermarks; see :mod:`runtime.protocol.events`) travel in the same stream as
zero-row batches, so they stay ordered with the records of their channel.

>>> from runtime.types import Types
>>> typed, pickled = RecordCodec(Types.LONG()), RecordCodec(None)
>>> typed.encode([1, 2, 3]).schema.types, typed.decode(typed.encode([1, 2, 3]))
([DataType(int64), DataType(int64)], [1, 2, 3])
>>> typed.decode(typed.encode(TimestampedBatch.of([7], [1_000])))   # event timestamps: a second column
TimestampedBatch([7], timestamps=[1000])
>>> batch = pickled.encode([("a", 1), ("b", 2)])
>>> batch.num_rows, pickled.decode(batch)  # one pickled value for the whole batch
(1, [('a', 1), ('b', 2)])
"""

from __future__ import annotations

import pickle
from datetime import date as _date
from datetime import datetime as _datetime
from datetime import time as _time
from datetime import timezone as _timezone

import cloudpickle
import pyarrow as pa

from runtime.errors import RecordEncodingError
from runtime.protocol.records import TimestampedBatch, timestamps_of
from runtime.types import Row, RowKind, TypeInformation, _create_row

__all__ = ["RecordCodec", "ColumnarCodec", "codec_for"]


def _picklable(record) -> bool:
    try:
        cloudpickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        return True
    except Exception:
        return False


def _columnar(arrow_type: pa.DataType) -> bool:
    """Whether values of ``arrow_type`` come back from an Arrow column as the same Python values."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _columnar(arrow_type.value_type)
    # structs come back as dicts and maps as lists of pairs; binary is the mark of a pickled value
    return not (pa.types.is_struct(arrow_type) or pa.types.is_map(arrow_type) or pa.types.is_binary(arrow_type)
                or pa.types.is_large_binary(arrow_type))


def _misfit_time(values: list, arrow_type: pa.DataType):
    """The first of ``values`` that Arrow would convert to ``arrow_type`` by changing it (or None): Arrow reads
    an int as a count of units, turns an aware datetime naive, drops a datetime's time from a date."""
    if pa.types.is_timestamp(arrow_type):
        aware = arrow_type.tz is not None
        for value in values:
            if value is None:
                continue
            if type(value) is not _datetime and not isinstance(value, _datetime):
                return value
            if (value.tzinfo is not None) is not aware:
                return value
    elif pa.types.is_date(arrow_type):
        for value in values:
            if value is not None and (type(value) is not _date and (not isinstance(value, _date)
                                                                    or isinstance(value, _datetime))):
                return value
    elif pa.types.is_time(arrow_type):
        for value in values:
            if value is not None and (not isinstance(value, _time) or value.tzinfo is not None):
                return value
    return None


_EPOCH = _datetime(1970, 1, 1)
_EPOCH_UTC = _datetime(1970, 1, 1, tzinfo=_timezone.utc)


def _pylist(array: pa.Array) -> list:
    """``array.to_pylist()``, only faster for the time types of :class:`~runtime.types.Types`.

    Arrow builds datetimes, dates and times one by one (~1.4 us each, ~4.8 us with a time zone); numpy builds
    naive datetimes and dates in C (~40 ns), from which the rest follow by arithmetic.
    """
    arrow_type = array.type
    try:
        if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "us":
            if arrow_type.tz is None:
                return array.to_numpy(zero_copy_only=False).astype(object).tolist()
            if arrow_type.tz == "+00:00":
                naive = array.cast(pa.timestamp("us")).to_numpy(zero_copy_only=False).astype(object).tolist()
                return [None if v is None else _EPOCH_UTC + (v - _EPOCH) for v in naive]  # replace() is slower
        elif pa.types.is_date32(arrow_type):
            return array.to_numpy(zero_copy_only=False).astype(object).tolist()
        elif pa.types.is_time64(arrow_type) and arrow_type.unit == "us":
            since_midnight = array.cast(pa.int64()).cast(pa.timestamp("us"))
            return [None if v is None else v.time()
                    for v in since_midnight.to_numpy(zero_copy_only=False).astype(object).tolist()]
    except ImportError:  # no numpy: Arrow's own conversion
        pass
    return array.to_pylist()


_TIMESTAMP_FIELD = pa.field("timestamp", pa.int64())  # event timestamps, epoch ms; null: none


def _timestamp_column(records: list) -> pa.Array:
    timestamps = timestamps_of(records)
    if timestamps is None:
        return pa.nulls(len(records), pa.int64())
    return pa.array(timestamps, pa.int64())


def _stamped(records: list, timestamps: pa.Array) -> list:
    """``records`` with the event timestamps of ``timestamps`` (a TimestampedBatch), or as they are if none."""
    if timestamps.null_count == len(timestamps):
        return records
    return TimestampedBatch.of(records, timestamps.to_pylist())


_TIME_TYPES = (pa.types.is_timestamp, pa.types.is_date, pa.types.is_time)
_TIME_HINTS = {
    "SQL_TIMESTAMP": "SQL_TIMESTAMP carries naive datetime.datetime values (a wall-clock time): emit naive "
                     "datetimes, or declare Types.INSTANT() for points in time",
    "INSTANT": "INSTANT carries timezone-aware datetime.datetime values (a point in time): emit aware datetimes "
               "(value.replace(tzinfo=timezone.utc) for a naive one in UTC), or declare Types.SQL_TIMESTAMP() "
               "for wall-clock times",
    "SQL_DATE": "SQL_DATE carries datetime.date values: emit value.date() for a datetime",
    "SQL_TIME": "SQL_TIME carries naive datetime.time values",
}


def _describe(value) -> str:
    return f"{value!r} ({type(value).__module__}.{type(value).__qualname__})"


class RecordCodec:
    """Encodes the records of one edge; both ends build it from the edge's declared type.

    On an edge declared ``Types.ROW(...)``/``Types.ROW_NAMED(...)``, records (Rows, or tuples and lists of
    the fields in order) arrive as :class:`~runtime.types.Row` values named as declared, with their
    :class:`~runtime.types.RowKind`; a named Row is read by name, so its fields may come in any order.

    >>> from runtime.types import Row, Types
    >>> codec = RecordCodec(Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()]))
    >>> codec.decode(codec.encode([Row(count=1, word="a"), ("b", 2)]))
    [Row(word='a', count=1), Row(word='b', count=2)]
    """

    def __init__(self, type_info: TypeInformation | None, operator_name: str = "?"):
        self.operator_name = operator_name
        self.type_info = type_info
        arrow_type = type_info.to_arrow() if type_info is not None else None
        self.rows = type_info is not None and type_info.is_row
        self.typed = arrow_type is not None and not self.rows and _columnar(arrow_type)
        if self.rows:
            self.names = type_info.field_names
            self.nested = [(i, RecordCodec(t, operator_name)) for i, t in enumerate(type_info.fields) if t.is_row]
            # Rows whose fields all come back from Arrow columns as they went travel as columns (and are
            # checked against the declared field types on the way); others as pickled lists of values.
            self.row_columns = not self.nested and all(_columnar(t.to_arrow()) for t in type_info.fields)
        if self.typed:
            self.arrow_type = arrow_type
            self.schema = pa.schema([pa.field("value", arrow_type), _TIMESTAMP_FIELD])
        elif self.rows and self.row_columns:
            self.schema = pa.schema([pa.field("value", arrow_type, nullable=False),
                                     pa.field("row_kind", pa.int8()), _TIMESTAMP_FIELD])
        else:
            self.schema = pa.schema([pa.field("pickled_batch", pa.large_binary())])
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)

    def encode(self, records: list) -> pa.RecordBatch:
        if self.typed:
            column = self._column(records, self.arrow_type, self.type_info)
            return pa.RecordBatch.from_arrays([column, _timestamp_column(records)], schema=self.schema)
        payload = records
        if self.rows:
            values, kinds = self._row_values(records)
            if self.row_columns:
                return self._encode_row_columns(values, kinds, _timestamp_column(records))
            payload = (values, kinds, timestamps_of(records))
        try:
            payload = cloudpickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise self._unpicklable(records, exc) from exc
        return pa.RecordBatch.from_arrays([pa.array([payload], type=pa.large_binary())], schema=self.schema)

    def as_rows(self, records: list) -> list:
        """``records`` of a row type as the next operator of the same chain gets them: Rows named as declared,
        as if they had crossed an edge (PyFlink hands Rows on every path). Checked as an edge checks them.

        >>> from runtime.types import Types
        >>> codec = RecordCodec(Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()]))
        >>> rows = codec.as_rows([(1, "a"), Row(info="b", id=2)])
        >>> rows, rows[0].info
        ([Row(id=1, info='a'), Row(id=2, info='b')], 'a')
        """
        names = self.names
        if not self.nested and all(type(r) is Row and r._fields is names for r in records):
            return records  # made by a codec or a chained operator already: nothing to do per record
        values, kinds = self._row_values(records)
        rows = [_create_row(names, v if type(v) is list else list(v), RowKind.INSERT) for v in values]
        for position, kind in (kinds or {}).items():
            rows[position]._row_kind = kind
        return records.with_records(rows) if isinstance(records, TimestampedBatch) else rows

    def _does_not_fit(self, detail: str) -> RecordEncodingError:
        return RecordEncodingError(
            f"Operator '{self.operator_name}' declared output_type={self.type_info!r} but emitted a record that "
            f"does not fit it ({detail}). Fix the records or the declared output_type.")

    def _column(self, values, arrow_type: pa.DataType, type_info: TypeInformation, field: str = "") -> pa.Array:
        where = f"field {field!r}: " if field else ""
        if any(is_type(arrow_type) for is_type in _TIME_TYPES):
            misfit = _misfit_time(values, arrow_type)
            if misfit is not None:
                hint = _TIME_HINTS.get(type_info.name, f"{type_info!r} carries {arrow_type} values")
                raise self._does_not_fit(f"{where}{_describe(misfit)}; {hint}")
        try:
            return pa.array(values, type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise self._does_not_fit(f"{where}{exc}") from exc

    def _row_values(self, records: list) -> tuple[list, dict | None]:
        """Each record's values in the declared field order, and ``{position: RowKind}`` of the records that
        are not inserts (None when all are)."""
        names, arity, insert = self.names, len(self.names), RowKind.INSERT
        out: list = []
        kinds: dict | None = None
        for position, record in enumerate(records):
            kind = type(record)
            if kind is Row:
                values, fields = record._values, record._fields
                if fields is not names and fields is not None and fields != names:
                    values = self._reordered(record)
                if record._row_kind is not insert:
                    if kinds is None:
                        kinds = {}
                    kinds[position] = record._row_kind
            elif kind is tuple or kind is list or isinstance(record, (tuple, list)):
                values = record
            else:
                raise self._does_not_fit(f"{_describe(record)} where a Row, or a tuple of the {arity} fields "
                                         f"{list(names)} in order, was expected")
            if len(values) != arity:
                raise self._does_not_fit(f"{record!r} has {len(values)} fields where the declared type has "
                                         f"{arity}: {list(names)}")
            out.append(values)
        for index, codec in self.nested:
            for position, values in enumerate(out):
                if values[index] is not None:
                    out[position] = values = list(values)
                    values[index] = codec._as_row(values[index])
        return out, kinds

    def _reordered(self, record: Row) -> list:
        missing = [name for name in self.names if name not in record._fields]
        if missing or len(record._fields) != len(self.names):
            raise self._does_not_fit(f"{record!r} has the fields {list(record._fields)} where the declared type "
                                     f"has {list(self.names)}")
        return record.get_fields_by_names(self.names)

    def _as_row(self, value) -> Row:
        """A nested field's value as a Row named as declared."""
        values, kinds = self._row_values([value])
        return _create_row(self.names, list(values[0]), RowKind.INSERT if kinds is None else kinds[0])

    def _encode_row_columns(self, values: list, kinds: dict | None, timestamps: pa.Array) -> pa.RecordBatch:
        type_info, count = self.type_info, len(values)
        columns = list(zip(*values)) if values else [()] * len(self.names)
        arrays = [self._column(column, field.type, field_type, field.name)
                  for column, field, field_type in zip(columns, type_info.to_arrow(), type_info.fields)]
        struct = pa.StructArray.from_arrays(arrays, fields=list(type_info.to_arrow()))
        if kinds is None:
            row_kinds = pa.nulls(count, pa.int8())
        else:
            row_kinds = pa.array([kinds[i].value if i in kinds else None for i in range(count)], pa.int8())
        return pa.RecordBatch.from_arrays([struct, row_kinds, timestamps], schema=self.schema)

    def _unpicklable(self, records: list, error: Exception) -> Exception:
        culprit = next((r for r in records if not _picklable(r)), None)
        if culprit is None:  # every record pickles on its own: not the records' fault (memory, say)
            return error
        what = f"a record of type {type(culprit).__module__}.{type(culprit).__qualname__}"
        return RecordEncodingError(
            f"Operator '{self.operator_name}' emitted {what} that cannot be pickled to reach the next operator "
            f"({type(error).__name__}: {error}). Records that cross to another subtask must be picklable: emit "
            "plain values (tuples, dicts, dataclasses), not objects holding locks, sockets, files or clients.")

    def decode(self, batch: pa.RecordBatch) -> list:
        if self.typed:
            return _stamped(_pylist(batch.column(0)), batch.column(1))
        if self.rows and self.row_columns:
            columns = [_pylist(field) for field in batch.column(0).flatten()]
            rows = [_create_row(self.names, list(values), RowKind.INSERT) for values in zip(*columns)]
            row_kinds = batch.column(1)
            if row_kinds.null_count < len(row_kinds):
                for row, kind in zip(rows, row_kinds.to_pylist()):
                    if kind is not None:
                        row._row_kind = RowKind(kind)
            return _stamped(rows, batch.column(2))
        batches = [self._unpickle(payload) for payload in batch.column(0).to_pylist()]
        if len(batches) == 1:  # as encode makes them: the batch as it was sent, a TimestampedBatch kept
            return batches[0]
        return [record for records in batches for record in records]

    def _unpickle(self, payload: bytes) -> list:
        if not self.rows:
            return pickle.loads(payload)
        values, kinds, timestamps = pickle.loads(payload)
        names, insert = self.names, RowKind.INSERT
        rows = [_create_row(names, v if type(v) is list else list(v), insert) for v in values]
        for position, kind in (kinds or {}).items():
            rows[position]._row_kind = kind
        return rows if timestamps is None else TimestampedBatch.of(rows, timestamps)


class ColumnarCodec:
    """The codec of a columnar edge: its records are Arrow record batches of ``schema`` already.

    >>> import pyarrow as pa
    >>> codec = ColumnarCodec(pa.schema([("value", pa.int64())]))
    >>> batch = codec.encode([pa.record_batch({"value": [1]}), pa.record_batch({"value": [2, 3]})])
    >>> batch.num_rows, codec.decode(batch) == [batch]
    (3, True)
    """

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.empty = pa.RecordBatch.from_pylist([], schema=schema)

    def encode(self, batches: list) -> pa.RecordBatch:
        if len(batches) == 1:
            return batches[0]
        return pa.Table.from_batches(batches, self.schema).combine_chunks().to_batches()[0]

    def decode(self, batch: pa.RecordBatch) -> list:
        return [batch]


def codec_for(type_info: TypeInformation | None, schema: pa.Schema | None, operator_name: str):
    """The codec of an edge: columnar when the edge carries Arrow batches of ``schema``."""
    if schema is not None:
        return ColumnarCodec(schema)
    return RecordCodec(type_info, operator_name)
