"""Type information in PyFlink's shape (``Types.STRING()``, ``Types.TUPLE([...])`` ...), mapped to Arrow.

Types are optional in Chandy. Where an operator declares its ``output_type``, the records it sends to other
subtasks travel as typed Arrow columns (the fast path); elsewhere they travel pickled. Either way the
receiving function sees the same Python values.

>>> from runtime.types import Types
>>> Types.TUPLE([Types.STRING(), Types.LONG()]).to_arrow()
StructType(struct<f0: string not null, f1: int64 not null>)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from runtime.errors import ConfigurationError

__all__ = ["TypeInformation", "Types", "Row"]


class Row(tuple):
    """A tuple with field names, as produced by ``Types.ROW_NAMED`` edges (PyFlink's ``Row``, simplified).

    >>> r = Row.of(["word", "count"], ["spark", 3])
    >>> r.word, r[1], r.as_dict()
    ('spark', 3, {'word': 'spark', 'count': 3})
    """

    _names: tuple[str, ...] = ()

    @classmethod
    def of(cls, names: Sequence[str], values: Sequence) -> "Row":
        row = cls(values)
        row._names = tuple(names)
        return row

    def __getattr__(self, name: str):
        names = self.__dict__.get("_names") or ()
        if name in names:
            return self[names.index(name)]
        raise AttributeError(name)

    def as_dict(self) -> dict:
        return dict(zip(self._names, self))

    def __reduce__(self):
        return (Row.of, (self._names, tuple(self)))


@dataclass(frozen=True)
class TypeInformation:
    """The type of the records on a stream. Build one with :class:`Types`.

    >>> pair = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    >>> pair.field_names, pair.fields
    (('word', 'count'), (STRING, LONG))
    >>> pair.to_arrow()
    StructType(struct<word: string, count: int64>)
    """

    name: str
    arrow: pa.DataType
    fields: tuple["TypeInformation", ...] = ()
    field_names: tuple[str, ...] = ()

    def to_arrow(self) -> pa.DataType:
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
        names = tuple(f"f{i}" for i in range(len(field_types)))
        return Types.ROW_NAMED(names, field_types)

    @staticmethod
    def ROW_NAMED(field_names: Sequence[str], field_types: Sequence[TypeInformation]) -> TypeInformation:
        if len(field_names) != len(field_types):
            raise ConfigurationError(f"Types.ROW_NAMED() got {len(field_names)} names but {len(field_types)} types: give one "
                                     "type per name")
        arrow = pa.struct([pa.field(n, t.arrow) for n, t in zip(field_names, field_types)])
        return TypeInformation(f"ROW_NAMED({list(field_names)!r})", arrow, tuple(field_types),
                               tuple(field_names))
