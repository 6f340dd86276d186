"""Records <-> Arrow record batches, per edge.

Measured here (4096-record batches, encode + decode per record): pickling the whole batch into one
``large_binary`` value costs ~170 ns; pickling each record into its own row ~4 us; a typed ``int64`` column
~50 ns; typed columns for tuples ~450 ns (building Python tuples back from columns dominates). So scalar-typed
edges travel as typed Arrow columns, and everything else as one pickled value per batch. cloudpickle, not
pickle, so records of classes defined in the user's ``__main__`` survive the trip.

Columnar edges (streams of Arrow record batches, see :mod:`operators.columnar`) need no encoding at all:
their batches are the wire format (:class:`ColumnarCodec`).

Events (end of input, checkpoint barriers; see :mod:`runtime.protocol.events`) travel in the same stream as
zero-row batches, so they stay ordered with the records of their channel.

>>> from runtime.types import Types
>>> typed, pickled = RecordCodec(Types.LONG()), RecordCodec(None)
>>> typed.encode([1, 2, 3]).schema.types, typed.decode(typed.encode([1, 2, 3]))
([DataType(int64)], [1, 2, 3])
>>> batch = pickled.encode([("a", 1), ("b", 2)])
>>> batch.num_rows, pickled.decode(batch)  # one pickled value for the whole batch
(1, [('a', 1), ('b', 2)])
"""

from __future__ import annotations

import pickle

import cloudpickle
import pyarrow as pa

from runtime.errors import RecordEncodingError
from runtime.types import TypeInformation

__all__ = ["RecordCodec", "ColumnarCodec", "codec_for"]


def _picklable(record) -> bool:
    try:
        cloudpickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        return True
    except Exception:
        return False


class RecordCodec:
    """Encodes the records of one edge; both ends build it from the edge's declared type."""

    def __init__(self, type_info: TypeInformation | None, operator_name: str = "?"):
        self.operator_name = operator_name
        self.type_info = type_info
        arrow_type = type_info.to_arrow() if type_info is not None else None
        self.typed = arrow_type is not None and not (
            pa.types.is_struct(arrow_type) or pa.types.is_binary(arrow_type) or pa.types.is_map(arrow_type)
        )
        if self.typed:
            self.arrow_type = arrow_type
            self.schema = pa.schema([pa.field("value", arrow_type)])
        else:
            self.schema = pa.schema([pa.field("pickled_batch", pa.large_binary())])
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)

    def encode(self, records: list) -> pa.RecordBatch:
        if self.typed:
            try:
                column = pa.array(records, type=self.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
                raise RecordEncodingError(
                    f"Operator '{self.operator_name}' declared output_type={self.type_info!r} but emitted a "
                    f"record that does not fit it ({exc}). Fix the records or the declared output_type."
                ) from exc
            return pa.RecordBatch.from_arrays([column], schema=self.schema)
        try:
            payload = cloudpickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise self._unpicklable(records, exc) from exc
        return pa.RecordBatch.from_arrays([pa.array([payload], type=pa.large_binary())], schema=self.schema)

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
            return batch.column(0).to_pylist()
        records: list = []
        for payload in batch.column(0).to_pylist():
            records.extend(pickle.loads(payload))
        return records


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
