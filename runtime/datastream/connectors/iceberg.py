"""Iceberg tables out, exactly once, on ``pyiceberg`` (no JVM): one Iceberg snapshot per checkpoint, each recording the
job's sink and the checkpoint id in its summary (see :mod:`operators.iceberg.sink`). PyFlink has no Iceberg module;
Flink's Java sink is ``FlinkSink.forRowData(stream).tableLoader(...).append()``. Here the table is found through a
pyiceberg catalog, given by its properties:

>>> import tempfile
>>> warehouse = tempfile.mkdtemp()
>>> catalog = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": f"file://{warehouse}"}
>>> sink = IcebergSink(catalog, "shop.orders")   # stream.sink_to(sink): a columnar stream, or declared row types
>>> sink.identifier
'shop.orders'
"""

from operators.iceberg.sink import IcebergSink

__all__ = ["IcebergSink"]
