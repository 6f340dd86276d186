"""Type information in PyFlink's shape (``Types.STRING()``, ``Types.TUPLE([...])`` ...), mapped to Arrow, and
PyFlink's :class:`Row`.

Types are optional in Chandy. Where an operator declares its ``output_type``, the records it sends to other
subtasks travel as typed Arrow columns (the fast path); elsewhere they travel pickled. Either way the
receiving function sees the same Python values: on an edge declared ``Types.ROW(...)`` or
``Types.ROW_NAMED(...)`` each record arrives as a :class:`Row` with the declared field names.

Times: ``SQL_TIMESTAMP`` carries naive ``datetime.datetime`` values (a wall-clock time, like Flink's
``java.sql.Timestamp``), ``INSTANT`` timezone-aware ones (a point in time; they arrive in UTC), ``SQL_DATE``
``datetime.date`` and ``SQL_TIME`` ``datetime.time``, all exact to the microsecond, Python's precision.

>>> from runtime.types import Types
>>> Types.TUPLE([Types.STRING(), Types.LONG()]).to_arrow()
StructType(struct<f0: string not null, f1: int64 not null>)
>>> Types.INSTANT().to_arrow(), Types.SQL_DATE().to_arrow()
(TimestampType(timestamp[us, tz=+00:00]), DataType(date32[day]))
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Sequence

import pyarrow as pa

from runtime.errors import ConfigurationError

__all__ = ["TypeInformation", "Types", "Row", "RowKind"]


class RowKind(Enum):
    """The change a :class:`Row` stands for in a changelog (PyFlink's ``RowKind``); ``str()`` gives Flink's
    short form.

    >>> RowKind.INSERT, str(RowKind.UPDATE_BEFORE), str(RowKind.DELETE)
    (<RowKind.INSERT: 0>, '-U', '-D')
    """

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


class _NoSuchField(KeyError, ValueError):
    # KeyError as for a dict; ValueError too, since that is what PyFlink's Row raises for an unknown name.
    def __str__(self) -> str:
        return str(self.args[0])


class Row:
    """A record with fields by position and, optionally, by name: PyFlink's ``pyflink.common.Row``.

    Made from positions or from names (in the order given); read like a tuple, like a dict or by attribute;
    set by index or name (``row.a = 5`` raises ``AttributeError``, as in PyFlink). Records on an edge declared
    ``Types.ROW(...)``/``Types.ROW_NAMED(...)`` arrive as Rows named as declared (``f0, f1, ...`` for ROW).

    >>> row = Row(word="spark", count=3)
    >>> row, row.word, row["count"], row[0], len(row), list(row)
    (Row(word='spark', count=3), 'spark', 3, 'spark', 2, ['spark', 3])
    >>> row["count"] += 1
    >>> row.as_dict(), "word" in row
    ({'word': 'spark', 'count': 4}, True)
    >>> Row(1, 2), Row(1, 2) == Row(1, 2), Row(1, 2) == (1, 2)
    (<Row(1, 2)>, True, False)

    A Row of names makes Rows, as a class would:

    >>> Point = Row("x", "y")
    >>> Point(1, 2)
    Row(x=1, y=2)

    Equality takes in the field names and the :class:`RowKind`; the hash is that of the tuple of values.

    >>> deleted = Row(word="spark", count=4)
    >>> deleted.set_row_kind(RowKind.DELETE)
    >>> deleted == row, hash(deleted) == hash(row) == hash(("spark", 4))
    (False, True)
    """

    # No __dict__: ``row.a = 5`` fails as in PyFlink without a __setattr__ override, which would double the
    # cost of building the Rows of an edge (~0.2 us against ~0.4 us each).
    __slots__ = ("_fields", "_values", "_row_kind")

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row: give values by position or by "
                             "name")
        if kwargs:
            self._fields = tuple(kwargs)
            self._values = list(kwargs.values())
        else:
            self._fields = None
            self._values = list(args)
        self._row_kind = RowKind.INSERT

    @classmethod
    def of(cls, names: Sequence[str], values: Iterable, row_kind: RowKind = RowKind.INSERT) -> "Row":
        """A Row of ``values`` named ``names`` (Chandy's; PyFlink has no such method).

        >>> Row.of(["word", "count"], ["spark", 3])
        Row(word='spark', count=3)
        """
        return _create_row(tuple(names), list(values), row_kind)

    def as_dict(self, recursive: bool = False) -> dict:
        """The fields as a dict by name; with ``recursive``, nested Rows (in lists and dicts too) as dicts.

        >>> Row(key=1, value=Row(name="a", age=2)).as_dict(recursive=True)
        {'key': 1, 'value': {'name': 'a', 'age': 2}}
        >>> Row(1, 2).as_dict()
        Traceback (most recent call last):
        ...
        TypeError: Cannot convert a Row without field names into a dict: name its fields (Row(a=1), set_field_names)
        """
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names into a dict: name its fields (Row(a=1), "
                            "set_field_names)")
        if not recursive:
            return dict(zip(self._fields, self._values))
        return dict(zip(self._fields, map(_as_plain, self._values)))

    def get_row_kind(self) -> RowKind:
        """The change this Row stands for: ``RowKind.INSERT`` unless set.

        >>> Row(1).get_row_kind()
        <RowKind.INSERT: 0>
        """
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        """Set the change this Row stands for.

        >>> row = Row(1)
        >>> row.set_row_kind(RowKind.UPDATE_AFTER)
        >>> str(row.get_row_kind())
        '+U'
        """
        self._row_kind = row_kind

    def set_field_names(self, field_names: Sequence[str]) -> None:
        """Name (or rename) the fields, in order.

        >>> row = Row("spark", 3)
        >>> row.set_field_names(["word", "count"])
        >>> row
        Row(word='spark', count=3)
        """
        self._fields = None if field_names is None else tuple(field_names)

    def get_fields_by_names(self, names: Sequence[str]) -> list:
        """The values of the fields ``names``, in that order (all values, for a Row without names).

        >>> Row(a=1, b=2, c=3).get_fields_by_names(["c", "a"])
        [3, 1]
        """
        fields = self._fields
        if fields is None or tuple(names) == fields:
            return self._values
        missing = [name for name in names if name not in fields]
        if missing:
            raise _NoSuchField(f"Field names {missing} do not exist in this Row, whose fields are {list(fields)}")
        values = self._values
        return [values[fields.index(name)] for name in names]

    def _index(self, name) -> int:
        fields = self._fields
        if fields is None:
            raise _NoSuchField(f"{name!r}: this Row has no field names, so its fields are read by index "
                               "(row[0]); name them with Row(a=...) or set_field_names")
        try:
            return fields.index(name)
        except ValueError:
            raise _NoSuchField(f"{name!r} is not a field of this Row; its fields are {list(fields)}") from None

    def __getitem__(self, item):
        if type(item) is int or isinstance(item, (int, slice)):
            return self._values[item]
        return self._values[self._index(item)]

    def __setitem__(self, key, value) -> None:
        if type(key) is int or isinstance(key, (int, slice)):
            self._values[key] = value
        else:
            self._values[self._index(key)] = value

    def __getattr__(self, name: str):
        # Only reached when normal lookup fails: the slots and methods win over a field of the same name.
        if name.startswith("_"):
            raise AttributeError(name)
        fields = self._fields
        if fields is not None and name in fields:
            index = fields.index(name)
            if index < len(self._values):
                return self._values[index]
        raise AttributeError(f"Row has no field {name!r}" + ("" if fields is None else f"; its fields are "
                                                                                     f"{list(fields)}"))

    def __call__(self, *args) -> "Row":
        # PyFlink's Row("x", "y") is a "row class": calling it makes a Row named by its values.
        if len(args) > len(self._values):
            raise ValueError(f"Can not create Row with fields {self!r}, expected {len(self._values)} values but "
                             f"got {args!r}")
        return _create_row(tuple(self._values), list(args), self._row_kind)

    def __contains__(self, item) -> bool:
        return item in (self._values if self._fields is None else self._fields)

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return (self.__class__ is other.__class__ and self._fields == other._fields
                and self._row_kind is other._row_kind and self._values == other._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        if self._fields is None:
            return "<Row(%s)>" % ", ".join(map(repr, self._values))
        return "Row(%s)" % ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values))

    def __copy__(self) -> "Row":
        return _create_row(self._fields, list(self._values), self._row_kind)

    def __reduce__(self):
        # The list itself, not a copy: pickling copies it anyway; copy.copy goes through __copy__ instead.
        if self._row_kind is RowKind.INSERT:
            return _create_row, (self._fields, self._values)
        return _create_row, (self._fields, self._values, self._row_kind)


_new = object.__new__


def _create_row(fields: tuple | None, values: list, row_kind: RowKind = RowKind.INSERT) -> Row:
    # Builds a Row without __init__: used by unpickling and by the codec, once per record.
    row = _new(Row)
    row._fields = fields
    row._values = values
    row._row_kind = row_kind
    return row


def _as_plain(value):
    if isinstance(value, Row):
        return value.as_dict(True)
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class TypeInformation:
    """The type of the records on a stream. Build one with :class:`Types`.

    >>> pair = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    >>> pair.field_names, pair.fields
    (('word', 'count'), (STRING, LONG))
    >>> pair.to_arrow(), pair.is_row
    (StructType(struct<word: string, count: int64>), True)
    """

    name: str
    arrow: pa.DataType
    fields: tuple["TypeInformation", ...] = ()
    field_names: tuple[str, ...] = ()
    is_row: bool = False  # records are Rows (ROW, ROW_NAMED), not tuples (TUPLE)

    def to_arrow(self) -> pa.DataType:
        """The Arrow type of the values (``binary`` for those that travel pickled).

        >>> Types.SQL_TIMESTAMP().to_arrow(), Types.BIG_DEC().to_arrow()
        (TimestampType(timestamp[us]), DataType(binary))
        """
        return self.arrow

    def __repr__(self) -> str:
        return self.name


def _simple(name: str, arrow: pa.DataType) -> TypeInformation:
    return TypeInformation(name, arrow)


class Types:
    """Factory of :class:`TypeInformation`, named as in PyFlink's ``pyflink.common.typeinfo.Types``.

    >>> Types.LONG(), Types.LIST(Types.STRING()), Types.MAP(Types.STRING(), Types.INT())
    (LONG, LIST(STRING), MAP(STRING, INT))
    >>> Types.LIST(Types.STRING()).to_arrow()
    ListType(list<item: string>)
    >>> Types.ROW([Types.INT(), Types.SQL_TIMESTAMP()]).field_names
    ('f0', 'f1')
    """

    @staticmethod
    def STRING() -> TypeInformation:
        return _simple("STRING", pa.string())

    @staticmethod
    def BYTE() -> TypeInformation:
        return _simple("BYTE", pa.int8())

    @staticmethod
    def SHORT() -> TypeInformation:
        return _simple("SHORT", pa.int16())

    @staticmethod
    def INT() -> TypeInformation:
        return _simple("INT", pa.int32())

    @staticmethod
    def LONG() -> TypeInformation:
        return _simple("LONG", pa.int64())

    @staticmethod
    def FLOAT() -> TypeInformation:
        return _simple("FLOAT", pa.float32())

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return _simple("DOUBLE", pa.float64())

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return _simple("BOOLEAN", pa.bool_())

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        """A wall-clock date and time: a naive ``datetime.datetime``, exact to the microsecond.

        A timezone-aware value does not fit (an edge of this type refuses it by name): declare ``INSTANT()``
        for points in time. Flink's ``java.sql.Timestamp`` keeps nanoseconds; Python's datetime cannot.

        >>> Types.SQL_TIMESTAMP(), Types.SQL_TIMESTAMP().to_arrow()
        (SQL_TIMESTAMP, TimestampType(timestamp[us]))
        """
        return _simple("SQL_TIMESTAMP", pa.timestamp("us"))

    @staticmethod
    def INSTANT() -> TypeInformation:
        """A point in time: a timezone-aware ``datetime.datetime``, arriving in UTC (``timezone.utc``).

        PyFlink gives its own ``Instant`` class (seconds and nanoseconds) here; Chandy gives the datetime.
        A naive value does not fit: it would be ambiguous (local time or UTC?).

        >>> Types.INSTANT().to_arrow().tz
        '+00:00'
        """
        # tz "+00:00", not "UTC": Arrow then hands back datetime.timezone.utc rather than ZoneInfo("UTC").
        return _simple("INSTANT", pa.timestamp("us", tz="+00:00"))

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        """A calendar date: a ``datetime.date`` (a ``datetime`` does not fit: its time would be lost).

        >>> Types.SQL_DATE().to_arrow()
        DataType(date32[day])
        """
        return _simple("SQL_DATE", pa.date32())

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        """A time of day: a naive ``datetime.time``, exact to the microsecond.

        >>> Types.SQL_TIME().to_arrow()
        Time64Type(time64[us])
        """
        return _simple("SQL_TIME", pa.time64("us"))

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        """An exact decimal of any precision: a ``decimal.Decimal``.

        Its values travel pickled: Arrow's decimals have a fixed precision and scale, which would turn
        ``Decimal("1.5")`` into ``Decimal("1.500000000000000000")`` and refuse ``Decimal("1E+50")``.

        >>> Types.BIG_DEC()
        BIG_DEC
        """
        return _simple("BIG_DEC", pa.binary())

    @staticmethod
    def PRIMITIVE_ARRAY(element: TypeInformation) -> TypeInformation:
        return TypeInformation(f"PRIMITIVE_ARRAY({element!r})", pa.list_(element.arrow), (element,))

    @staticmethod
    def BASIC_ARRAY(element: TypeInformation) -> TypeInformation:
        return TypeInformation(f"BASIC_ARRAY({element!r})", pa.list_(element.arrow), (element,))

    @staticmethod
    def LIST(element: TypeInformation) -> TypeInformation:
        return TypeInformation(f"LIST({element!r})", pa.list_(element.arrow), (element,))

    @staticmethod
    def MAP(key: TypeInformation, value: TypeInformation) -> TypeInformation:
        return TypeInformation(f"MAP({key!r}, {value!r})", pa.map_(key.arrow, value.arrow), (key, value))

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        """Any picklable Python object: the default when no type is given."""
        return _simple("PICKLED_BYTE_ARRAY", pa.binary())

    @staticmethod
    def TUPLE(field_types: Sequence[TypeInformation]) -> TypeInformation:
        names = tuple(f"f{i}" for i in range(len(field_types)))
        arrow = pa.struct([pa.field(n, t.arrow, nullable=False) for n, t in zip(names, field_types)])
        return TypeInformation(f"TUPLE({list(field_types)!r})", arrow, tuple(field_types), names)

    @staticmethod
    def ROW(field_types: Sequence[TypeInformation]) -> TypeInformation:
        """Records that are :class:`Row` values with fields named ``f0``, ``f1``, ... (as in PyFlink).

        >>> Types.ROW([Types.STRING(), Types.LONG()]).field_names
        ('f0', 'f1')
        """
        names = tuple(f"f{i}" for i in range(len(field_types)))
        return Types.ROW_NAMED(names, field_types)

    @staticmethod
    def ROW_NAMED(field_names: Sequence[str], field_types: Sequence[TypeInformation]) -> TypeInformation:
        """Records that are :class:`Row` values with the fields ``field_names``, of ``field_types``.

        >>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()]).is_row
        True
        """
        if len(field_names) != len(field_types):
            raise ConfigurationError(f"Types.ROW_NAMED() got {len(field_names)} names but {len(field_types)} "
                                     "types: give one type per name")
        arrow = pa.struct([pa.field(n, t.arrow) for n, t in zip(field_names, field_types)])
        return TypeInformation(f"ROW_NAMED({list(field_names)!r})", arrow, tuple(field_types),
                               tuple(field_names), is_row=True)
