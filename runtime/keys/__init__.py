"""Keys and key groups: the stable hash, Flink's key-group math, and its Arrow-vectorised twin."""
