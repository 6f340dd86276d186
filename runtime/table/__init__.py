"""PyFlink's ``pyflink.table``, only as far as the DataStream file formats need it: ``DataTypes`` and its types
(:mod:`runtime.table.types`), which declare the rows of ``ParquetBulkWriters``, ``OrcBulkWriters``,
``ParquetColumnarRowInputFormat`` and ``CsvSchema``. The Table API and SQL are not provided: importing their
names raises a ``NotProvidedError`` that says what to use instead.

>>> from runtime.table import DataTypes
>>> DataTypes.ROW([DataTypes.FIELD("word", DataTypes.STRING()), DataTypes.FIELD("n", DataTypes.BIGINT())])
ROW<word STRING, n BIGINT>
"""

from runtime.not_provided import absent_names
from runtime.table.types import DataType, DataTypes, RowField, RowType

__all__ = ["DataTypes", "DataType", "RowType", "RowField"]

__getattr__ = absent_names(__name__)  # TableEnvironment, StreamTableEnvironment, ...: say why they are missing
