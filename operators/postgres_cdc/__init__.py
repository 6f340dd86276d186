"""PostgreSQL in: change data capture. A consistent snapshot of the captured tables, then every insert, update and
delete from a logical replication slot (``pgoutput``), exactly once. Flink CDC's ``PostgresSource.builder()`` is in
:mod:`runtime.datastream.connectors.postgres`.

>>> from operators.postgres_cdc import Change, RowDeserializer
>>> [str(row.get_row_kind()) for row in RowDeserializer().deserialize(Change("c", "public", "t", None, {"id": 1}))]
['+I']
"""

from operators.postgres_cdc.changes import Change, ChangeDeserializer, JsonDebeziumDeserializationSchema, RowDeserializer
from operators.postgres_cdc.source import PostgresCdcSource, Startup

__all__ = ["PostgresCdcSource", "Startup", "Change", "ChangeDeserializer", "RowDeserializer",
           "JsonDebeziumDeserializationSchema"]
