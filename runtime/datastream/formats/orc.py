"""PyFlink's ``pyflink.datastream.formats.orc``: ORC files of a row type for ``FileSink``, on ``pyarrow.orc``.

``OrcBulkWriters.for_row_type(row_type)`` writes Rows of a ``DataTypes.ROW`` (by field name; tuples by position),
each value checked against its field's type where it is written. ORC has no time-of-day type: a row type with a
``TIME`` field is refused.

>>> import pyarrow.orc
>>> from operators.file_sink import FileSink
>>> from runtime.table import DataTypes
>>> from runtime.types import Row
>>> row_type = DataTypes.ROW([DataTypes.FIELD("word", DataTypes.STRING()), DataTypes.FIELD("n", DataTypes.INT())])
>>> sink = FileSink("memory://orc-doc/out", format=OrcBulkWriters.for_row_type(row_type)); sink.validate()
>>> writer = sink.create_writer(subtask_index=0, parallelism=1); writer.open(None)
>>> writer.write_batch([Row(word="to", n=1), ("be", 2)])
>>> _ = writer.snapshot_state(checkpoint_id=1); writer.notify_checkpoint_complete(1)
>>> [pyarrow.orc.read_table(sink.fs.open(path, "rb")).to_pylist() for path in sink.committed_files()]
[[{'word': 'to', 'n': 1}, {'word': 'be', 'n': 2}]]
"""

from __future__ import annotations

from operators.file_formats.orc import OrcWriterFactory
from runtime.common.serialization import RowDataBulkWriterFactory
from runtime.settings.configuration import Configuration
from runtime.datastream.formats._options import orc_options
from runtime.datastream.formats.parquet import row_converter, row_type_of
from runtime.table.types import RowType

__all__ = ["OrcBulkWriters"]


class OrcBulkWriters:
    """Makes the writer factory of ORC files of a row type, for ``FileSink.for_bulk_format`` (PyFlink's name).

    >>> from runtime.configuration import Configuration
    >>> from runtime.table import DataTypes
    >>> factory = OrcBulkWriters.for_row_type(DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT())]),
    ...                                       writer_properties=Configuration().set_string("orc.compress", "ZSTD"))
    >>> factory, factory.extension
    (RowDataBulkWriterFactory(OrcWriterFactory(['id']), ROW<id BIGINT>), '.orc')
    """

    @staticmethod
    def for_row_type(row_type: RowType, writer_properties: Configuration | None = None,
                     hadoop_config: Configuration | None = None) -> RowDataBulkWriterFactory:
        """Writes Rows of ``row_type`` into ORC part files. ORC's writer settings are taken from
        ``hadoop_config`` and ``writer_properties`` (which win), as in Flink: ``orc.compress``,
        ``orc.compress.size``, ``orc.stripe.size``, ``orc.row.index.stride``, ``orc.bloom.filter.columns``,
        ``orc.bloom.filter.fpp`` and ``orc.dictionary.key.threshold`` are honoured; other keys are refused."""
        where = "OrcBulkWriters.for_row_type"
        row_type = row_type_of(row_type, f"{where}(row_type)")
        converter = row_converter(row_type, "OrcBulkWriters")
        options = orc_options(writer_properties, hadoop_config, converter.schema, where)
        return RowDataBulkWriterFactory(OrcWriterFactory(converter, options), row_type)
