"""PyFlink's ``pyflink.datastream.formats``: turning rows into bytes and back, for sources and sinks that carry
messages (Kafka): :mod:`.json`, :mod:`.csv` and :mod:`.avro`; and the file formats of ``FileSink.for_bulk_format``
and ``FileSource``: :mod:`.parquet`, :mod:`.orc`, :mod:`.avro` (Avro data files) and :mod:`.csv` (CSV with a
schema).

>>> from runtime.datastream.formats.json import JsonRowDeserializationSchema
>>> from runtime.types import Types
>>> JsonRowDeserializationSchema.builder().type_info(Types.ROW([Types.LONG()])).build().deserialize(b'{"f0": 5}')
Row(f0=5)
"""
