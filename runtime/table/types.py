"""PyFlink's ``pyflink.table.types``, only as far as the file formats need it: ``DataTypes`` and the types it makes,
which declare the rows that ``ParquetBulkWriters``, ``OrcBulkWriters``, ``ParquetColumnarRowInputFormat`` and
``CsvSchema`` write and read.

Each type maps to an Arrow type (how its values are stored) and to the :class:`~runtime.types.TypeInformation` of
its Python values (how a stream declares them): ``DataTypes.TIMESTAMP()`` holds naive ``datetime`` values (a
wall-clock time, ``Types.SQL_TIMESTAMP()``), ``DataTypes.TIMESTAMP_LTZ()`` aware ones (a point in time,
``Types.INSTANT()``), ``DataTypes.DECIMAL(p, s)`` ``decimal.Decimal`` values, ``DataTypes.ROW`` Rows.

>>> row_type = DataTypes.ROW([DataTypes.FIELD("id", DataTypes.INT().not_null()),
...                           DataTypes.FIELD("tags", DataTypes.ARRAY(DataTypes.STRING()))])
>>> row_type, row_type.field_names()
(ROW<id INT NOT NULL, tags ARRAY<STRING>>, ['id', 'tags'])
>>> row_type.to_arrow_schema().types
[DataType(int32), ListType(list<item: string>)]
>>> row_type.to_type_info()
ROW_NAMED(['id', 'tags'])
"""

from __future__ import annotations

from copy import copy
from typing import Sequence

import pyarrow as pa

from runtime.errors import ConfigurationError
from runtime.types import TypeInformation, Types

__all__ = ["DataTypes", "DataType", "AtomicType", "NumericType", "IntegralType", "FractionalType", "NullType",
           "CharType", "VarCharType", "BinaryType", "VarBinaryType", "BooleanType", "TinyIntType", "SmallIntType",
           "IntType", "BigIntType", "FloatType", "DoubleType", "DecimalType", "DateType", "TimeType", "TimestampType",
           "LocalZonedTimestampType", "ArrayType", "MapType", "RowField", "RowType"]

_MAX_LENGTH = 0x7FFFFFFF  # the length of STRING and BYTES


class DataType:
    """The type of a value in a row (PyFlink's ``DataType``): made by :class:`DataTypes`.

    >>> DataTypes.BIGINT().not_null(), DataTypes.BIGINT().to_arrow(), DataTypes.BIGINT().to_type_info()
    (BIGINT NOT NULL, DataType(int64), LONG)
    """

    def __init__(self, nullable: bool = True):
        self._nullable = nullable
        self._conversion_cls = ""

    def not_null(self) -> "DataType":
        """This type, without None among its values."""
        cp = copy(self)
        cp._nullable = False
        return cp

    def nullable(self) -> "DataType":
        """This type, with None among its values (the default)."""
        cp = copy(self)
        cp._nullable = True
        return cp

    def bridged_to(self, conversion_cls: str) -> "DataType":
        """Accepted for PyFlink programs: a hint of the Java class to convert to, which Chandy has no use for."""
        self._conversion_cls = conversion_cls
        return self

    # the Arrow type and the Types method of a type without parameters
    _ARROW: pa.DataType | None = None
    _TYPE_INFO: str = ""

    def to_arrow(self) -> pa.DataType:
        """The Arrow type its values are stored as (Chandy's)."""
        return self._ARROW

    def to_type_info(self) -> TypeInformation:
        """The :class:`~runtime.types.TypeInformation` of its Python values (Chandy's)."""
        return getattr(Types, self._TYPE_INFO)()

    def _sql(self) -> str:
        return type(self).__name__[:-4].upper()

    def __str__(self) -> str:
        return self._sql() + ("" if self._nullable else " NOT NULL")

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, type(self)) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(str(self))


class AtomicType(DataType):
    """A type that is not an array, a map or a row."""


class NullType(AtomicType):
    _ARROW, _TYPE_INFO = pa.null(), "PICKLED_BYTE_ARRAY"


class NumericType(AtomicType):
    """A number (what ``CsvSchemaBuilder.add_number_column`` takes)."""


class IntegralType(NumericType):
    pass


class FractionalType(NumericType):
    pass


class _Sized(AtomicType):
    def __init__(self, length: int = 1, nullable: bool = True):
        super().__init__(nullable)
        if not 1 <= length <= _MAX_LENGTH:
            raise ConfigurationError(f"DataTypes.{self._sql()}({length}): the length must be 1 to {_MAX_LENGTH}.")
        self.length = length


class CharType(_Sized):
    """Strings of ``length`` characters (stored as Arrow strings, as they are given)."""

    def _sql(self):
        return f"CHAR({self.length})"

    def to_arrow(self):
        return pa.string()

    def to_type_info(self):
        return Types.STRING()


class VarCharType(_Sized):
    def _sql(self):
        return "STRING" if self.length == _MAX_LENGTH else f"VARCHAR({self.length})"

    def to_arrow(self):
        return pa.string()

    def to_type_info(self):
        return Types.STRING()


class BinaryType(_Sized):
    def _sql(self):
        return f"BINARY({self.length})"

    def to_arrow(self):
        return pa.binary()

    def to_type_info(self):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())


class VarBinaryType(_Sized):
    def _sql(self):
        return "BYTES" if self.length == _MAX_LENGTH else f"VARBINARY({self.length})"

    def to_arrow(self):
        return pa.binary()

    def to_type_info(self):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())


class BooleanType(AtomicType):
    _ARROW, _TYPE_INFO = pa.bool_(), "BOOLEAN"


class TinyIntType(IntegralType):
    _ARROW, _TYPE_INFO = pa.int8(), "BYTE"


class SmallIntType(IntegralType):
    _ARROW, _TYPE_INFO = pa.int16(), "SHORT"


class IntType(IntegralType):
    _ARROW, _TYPE_INFO = pa.int32(), "INT"


class BigIntType(IntegralType):
    _ARROW, _TYPE_INFO = pa.int64(), "LONG"


class FloatType(FractionalType):
    _ARROW, _TYPE_INFO = pa.float32(), "FLOAT"


class DoubleType(FractionalType):
    _ARROW, _TYPE_INFO = pa.float64(), "DOUBLE"


class DateType(AtomicType):
    """Calendar dates: ``datetime.date`` values."""

    _ARROW, _TYPE_INFO = pa.date32(), "SQL_DATE"


class DecimalType(FractionalType):
    """Exact decimals of ``precision`` digits, ``scale`` of them after the point: ``decimal.Decimal`` values, rounded
    half up to the scale when written (as Flink does)."""

    def __init__(self, precision: int = 10, scale: int = 0, nullable: bool = True):
        super().__init__(nullable)
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            raise ConfigurationError(f"DataTypes.DECIMAL({precision}, {scale}): the precision must be 1 to 38, and "
                                     "the scale 0 to the precision.")
        self.precision, self.scale = precision, scale

    def _sql(self):
        return f"DECIMAL({self.precision}, {self.scale})"

    def to_arrow(self):
        return pa.decimal128(self.precision, self.scale)

    def to_type_info(self):
        return Types.BIG_DEC()


class _Timed(AtomicType):
    def __init__(self, precision: int, nullable: bool = True):
        super().__init__(nullable)
        if not 0 <= precision <= 9:
            raise ConfigurationError(f"DataTypes.{type(self).__name__}({precision}): the precision (digits of "
                                     "fractional seconds) must be 0 to 9.")
        self.precision = precision


class TimeType(_Timed):
    """Times of day: naive ``datetime.time`` values, stored to the microsecond (Python's precision)."""

    def __init__(self, precision: int = 0, nullable: bool = True):
        super().__init__(precision, nullable)

    def _sql(self):
        return f"TIME({self.precision})"

    def to_arrow(self):
        return pa.time64("us")

    def to_type_info(self):
        return Types.SQL_TIME()


class TimestampType(_Timed):
    """Wall-clock date-times: naive ``datetime.datetime`` values, stored to the microsecond."""

    def __init__(self, precision: int = 6, nullable: bool = True):
        super().__init__(precision, nullable)

    def _sql(self):
        return f"TIMESTAMP({self.precision})"

    def to_arrow(self):
        return pa.timestamp("us")

    def to_type_info(self):
        return Types.SQL_TIMESTAMP()


class LocalZonedTimestampType(_Timed):
    """Points in time: timezone-aware ``datetime.datetime`` values, stored in UTC to the microsecond."""

    def __init__(self, precision: int = 6, nullable: bool = True):
        super().__init__(precision, nullable)

    def _sql(self):
        return f"TIMESTAMP_LTZ({self.precision})"

    def to_arrow(self):
        return Types.INSTANT().to_arrow()

    def to_type_info(self):
        return Types.INSTANT()


def _check_type(value, where: str) -> "DataType":
    if not isinstance(value, DataType):
        raise ConfigurationError(f"{where} expects a DataType (DataTypes.INT(), DataTypes.STRING(), ...), got "
                                 f"{value!r}.")
    return value


class ArrayType(DataType):
    """Lists of ``element_type`` values."""

    def __init__(self, element_type: DataType, nullable: bool = True):
        super().__init__(nullable)
        self.element_type = _check_type(element_type, "DataTypes.ARRAY")

    def _sql(self):
        return f"ARRAY<{self.element_type}>"

    def to_arrow(self):
        return pa.list_(pa.field("item", self.element_type.to_arrow(), self.element_type._nullable))

    def to_type_info(self):
        return Types.LIST(self.element_type.to_type_info())


class MapType(DataType):
    """Dicts of ``key_type`` keys and ``value_type`` values."""

    def __init__(self, key_type: DataType, value_type: DataType, nullable: bool = True):
        super().__init__(nullable)
        self.key_type = _check_type(key_type, "DataTypes.MAP")
        self.value_type = _check_type(value_type, "DataTypes.MAP")

    def _sql(self):
        return f"MAP<{self.key_type}, {self.value_type}>"

    def to_arrow(self):
        return pa.map_(self.key_type.to_arrow(), pa.field("value", self.value_type.to_arrow(),
                                                          self.value_type._nullable))

    def to_type_info(self):
        return Types.MAP(self.key_type.to_type_info(), self.value_type.to_type_info())


class RowField:
    """A named field of a :class:`RowType` (PyFlink's ``RowField``): made by :meth:`DataTypes.FIELD`.

    >>> DataTypes.FIELD("id", DataTypes.INT(), "the key")
    RowField(id, INT, the key)
    """

    def __init__(self, name: str, data_type: DataType, description: str | None = None):
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"DataTypes.FIELD({name!r}, ...): a field needs a name (a non-empty str).")
        self.name = name
        self.data_type = _check_type(data_type, f"DataTypes.FIELD({name!r}, ...)")
        self.description = description

    def __repr__(self) -> str:
        return f"RowField({self.name}, {self.data_type}" + (f", {self.description})" if self.description else ")")

    def __eq__(self, other) -> bool:
        return isinstance(other, RowField) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((self.name, self.data_type))


class RowType(DataType):
    """Rows of named fields (PyFlink's ``RowType``): made by :meth:`DataTypes.ROW`; iterating it gives its
    :class:`RowField` values.

    >>> row_type = DataTypes.ROW([DataTypes.FIELD("a", DataTypes.INT()), DataTypes.FIELD("b", DataTypes.DATE())])
    >>> [field.name for field in row_type], row_type.field_types()
    (['a', 'b'], [INT, DATE])
    """

    def __init__(self, fields: Sequence[RowField], nullable: bool = True):
        super().__init__(nullable)
        fields = list(fields)
        for field in fields:
            if not isinstance(field, RowField):
                raise ConfigurationError(f"DataTypes.ROW([...]) takes fields made by DataTypes.FIELD(name, type), "
                                         f"got {field!r}.")
        names = [field.name for field in fields]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigurationError(f"DataTypes.ROW([...]) names {duplicates} more than once: give each field a "
                                     "name of its own.")
        self.fields = fields
        self.names = names

    def field_names(self) -> list[str]:
        return list(self.names)

    def field_types(self) -> list[DataType]:
        return [field.data_type for field in self.fields]

    def __iter__(self):
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def _sql(self):
        return "ROW<" + ", ".join(f"{field.name} {field.data_type}" for field in self.fields) + ">"

    def to_arrow(self):
        return pa.struct(list(self.to_arrow_schema()))

    def to_arrow_schema(self) -> pa.Schema:
        """The Arrow schema of its rows: one field per field, nullable as declared (Chandy's)."""
        return pa.schema([pa.field(f.name, f.data_type.to_arrow(), f.data_type._nullable) for f in self.fields])

    def to_type_info(self):
        return Types.ROW_NAMED(self.names, [field.data_type.to_type_info() for field in self.fields])


class DataTypes:
    """Makes the :class:`DataType` values, named as in PyFlink's ``pyflink.table.DataTypes``.

    >>> DataTypes.STRING(), DataTypes.DECIMAL(10, 2), DataTypes.TIMESTAMP(3), DataTypes.MAP(DataTypes.STRING(),
    ...                                                                                    DataTypes.BIGINT())
    (STRING, DECIMAL(10, 2), TIMESTAMP(3), MAP<STRING, BIGINT>)
    """

    @staticmethod
    def NULL() -> NullType:
        return NullType()

    @staticmethod
    def CHAR(length: int, nullable: bool = True) -> CharType:
        return CharType(length, nullable)

    @staticmethod
    def VARCHAR(length: int, nullable: bool = True) -> VarCharType:
        return VarCharType(length, nullable)

    @staticmethod
    def STRING(nullable: bool = True) -> VarCharType:
        return VarCharType(_MAX_LENGTH, nullable)

    @staticmethod
    def BOOLEAN(nullable: bool = True) -> DataType:
        return BooleanType(nullable)

    @staticmethod
    def BINARY(length: int, nullable: bool = True) -> BinaryType:
        return BinaryType(length, nullable)

    @staticmethod
    def VARBINARY(length: int, nullable: bool = True) -> VarBinaryType:
        return VarBinaryType(length, nullable)

    @staticmethod
    def BYTES(nullable: bool = True) -> VarBinaryType:
        return VarBinaryType(_MAX_LENGTH, nullable)

    @staticmethod
    def DECIMAL(precision: int, scale: int, nullable: bool = True) -> DecimalType:
        return DecimalType(precision, scale, nullable)

    @staticmethod
    def TINYINT(nullable: bool = True) -> DataType:
        return TinyIntType(nullable)

    @staticmethod
    def SMALLINT(nullable: bool = True) -> DataType:
        return SmallIntType(nullable)

    @staticmethod
    def INT(nullable: bool = True) -> DataType:
        return IntType(nullable)

    @staticmethod
    def BIGINT(nullable: bool = True) -> DataType:
        return BigIntType(nullable)

    @staticmethod
    def FLOAT(nullable: bool = True) -> DataType:
        return FloatType(nullable)

    @staticmethod
    def DOUBLE(nullable: bool = True) -> DataType:
        return DoubleType(nullable)

    @staticmethod
    def DATE(nullable: bool = True) -> DataType:
        return DateType(nullable)

    @staticmethod
    def TIME(precision: int = 0, nullable: bool = True) -> TimeType:
        return TimeType(precision, nullable)

    @staticmethod
    def TIMESTAMP(precision: int = 6, nullable: bool = True) -> TimestampType:
        return TimestampType(precision, nullable)

    @staticmethod
    def TIMESTAMP_LTZ(precision: int = 6, nullable: bool = True) -> LocalZonedTimestampType:
        return LocalZonedTimestampType(precision, nullable)

    LOCAL_ZONED_TIMESTAMP = TIMESTAMP_LTZ
    TIMESTAMP_WITH_LOCAL_TIME_ZONE = TIMESTAMP_LTZ

    @staticmethod
    def ARRAY(element_type: DataType, nullable: bool = True) -> ArrayType:
        return ArrayType(element_type, nullable)

    @staticmethod
    def MAP(key_type: DataType, value_type: DataType, nullable: bool = True) -> MapType:
        return MapType(key_type, value_type, nullable)

    @staticmethod
    def FIELD(name: str, data_type: DataType, description: str | None = None) -> RowField:
        return RowField(name, data_type, description)

    @staticmethod
    def ROW(row_fields: Sequence[RowField] = (), nullable: bool = True) -> RowType:
        return RowType(row_fields, nullable)
