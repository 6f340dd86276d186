"""Delta Lake tables in and out (delta-rs, no JVM).

>>> from operators.delta.source import DeltaSource
>>> DeltaSource.for_bounded("/data/orders").build().bounded
True
"""
