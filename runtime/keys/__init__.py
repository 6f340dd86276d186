"""Keys and key groups: the stable hash, Flink's key-group math, and its Arrow-vectorised twin.

Both paths agree on where a key goes:

>>> import pyarrow as pa
>>> from runtime.keys.arrow_key_groups import column_key_groups
>>> from runtime.keys.key_groups import assign_to_key_group
>>> column_key_groups(pa.array(["a", "b"]), 128).to_pylist() == [assign_to_key_group(k, 128) for k in "ab"]
True
"""
