"""Keyed state as Arrow tables of typed columns: how a savepoint stores each keyed state (metadata format 2).

A savepoint's keyed state is data a user may read without Chandy, so it is stored one Arrow IPC file per operator
subtask and state (``<uid>/<state directory>/<subtask>.arrow``, one record batch per key group) whose columns
say what they hold:

=================== ===============================================================================================
``key_group``       int32, the same in every row of a batch
``key``             the key, typed as the first key written is (int64, string, float64, binary or bool), when
                    keys are of such a type
``key_pickled``     the key pickled, in rows whose key the typed column cannot hold exactly (the only key column
                    when keys are of other types)
``value``           the entry, typed by the state descriptor's type information (``ValueStateDescriptor("count",
                    Types.LONG())`` gives int64; a list state's element type gives a list column, a map state's
                    types a map column); absent when the type is not declared
``value_pickled``   the entry pickled, in rows whose entry the typed column cannot hold exactly (a value of
                    another type than declared, a float in a ``FLOAT`` column) and in every row of an untyped state
``last_access_ms``  for a value, reducing or aggregating state with a time-to-live: the entry's last access
=================== ===============================================================================================

A typed column is used for an entry only when the entry comes back from it identical (same types, same values,
tuples as tuples and Rows as Rows): nothing is ever changed by the format, whatever the declared type says. List
and map states with a time-to-live keep each element's last access with it, so their entries are pickled whole.
The file's schema metadata (``chandy.state``, JSON) names the state, its kind and the declared type.

>>> from runtime.types import Types
>>> from state_backends.descriptors import ValueStateDescriptor
>>> layout = StateLayout.of("count", ValueStateDescriptor("count", Types.LONG()), ttl=False)
>>> encoder = StateFileEncoder(layout)
>>> batch = encoder.batch(7, {"a": 1, "b": 2, "c": "three"})
>>> batch.schema.names
['key_group', 'key', 'key_pickled', 'value', 'value_pickled']
>>> batch.column("value").to_pylist(), batch.column("value_pickled").null_count
([1, 2, None], 2)
>>> decode_batch(batch, encoder.schema)
(7, 'count', {'a': 1, 'b': 2, 'c': 'three'})
"""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

import pyarrow as pa

from runtime.errors import CorruptCheckpointError
from runtime.types import Row, TypeInformation
from state_backends.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from state_backends.heap.snapshot import TTL_FORMAT

__all__ = ["StateLayout", "StateFileEncoder", "decode_batch", "state_of_schema", "LAYOUT_FORMAT"]

LAYOUT_FORMAT = "state-columns/1"
_METADATA_KEY = b"chandy.state"

VALUE, LIST, MAP, ENTRY = "value", "list", "map", "entry"  # ENTRY: a state of unknown kind, its entries pickled
_KINDS = {ValueStateDescriptor: VALUE, ReducingStateDescriptor: VALUE, AggregatingStateDescriptor: VALUE,
          ListStateDescriptor: LIST, MapStateDescriptor: MAP}
_KEY_TYPES = {int: pa.int64(), str: pa.string(), float: pa.float64(), bytes: pa.binary(), bool: pa.bool_()}


@dataclass(frozen=True)
class StateLayout:
    """How one keyed state is laid out: its ``kind`` (value, list, map, or entry when no descriptor says), whether
    its entries carry last-access times (``ttl``), and the Arrow type of its ``value`` column (None: pickled)."""

    name: str
    kind: str
    ttl: bool
    value_type: pa.DataType | None = None
    shape: Any = None  # the Python containers of a typed value (see _shape)
    declared: str | None = None  # the descriptor's type information, as written

    @classmethod
    def of(cls, name: str, descriptor: StateDescriptor | None, ttl: bool) -> "StateLayout":
        """The layout of state ``name`` as ``descriptor`` declares it (None: a state restored and not declared).

        >>> from runtime.types import Types
        >>> from state_backends.descriptors import ListStateDescriptor, MapStateDescriptor
        >>> StateLayout.of("seen", ListStateDescriptor("seen", Types.STRING()), ttl=False).value_type
        ListType(list<item: string>)
        >>> StateLayout.of("m", MapStateDescriptor("m", Types.STRING(), Types.LONG()), ttl=False).value_type
        MapType(map<string, int64>)
        >>> StateLayout.of("m", MapStateDescriptor("m", Types.STRING(), Types.LONG()), ttl=True).value_type is None
        True
        """
        kind = _KINDS.get(type(descriptor), ENTRY) if descriptor is not None else ENTRY
        value_type = shape = None
        type_info = descriptor.type_info if descriptor is not None else None
        if kind == MAP:
            key_info, value_info = type_info if isinstance(type_info, tuple) else (None, None)
            if _is_type(key_info) and _is_type(value_info):
                value_type = pa.map_(key_info.to_arrow(), value_info.to_arrow())
                shape = {"dict": [_shape(key_info), _shape(value_info)]}
                type_info = f"MAP({key_info!r}, {value_info!r})"
            else:
                type_info = None
        elif kind == LIST and _is_type(type_info):
            value_type, shape = pa.list_(type_info.to_arrow()), {"list": _shape(type_info)}
        elif kind == VALUE and _is_type(type_info):
            value_type, shape = type_info.to_arrow(), _shape(type_info)
        if ttl and kind in (LIST, MAP):  # each element keeps its own last access: the entry is pickled whole
            value_type = shape = None
        return cls(name, kind, ttl, value_type, shape, None if type_info is None else repr(type_info))


def _is_type(type_info) -> bool:
    return isinstance(type_info, TypeInformation)


def _shape(type_info: TypeInformation):
    """What Python builds a value of ``type_info`` from its Arrow value, as JSON: ``{"row": [field shapes],
    "names": [...]}`` (a Row with those field names), ``{"tuple": [...], "names": [...]}`` (the struct's field
    names), ``{"list": item}``, ``{"dict": [key, value]}``, or None for a value Arrow gives as it is.

    >>> from runtime.types import Types
    >>> _shape(Types.LIST(Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])))
    {'list': {'row': [None, None], 'names': ['word', 'count']}}
    """
    arrow = type_info.to_arrow()
    if pa.types.is_struct(arrow):
        return {"row" if type_info.is_row else "tuple": [_shape(field) for field in type_info.fields],
                "names": [field.name for field in arrow]}
    if pa.types.is_list(arrow) and type_info.fields:
        return {"list": _shape(type_info.fields[0])}
    if pa.types.is_map(arrow) and len(type_info.fields) == 2:
        return {"dict": [_shape(type_info.fields[0]), _shape(type_info.fields[1])]}
    return None


def _to_arrow(shape, value):
    """``value`` as Arrow takes a value of the column ``shape`` (see :func:`_shape`) describes."""
    if shape is None or value is None:
        return value
    if "list" in shape:
        return [_to_arrow(shape["list"], v) for v in value]
    if "dict" in shape:
        key, item = shape["dict"]
        return [(_to_arrow(key, k), _to_arrow(item, v)) for k, v in value.items()]
    fields = shape["row"] if "row" in shape else shape["tuple"]
    values = value._values if type(value) is Row else value
    if len(values) != len(fields):
        raise ValueError(f"{len(values)} fields where {len(fields)} are declared")
    return {name: _to_arrow(field, v) for name, field, v in zip(shape["names"], fields, values)}


def _identical(a, b) -> bool:
    """Whether ``b`` is ``a`` to the last detail a program could see: types, values, containers, Row names."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(_identical, a, b))
    if kind is dict:
        return len(a) == len(b) and all(_identical(ka, kb) and _identical(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if kind is Row:
        return a._fields == b._fields and a._row_kind == b._row_kind and _identical(a._values, b._values)
    if kind is float:
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (a != a and b != b)
    if kind is datetime or kind is time:
        return a == b and a.tzinfo == b.tzinfo and a.fold == b.fold
    if kind is date or kind in (int, str, bytes, bool) or a is None:
        return a == b
    return False  # any other class: kept pickled, with whatever it holds


def _pickled(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class _Column:
    """One typed column and its pickled twin: each value goes in the typed one when it comes back identical."""

    def __init__(self, name: str, arrow_type: pa.DataType | None, shape=None):
        self.name = name
        self.arrow_type = arrow_type
        self.shape = shape

    def fields(self) -> list[pa.Field]:
        typed = [] if self.arrow_type is None else [pa.field(self.name, self.arrow_type)]
        return typed + [pa.field(f"{self.name}_pickled", pa.binary())]

    def arrays(self, values: list) -> list[pa.Array]:
        if self.arrow_type is None:
            return [pa.array([_pickled(v) for v in values], pa.binary())]
        shaped, fits = [], []
        for value in values:
            try:
                shaped.append(_to_arrow(self.shape, value))
                fits.append(True)
            except _UNFIT:
                shaped.append(None)
                fits.append(False)
        try:
            typed = pa.array(shaped, self.arrow_type)
        except _UNFIT:  # some value does not convert: find which, one by one
            for index, value in enumerate(shaped):
                if fits[index] and not _converts(value, self.arrow_type):
                    shaped[index], fits[index] = None, False
            typed = pa.array(shaped, self.arrow_type)
        for index, back in enumerate(typed.to_pylist()):
            if fits[index] and not _identical(values[index], _decoded(self.shape, back)):
                shaped[index], fits[index] = None, False
        if not all(fits):
            typed = pa.array(shaped, self.arrow_type)
        pickled = pa.array([None if fit else _pickled(v) for v, fit in zip(values, fits)], pa.binary())
        return [typed, pickled]


_UNFIT = (pa.ArrowException, TypeError, ValueError, OverflowError, AttributeError, KeyError)


def _converts(value, arrow_type: pa.DataType) -> bool:
    try:
        pa.array([value], arrow_type)
        return True
    except _UNFIT:
        return False


def _decoded(shape, value):
    """The Python value a typed column of ``shape`` (see :func:`_shape`) held as ``value``."""
    if shape is None or value is None:
        return value
    if "row" in shape:
        values = [_decoded(s, v) for s, v in zip(shape["row"], value.values())]
        return Row.of(shape["names"], values)
    if "tuple" in shape:
        return tuple(_decoded(s, v) for s, v in zip(shape["tuple"], value.values()))
    if "list" in shape:
        return [_decoded(shape["list"], v) for v in value]
    key, item = shape["dict"]
    return {_decoded(key, k): _decoded(item, v) for k, v in value}


class StateFileEncoder:
    """Builds the record batches of one state's file, a key group at a time. The key column's type is chosen from
    the first key it sees (keys of one state are of one type in practice; any other key goes pickled)."""

    def __init__(self, layout: StateLayout):
        self.layout = layout
        self._keys: _Column | None = None
        self._values = _Column("value", layout.value_type, layout.shape)
        self.schema: pa.Schema | None = None

    def batch(self, group: int, table: dict) -> pa.RecordBatch:
        """Key group ``group``'s entries (``{key: entry}``, entries with their last-access times for a state with
        a time-to-live, as the heap backend keeps them)."""
        keys = list(table)
        entries = list(table.values())
        if self._keys is None:
            self._keys = _Column("key", _KEY_TYPES.get(type(keys[0])) if keys else None)
            fields = [pa.field("key_group", pa.int32())] + self._keys.fields() + self._values.fields()
            if self.layout.ttl and self.layout.kind == VALUE:
                fields.append(pa.field("last_access_ms", pa.int64()))
            self.schema = pa.schema(fields, metadata={_METADATA_KEY: json.dumps(self._metadata()).encode()})
        columns = [pa.array([group] * len(keys), pa.int32())] + self._keys.arrays(keys)
        if self.layout.ttl and self.layout.kind == VALUE:
            columns += self._values.arrays([value for value, _ in entries])
            columns.append(pa.array([last_access for _, last_access in entries], pa.int64()))
        else:
            columns += self._values.arrays(entries)
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _metadata(self) -> dict:
        layout = self.layout
        return {"format": LAYOUT_FORMAT, "state": layout.name, "kind": layout.kind, "ttl": layout.ttl,
                "type": layout.declared, "shape": self._values.shape}


def state_of_schema(schema: pa.Schema) -> dict:
    """What a state file's schema says of its state (``state``, ``kind``, ``ttl``, ``type``, ``shape``); raises
    CorruptCheckpointError when it is not a state file of a format this version reads."""
    try:
        described = json.loads(schema.metadata[_METADATA_KEY])
    except Exception as exc:
        raise CorruptCheckpointError(f"is not a keyed state file (its schema has no readable {_METADATA_KEY.decode()} "
                                     f"metadata: {type(exc).__name__})") from exc
    if described.get("format") != LAYOUT_FORMAT:
        raise CorruptCheckpointError(f"holds state in format {described.get('format')!r}, which this version does "
                                     f"not read (it reads {LAYOUT_FORMAT!r}): restore with a newer Chandy")
    return described


def decode_batch(batch: pa.RecordBatch, schema: pa.Schema) -> tuple[int, str, Any]:
    """``(key group, state name, table)`` of one batch: the table as a heap snapshot pickles it (``{key: entry}``,
    or ``(TTL_FORMAT, {key: entry with last-access times})`` for a state with a time-to-live)."""
    described = state_of_schema(schema)
    names = batch.schema.names
    group = batch.column(0)[0].as_py() if batch.num_rows else -1
    keys = _merged(batch, "key", None)
    values = _merged(batch, "value", described.get("shape"))
    if "last_access_ms" in names:
        values = list(zip(values, batch.column("last_access_ms").to_pylist()))
    table = dict(zip(keys, values))
    return group, described["state"], ((TTL_FORMAT, table) if described.get("ttl") else table)


def _merged(batch: pa.RecordBatch, name: str, shape) -> list:
    pickled = batch.column(f"{name}_pickled").to_pylist()
    if name not in batch.schema.names:
        return [None if p is None else pickle.loads(p) for p in pickled]
    typed = batch.column(name).to_pylist()
    return [_decoded(shape, t) if p is None else pickle.loads(p) for t, p in zip(typed, pickled)]
