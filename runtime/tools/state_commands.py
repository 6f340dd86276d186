"""``chandy state``: a savepoint's or a checkpoint's state at the command line (see :mod:`runtime.state_api`).

    chandy state show PATH [CHECKPOINT]                          the operators and their states
    chandy state show PATH [CHECKPOINT] --uid U --state S        the state's rows [--key K] [--limit N]
    chandy state export PATH [CHECKPOINT] --uid U --state S --to FILE.parquet|FILE.csv

PATH is a savepoint's or a ``chk-<n>`` directory, or a job's directory with CHECKPOINT (an id or ``latest``).

>>> _format_of("counts.parquet"), _format_of("counts.CSV")
('parquet', 'csv')
>>> _format_of("counts.json")
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: chandy state export: counts.json: write .parquet or .csv (the file's extension \
says which).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from runtime.errors import ConfigurationError
from runtime.state_api import SavepointReader

__all__ = ["show_state", "export_state"]


def _table(reader: SavepointReader, uid: str, state: str) -> pa.Table:
    info = {op.uid: op for op in reader.operators()}.get(uid)
    if info is not None and state in info.operator_states and state not in info.keyed_states:
        return reader.operator_state(uid, state)
    return reader.keyed_state(uid, state)


def show_state(path: str, checkpoint: str | None = None, uid: str | None = None, state: str | None = None,
               key: str | None = None, limit: int = 20) -> str:
    reader = SavepointReader.read(path, checkpoint)
    if uid is None or state is None:
        lines = [f"checkpoint {reader.checkpoint_id} (max parallelism {reader.max_parallelism})"]
        for op in reader.operators():
            lines.append(f"  {op.uid} ({op.name}, parallelism {op.parallelism})")
            lines += [f"    keyed state {name}" for name in op.keyed_states]
            lines += [f"    operator state {name}" for name in op.operator_states]
        return "\n".join(lines)
    table = _table(reader, uid, state)
    if key is not None and "key" in table.column_names:
        table = table.filter(pc.equal(pc.cast(table.column("key"), pa.string()), key))
    shown = table.slice(0, limit)
    more = f"\n({table.num_rows - limit} more rows: --limit N shows more)" if table.num_rows > limit else ""
    return f"{table.num_rows} rows\n" + shown.to_pandas().to_string(index=False) + more


def _format_of(path: str) -> str:
    lowered = path.lower()
    for extension in ("parquet", "csv"):
        if lowered.endswith("." + extension):
            return extension
    raise ConfigurationError(f"chandy state export: {path}: write .parquet or .csv (the file's extension says which).")


def export_state(path: str, checkpoint: str | None, uid: str, state: str, to: str) -> str:
    kind = _format_of(to)
    table = _table(SavepointReader.read(path, checkpoint), uid, state)
    if kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, to)
    else:
        if any(pa.types.is_binary(field.type) or pa.types.is_nested(field.type) for field in table.schema):
            raise ConfigurationError(
                f"chandy state export: state '{state}' of '{uid}' has values CSV cannot hold "
                f"({', '.join(f'{f.name}: {f.type}' for f in table.schema)}): export it to a .parquet file.")
        import pyarrow.csv as csv

        csv.write_csv(table, to)
    return f"{table.num_rows} rows of state '{state}' of '{uid}' written to {to}"
