"""Iceberg tables written with ``pyiceberg``, exactly once: :mod:`operators.iceberg.sink`."""
