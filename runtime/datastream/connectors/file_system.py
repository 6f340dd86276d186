"""PyFlink's ``pyflink.datastream.connectors.file_system``: ``FileSource`` and ``FileSink`` with PyFlink's builders.

The builders make Chandy's own :class:`operators.file_source.FileSource` and :class:`operators.file_sink.FileSink`
(the classes here are those with PyFlink's static builder methods added), so a built source reads, and a built
sink commits, exactly as ``FileSource(path, format=...)`` and ``FileSink(path, format=...)`` do: exactly once
across failures, on any fsspec filesystem.

>>> import fsspec
>>> from runtime.common.serialization import Encoder
>>> fsspec.filesystem("memory").pipe("/file-system-doc/in/a.txt", b"to be\\nor not\\n")
>>> source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "memory://file-system-doc/in") \\
...     .build()
>>> reader = source.create_reader(subtask_index=0, parallelism=1); reader.open(None); reader.poll(10)
['to be', 'or not']
>>> sink = FileSink.for_row_format("memory://file-system-doc/out", Encoder.simple_string_encoder()).build()
>>> sink.validate(); writer = sink.create_writer(subtask_index=0, parallelism=1); writer.open(None)
>>> writer.write_batch([1, "two"]); _ = writer.snapshot_state(checkpoint_id=1); writer.notify_checkpoint_complete(1)
>>> sink.read_committed()
['1', 'two']

How PyFlink's settings map onto Chandy's:

- ``StreamFormat.text_line_format()``: ``format="text"``, each line a ``str`` without its line break.
- ``monitor_continuously(interval)``: ``continuous=True`` with ``discovery_interval_ms``;
  ``process_static_file_set()`` (the default): a bounded source.
- ``Encoder.simple_string_encoder()``: ``format="text"``, ``str(record)`` and ``"\\n"`` per record, in UTF-8.
- ``RollingPolicy.default_rolling_policy(part_size, rollover_interval, inactivity_interval)``: ``max_part_bytes``
  and ``rollover_interval_ms``; this is also the builder's default, as in PyFlink (128 MiB, 60 s).
- ``RollingPolicy.on_checkpoint_rolling_policy()``: no size or time limit, so parts roll only at checkpoints.
- ``OutputFileConfig(prefix, suffix)``: parts named ``<prefix>-<run>-<subtask>-<sequence>-<n><suffix>``
  (Flink's are ``<prefix>-<uuid>-<n><suffix>``); the default, as in PyFlink, is ``part`` and no suffix.

Accepted and without effect, because Chandy's output is the same either way: the inactivity interval and
``with_bucket_check_interval`` (a part is closed at every checkpoint, and nothing becomes visible before a
checkpoint completes, in Flink as here: rolling an idle part early would only split it in two), and the
file enumerators and split assigners (each file is one split, dealt to a subtask by a stable hash of its
path; the records read are the same).

Bulk formats (``runtime.datastream.formats``): ``FileSink.for_bulk_format(path, writer_factory)`` writes with
``ParquetBulkWriters``, ``AvroParquetWriters``, ``OrcBulkWriters``, ``AvroBulkWriters`` or ``CsvBulkWriters``;
its parts roll at checkpoints only, as in Flink (``RollingPolicy.on_checkpoint_rolling_policy()``, the default
and the one accepted). ``FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), path)`` reads
Parquet as Rows; ``for_record_stream_format`` also takes ``CsvReaderFormat`` and ``AvroParquetReaders``.

Refused with a :class:`~runtime.errors.ConfigurationError` that says what to do instead, because Chandy
cannot honour them yet: charsets other than UTF-8, several paths for one source, date-time buckets, and
compaction.

Differences from PyFlink to know about: a sink built without ``with_bucket_assigner`` writes its parts
straight under the base path (Flink's default puts them in one directory per hour, ``yyyy-MM-dd--HH``; this is
``BucketAssigner.base_path_bucket_assigner()``); compressed files (``.gz``, ...) are not decompressed.
"""

from __future__ import annotations

import codecs
import os
import sys
import warnings

from operators import file_sink, file_source
from operators.file_formats import FileRecordFormat
from runtime.common.serialization import BulkWriterFactory, Encoder
from runtime.errors import ApiUsageError, ConfigurationError
from runtime.not_provided import MISSING_NAMES, absent_names
from runtime.settings.durations import Duration
from runtime.settings.parsers import parse_duration_ms, parse_memory_size

__all__ = [
    "FileSource",
    "FileSourceBuilder",
    "StreamFormat",
    "BulkFormat",
    "FileEnumeratorProvider",
    "FileSplitAssignerProvider",
    "FileSink",
    "StreamingFileSink",
    "OutputFileConfig",
    "RollingPolicy",
    "DefaultRollingPolicy",
    "OnCheckpointRollingPolicy",
    "BucketAssigner",
]

__getattr__ = absent_names(__name__)  # FileCompactStrategy, FileCompactor: say why they are missing

_DEFAULT_PART_SIZE = 128 << 20  # Flink's DefaultRollingPolicy: 128 MiB, 60 s, 60 s
_DEFAULT_INTERVAL_MS = 60_000


def _require_utf8(charset: str, where: str, instead: str) -> None:
    try:
        name = codecs.lookup(charset).name
    except (LookupError, TypeError):
        raise ConfigurationError(f"{where}({charset!r}): unknown charset. Chandy reads and writes files as "
                                 "UTF-8: leave the charset out, or pass 'UTF-8'.") from None
    if name != "utf-8":
        raise ConfigurationError(f"{where}({charset!r}): Chandy reads and writes files as UTF-8 only. {instead}")


def _positive_millis(span, where: str) -> int:
    millis = parse_duration_ms(span, where)
    if millis <= 0:
        raise ConfigurationError(f"{where}({span!r}): the interval must be positive (at least 1 ms).")
    return millis


# -- FileSource ----------------------------------------------------------------------------------------------


class FileEnumeratorProvider:
    """Which files a source reads and how it splits them (PyFlink's name). Chandy reads the files under the
    path recursively, skips hidden ones (names starting with ``.`` or ``_``) and makes each file one split,
    whichever provider is set: the records read are the same.

    >>> FileEnumeratorProvider.default_non_splittable_file_enumerator()
    FileEnumeratorProvider.default_non_splittable_file_enumerator()
    """

    def __init__(self, name: str):
        self._name = name

    @staticmethod
    def default_splittable_file_enumerator() -> "FileEnumeratorProvider":
        return FileEnumeratorProvider("default_splittable_file_enumerator")

    @staticmethod
    def default_non_splittable_file_enumerator() -> "FileEnumeratorProvider":
        return FileEnumeratorProvider("default_non_splittable_file_enumerator")

    def __repr__(self) -> str:
        return f"FileEnumeratorProvider.{self._name}()"


class FileSplitAssignerProvider:
    """Which subtask reads which file (PyFlink's name). Chandy deals each file to a subtask by a stable hash of
    its path, whichever provider is set.

    >>> FileSplitAssignerProvider.locality_aware_split_assigner()
    FileSplitAssignerProvider.locality_aware_split_assigner()
    """

    @staticmethod
    def locality_aware_split_assigner() -> "FileSplitAssignerProvider":
        return FileSplitAssignerProvider()

    def __repr__(self) -> str:
        return "FileSplitAssignerProvider.locality_aware_split_assigner()"


class StreamFormat:
    """How a file source turns a file into records, one by one (PyFlink's name): :meth:`text_line_format`, and
    ``CsvReaderFormat.for_schema(schema)``, ``AvroParquetReaders.for_generic_record(schema)`` of
    ``runtime.datastream.formats``.

    >>> StreamFormat.text_line_format()
    StreamFormat.text_line_format()
    """

    def __init__(self, format: "str | FileRecordFormat"):
        self.format = format  # the operators.file_source.FileSource format it maps onto

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        """Each line of a file as a ``str``, without its line break (``\\n`` or ``\\r\\n``).

        Blank lines are records too (``''``), as in Flink. Only UTF-8 is read (ASCII files are UTF-8 too).

        >>> try:
        ...     StreamFormat.text_line_format("UTF-16")
        ... except ConfigurationError as error:
        ...     print(error)
        StreamFormat.text_line_format('UTF-16'): Chandy reads and writes files as UTF-8 only. Convert the files
        to UTF-8 (iconv -f UTF-16 -t UTF-8), or read them with a Source of your own.
        """
        _require_utf8(charset_name, "StreamFormat.text_line_format",
                      f"Convert the files to UTF-8 (iconv -f {charset_name} -t UTF-8), or read them with a Source of "
                      "your own.")
        return StreamFormat("text")

    def __repr__(self) -> str:
        return "StreamFormat.text_line_format()" if self.format == "text" else f"StreamFormat({self.format!r})"


class BulkFormat:
    """How a file source reads a file in batches (PyFlink's name): ``ParquetColumnarRowInputFormat`` of
    ``runtime.datastream.formats.parquet``, for :meth:`FileSource.for_bulk_file_format`.

    >>> from operators.file_formats import ParquetRecordFormat
    >>> BulkFormat(ParquetRecordFormat()).format
    ParquetRecordFormat(DictShape(), batch_size=256)
    """

    def __init__(self, format: FileRecordFormat):
        self.format = format  # the operators.file_source.FileSource format it maps onto

    def __repr__(self) -> str:
        return f"BulkFormat({self.format!r})"


class FileSourceBuilder:
    """Configures a :class:`FileSource`; start with :meth:`FileSource.for_record_stream_format`.

    >>> builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "logs/")
    >>> source = builder.monitor_continuously(Duration.of_seconds(10)).build()
    >>> source.continuous, source.discovery_interval_ms, source.format
    (True, 10000, 'text')
    >>> builder.process_static_file_set().build().bounded
    True
    """

    def __init__(self, stream_format: "StreamFormat | BulkFormat", path: str):
        self._format = stream_format.format
        self._path = path
        self._continuous = False
        self._discovery_interval_ms = 1000

    def monitor_continuously(self, discovery_interval: Duration) -> "FileSourceBuilder":
        """Keep watching the path for new files, listing it every ``discovery_interval`` (an unbounded source)."""
        self._discovery_interval_ms = _positive_millis(discovery_interval, "monitor_continuously")
        self._continuous = True
        return self

    def process_static_file_set(self) -> "FileSourceBuilder":
        """Read the files there are when the job starts, then end (the default)."""
        self._continuous = False
        return self

    def set_file_enumerator(self, file_enumerator: FileEnumeratorProvider) -> "FileSourceBuilder":
        """Accepted; Chandy enumerates files one way (see :class:`FileEnumeratorProvider`)."""
        if not isinstance(file_enumerator, FileEnumeratorProvider):
            raise ApiUsageError(f"set_file_enumerator() expects a FileEnumeratorProvider, got "
                                f"{type(file_enumerator).__name__}")
        return self

    def set_split_assigner(self, split_assigner: FileSplitAssignerProvider) -> "FileSourceBuilder":
        """Accepted; Chandy assigns files one way (see :class:`FileSplitAssignerProvider`)."""
        if not isinstance(split_assigner, FileSplitAssignerProvider):
            raise ApiUsageError(f"set_split_assigner() expects a FileSplitAssignerProvider, got "
                                f"{type(split_assigner).__name__}")
        return self

    def build(self) -> "FileSource":
        return FileSource(self._path, format=self._format, continuous=self._continuous,
                          discovery_interval_ms=self._discovery_interval_ms)


def _one_path(paths: tuple, where: str) -> str:
    if len(paths) == 1 and isinstance(paths[0], (str, os.PathLike)) and os.fspath(paths[0]):
        return os.fspath(paths[0])
    if len(paths) > 1:
        raise ConfigurationError(
            f"{where} got {len(paths)} paths; Chandy's FileSource reads one path: a file, a directory or a glob "
            "(such as 'logs/2024-*/*.txt'). Use one glob that matches them all, or one source per path joined with "
            "union: env.from_source(a, strategy, 'a').union(env.from_source(b, strategy, 'b')).")
    raise ConfigurationError(f"{where} needs the path of a file, a directory or a glob, got {paths!r}.")


class FileSource(file_source.FileSource):
    """Chandy's :class:`operators.file_source.FileSource`, also built as in PyFlink (its constructor,
    ``FileSource(path, format=...)``, works as well).

    >>> source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "data/in").build()
    >>> type(source).__mro__[1].__module__, source.format, source.bounded
    ('operators.file_source', 'text', True)
    >>> FileSource.for_record_stream_format(StreamFormat.text_line_format(), "a.txt", "b.txt")
    Traceback (most recent call last):
    ...
    runtime.errors.ConfigurationError: FileSource.for_record_stream_format got 2 paths; ... union: ...
    """

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """A builder of a source reading ``paths`` (one file, directory or glob) record by record."""
        if isinstance(stream_format, BulkFormat):
            raise ApiUsageError(f"FileSource.for_record_stream_format(stream_format, path) got the BulkFormat "
                                f"{stream_format!r}: pass it to FileSource.for_bulk_file_format(bulk_format, path).")
        if not isinstance(stream_format, StreamFormat):
            raise ApiUsageError(f"FileSource.for_record_stream_format(stream_format, path) expects a StreamFormat: "
                                "StreamFormat.text_line_format(), CsvReaderFormat.for_schema(schema) or "
                                f"AvroParquetReaders.for_generic_record(schema); got {type(stream_format).__name__}")
        return FileSourceBuilder(stream_format, _one_path(paths, "FileSource.for_record_stream_format"))

    @staticmethod
    def for_bulk_file_format(bulk_format: BulkFormat, *paths: str) -> FileSourceBuilder:
        """A builder of a source reading ``paths`` (one file, directory or glob) in batches, with a
        :class:`BulkFormat`: ``ParquetColumnarRowInputFormat(row_type)`` reads Parquet files as Rows.

        >>> from runtime.datastream.formats.parquet import ParquetColumnarRowInputFormat
        >>> from runtime.table import DataTypes
        >>> row_type = DataTypes.ROW([DataTypes.FIELD("id", DataTypes.BIGINT())])
        >>> FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), "data/").build().format
        ParquetRecordFormat(RowShape(['id'], case_sensitive=True, utc_timestamp=False), batch_size=2048)
        >>> FileSource.for_bulk_file_format(StreamFormat.text_line_format(), "data/")
        Traceback (most recent call last):
        ...
        runtime.errors.ApiUsageError: FileSource.for_bulk_file_format(bulk_format, path) expects a BulkFormat: ...
        """
        if not isinstance(bulk_format, BulkFormat):
            hint = (" (a StreamFormat: pass it to FileSource.for_record_stream_format)"
                    if isinstance(bulk_format, StreamFormat) else "")
            raise ApiUsageError(f"FileSource.for_bulk_file_format(bulk_format, path) expects a BulkFormat: "
                                f"ParquetColumnarRowInputFormat(row_type), the one Chandy has; got "
                                f"{type(bulk_format).__name__}{hint}.")
        return FileSourceBuilder(bulk_format, _one_path(paths, "FileSource.for_bulk_file_format"))


# -- FileSink ------------------------------------------------------------------------------------------------


class BucketAssigner:
    """Which directory under the base path a record's part file goes to (PyFlink's name). Chandy's FileSink
    writes every part straight under the base path: :meth:`base_path_bucket_assigner`.
    ``date_time_bucket_assigner`` can be made, and a sink builder refuses it.

    >>> BucketAssigner.base_path_bucket_assigner()
    BucketAssigner.base_path_bucket_assigner()
    >>> BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd", "UTC")
    BucketAssigner.date_time_bucket_assigner('yyyy-MM-dd', 'UTC')
    """

    def __init__(self, date_time_format: str | None = None, timezone_id: str | None = None):
        self.date_time_format = date_time_format  # None: the base path
        self.timezone_id = timezone_id

    @staticmethod
    def base_path_bucket_assigner() -> "BucketAssigner":
        return BucketAssigner()

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None) \
            -> "BucketAssigner":
        return BucketAssigner(format_str, timezone_id)

    def __repr__(self) -> str:
        if self.date_time_format is None:
            return "BucketAssigner.base_path_bucket_assigner()"
        return f"BucketAssigner.date_time_bucket_assigner({self.date_time_format!r}, {self.timezone_id!r})"


class RollingPolicy:
    """When a sink closes its part file and opens the next (PyFlink's name); parts always roll at checkpoints.

    >>> RollingPolicy.default_rolling_policy(part_size=1 << 20, rollover_interval=15 * 60 * 1000)
    RollingPolicy.default_rolling_policy(part_size=1048576, rollover_interval=900000, inactivity_interval=60000)
    >>> RollingPolicy.on_checkpoint_rolling_policy()
    RollingPolicy.on_checkpoint_rolling_policy()
    """

    def __init__(self, max_part_bytes: int, rollover_interval_ms: int | None):
        self.max_part_bytes = max_part_bytes
        self.rollover_interval_ms = rollover_interval_ms

    @staticmethod
    def default_rolling_policy(part_size: int = _DEFAULT_PART_SIZE, rollover_interval: int = _DEFAULT_INTERVAL_MS,
                               inactivity_interval: int = _DEFAULT_INTERVAL_MS) -> "DefaultRollingPolicy":
        """Roll at ``part_size`` (bytes, or a memory size such as ``"128 mb"``), and when a part is
        ``rollover_interval`` old (ms, a ``Duration`` or a duration string such as ``"15 min"``).

        ``inactivity_interval`` is checked and kept, with no effect on the output (see the module's notes).

        >>> RollingPolicy.default_rolling_policy("64 mb", "15 min").max_part_bytes
        67108864
        """
        part_size = parse_memory_size(part_size, "default_rolling_policy(part_size)")
        if part_size <= 0:
            raise ConfigurationError(f"default_rolling_policy(part_size={part_size!r}): the part size is a positive "
                                     "number of bytes.")
        return DefaultRollingPolicy(part_size, _positive_millis(rollover_interval, "rollover_interval"),
                                    _positive_millis(inactivity_interval, "inactivity_interval"))

    @staticmethod
    def on_checkpoint_rolling_policy() -> "OnCheckpointRollingPolicy":
        """Roll only at checkpoints (one part per subtask and checkpoint)."""
        return OnCheckpointRollingPolicy(sys.maxsize, None)


class DefaultRollingPolicy(RollingPolicy):
    """Rolls by size and age (and at checkpoints): made by :meth:`RollingPolicy.default_rolling_policy`.

    >>> RollingPolicy.default_rolling_policy().max_part_bytes
    134217728
    """

    def __init__(self, max_part_bytes: int, rollover_interval_ms: int, inactivity_interval_ms: int):
        super().__init__(max_part_bytes, rollover_interval_ms)
        self.inactivity_interval_ms = inactivity_interval_ms

    def __repr__(self) -> str:
        return (f"RollingPolicy.default_rolling_policy(part_size={self.max_part_bytes}, "
                f"rollover_interval={self.rollover_interval_ms}, inactivity_interval={self.inactivity_interval_ms})")


class OnCheckpointRollingPolicy(RollingPolicy):
    """Rolls only at checkpoints: made by :meth:`RollingPolicy.on_checkpoint_rolling_policy`.

    >>> RollingPolicy.on_checkpoint_rolling_policy().rollover_interval_ms is None
    True
    """

    def __repr__(self) -> str:
        return "RollingPolicy.on_checkpoint_rolling_policy()"


class OutputFileConfig:
    """The prefix and suffix of part file names (PyFlink's name): a sink names its parts
    ``<prefix>-<run>-<subtask>-<sequence>-<n><suffix>``.

    >>> config = OutputFileConfig.builder().with_part_prefix("events").with_part_suffix(".log").build()
    >>> config.get_part_prefix(), config.get_part_suffix()
    ('events', '.log')
    """

    @staticmethod
    def builder() -> "OutputFileConfig.OutputFileConfigBuilder":
        return OutputFileConfig.OutputFileConfigBuilder()

    def __init__(self, part_prefix: str, part_suffix: str):
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    def __repr__(self) -> str:
        return f"OutputFileConfig({self.part_prefix!r}, {self.part_suffix!r})"

    class OutputFileConfigBuilder:
        """Builds an :class:`OutputFileConfig`; the defaults are prefix ``'part'`` and suffix ``''``.

        >>> OutputFileConfig.builder().build()
        OutputFileConfig('part', '')
        """

        def __init__(self):
            self.part_prefix = "part"
            self.part_suffix = ""

        def with_part_prefix(self, prefix: str) -> "OutputFileConfig.OutputFileConfigBuilder":
            self.part_prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> "OutputFileConfig.OutputFileConfigBuilder":
            self.part_suffix = suffix
            return self

        def build(self) -> "OutputFileConfig":
            return OutputFileConfig(self.part_prefix, self.part_suffix)


class _Builder:
    """What the sink builders of ``FileSink`` and ``StreamingFileSink`` share (as PyFlink's BaseBuilder): the sink
    class, its base path, its format, rolling policy and part names."""

    def __init__(self, sink_class: type, base_path: str, format, policy: RollingPolicy, where: str):
        self._sink_class = sink_class
        self._base_path = _one_path((base_path,), where)
        self._format = format  # operators.file_sink.FileSink's: "text", or a BulkWriterFactory
        self._policy = policy
        self._names = OutputFileConfig.builder().build()

    def with_bucket_check_interval(self, interval: int):
        """Accepted (a positive number of ms); parts are checked for rolling at every write here."""
        _positive_millis(interval, "with_bucket_check_interval")
        return self

    def with_bucket_assigner(self, bucket_assigner: BucketAssigner):
        """Only ``BucketAssigner.base_path_bucket_assigner()``: Chandy's FileSink writes no bucket directories."""
        if not isinstance(bucket_assigner, BucketAssigner):
            raise ApiUsageError(f"with_bucket_assigner() expects a BucketAssigner, got "
                                f"{type(bucket_assigner).__name__}")
        if bucket_assigner.date_time_format is not None:
            raise ConfigurationError(
                f"with_bucket_assigner({bucket_assigner!r}) cannot be honoured yet: Chandy's FileSink writes every "
                "part straight under its base path, with no bucket directories. Use "
                "BucketAssigner.base_path_bucket_assigner(), or one FileSink per bucket (split the stream with "
                "filter or side outputs).")
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy):
        """``RollingPolicy.default_rolling_policy(...)`` or ``RollingPolicy.on_checkpoint_rolling_policy()``."""
        if not isinstance(rolling_policy, RollingPolicy):
            raise ApiUsageError(f"with_rolling_policy() expects a RollingPolicy, got {type(rolling_policy).__name__}")
        self._policy = rolling_policy
        return self

    def with_output_file_config(self, output_file_config: OutputFileConfig):
        """The prefix and suffix of the part files' names."""
        if not isinstance(output_file_config, OutputFileConfig):
            raise ApiUsageError(f"with_output_file_config() expects an OutputFileConfig, got "
                                f"{type(output_file_config).__name__}")
        self._names = output_file_config
        return self

    def build(self):
        return self._sink_class(self._base_path, format=self._format, max_part_bytes=self._policy.max_part_bytes,
                                rollover_interval_ms=self._policy.rollover_interval_ms,
                                part_prefix=self._names.part_prefix, part_suffix=self._names.part_suffix)


class _RowFormatBuilder(_Builder):
    """A builder of a sink that writes each record with an :class:`~runtime.common.serialization.Encoder`."""

    def __init__(self, sink_class: type, base_path: str, encoder: Encoder):
        where = f"{sink_class.__name__}.for_row_format"
        if type(encoder) is not Encoder:  # a subclass's own encode() would never be called: refuse it
            raise ApiUsageError(f"{where}(base_path, encoder) expects Encoder.simple_string_encoder(), got "
                                f"{type(encoder).__name__}. To write records another way, turn them into strings with "
                                "a map first, use FileSink(path, format='jsonl' or 'csv'), or a bulk format "
                                "(FileSink.for_bulk_format).")
        _require_utf8(encoder.charset, "Encoder.simple_string_encoder",
                      "Use Encoder.simple_string_encoder() (UTF-8), or a sink of your own to write another charset.")
        super().__init__(sink_class, base_path, "text", RollingPolicy.default_rolling_policy(), where)


_BULK_WRITERS = ("ParquetBulkWriters.for_row_type(row_type), AvroParquetWriters.for_generic_record(schema), "
                 "OrcBulkWriters.for_row_type(row_type), AvroBulkWriters.for_generic_record(schema) or "
                 "CsvBulkWriters.for_schema(schema) (runtime.datastream.formats)")


class _BulkFormatBuilder(_Builder):
    """A builder of a sink that writes its part files with a
    :class:`~runtime.common.serialization.BulkWriterFactory`; they roll at checkpoints only, as in Flink."""

    def __init__(self, sink_class: type, base_path: str, writer_factory: BulkWriterFactory):
        where = f"{sink_class.__name__}.for_bulk_format"
        if not isinstance(writer_factory, BulkWriterFactory):
            raise ApiUsageError(f"{where}(base_path, writer_factory) expects a BulkWriterFactory: {_BULK_WRITERS}; "
                                f"got {type(writer_factory).__name__}.")
        super().__init__(sink_class, base_path, writer_factory, RollingPolicy.on_checkpoint_rolling_policy(), where)

    def with_rolling_policy(self, rolling_policy: RollingPolicy):
        """Only ``RollingPolicy.on_checkpoint_rolling_policy()`` (the default): a bulk format's part rolls at
        checkpoints, as in Flink, since a Parquet, ORC or Avro file is complete only once closed."""
        if isinstance(rolling_policy, RollingPolicy) and not isinstance(rolling_policy, OnCheckpointRollingPolicy):
            raise ConfigurationError(
                f"with_rolling_policy({rolling_policy!r}): a bulk-format sink rolls its part files at checkpoints "
                "only, as in Flink (a Parquet, ORC or Avro file is complete only once it is closed). Use "
                "RollingPolicy.on_checkpoint_rolling_policy(), the default, and a shorter checkpoint interval for "
                "smaller parts.")
        return super().with_rolling_policy(rolling_policy)


class _Compaction:
    """``enable_compact`` and ``disable_compact`` of PyFlink's ``FileSink`` builders."""

    def enable_compact(self, strategy, compactor):
        """Refused: Chandy's FileSink does not merge part files yet."""
        raise ConfigurationError(MISSING_NAMES[__name__]["FileCompactor"].message("FileSink compaction"))

    def disable_compact(self):
        """Accepted: no compaction is what Chandy's FileSink does."""
        return self


class FileSink(file_sink.FileSink):
    """Chandy's :class:`operators.file_sink.FileSink`, also built as in PyFlink (its constructor,
    ``FileSink(path, format=...)``, works as well). Use it with ``stream.sink_to(sink)``.

    >>> from runtime.common.serialization import Encoder
    >>> sink = (FileSink.for_row_format("out/", Encoder.simple_string_encoder())
    ...         .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1 << 20, rollover_interval=30_000))
    ...         .build())
    >>> sink.format, sink.max_part_bytes, sink.rollover_interval_ms
    ('text', 1048576, 30000)
    """

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "FileSink.RowFormatBuilder":
        """A builder of a sink writing each record under ``base_path`` with ``encoder``."""
        return FileSink.RowFormatBuilder(FileSink, base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> "FileSink.BulkFormatBuilder":
        """A builder of a sink writing its part files under ``base_path`` with ``writer_factory``:
        ``ParquetBulkWriters.for_row_type(row_type)``, ``OrcBulkWriters``, ``AvroBulkWriters``, ... of
        ``runtime.datastream.formats``. A part is written whole when it closes, at each checkpoint.

        >>> from runtime.datastream.formats.parquet import ParquetBulkWriters
        >>> from runtime.table import DataTypes
        >>> row_type = DataTypes.ROW([DataTypes.FIELD("word", DataTypes.STRING())])
        >>> sink = FileSink.for_bulk_format("out/", ParquetBulkWriters.for_row_type(row_type)).build()
        >>> sink.format, sink.max_part_bytes == sys.maxsize, sink.rollover_interval_ms
        (RowDataBulkWriterFactory(ParquetWriterFactory(['word']), ROW<word STRING>), True, None)
        >>> FileSink.for_bulk_format("out/", Encoder.simple_string_encoder())
        Traceback (most recent call last):
        ...
        runtime.errors.ApiUsageError: FileSink.for_bulk_format(base_path, writer_factory) expects a ...
        """
        return FileSink.BulkFormatBuilder(FileSink, base_path, writer_factory)

    class RowFormatBuilder(_RowFormatBuilder, _Compaction):
        """Configures a row-format :class:`FileSink`; start with :meth:`FileSink.for_row_format`.

        >>> from runtime.common.serialization import Encoder
        >>> builder = FileSink.for_row_format("out/", Encoder.simple_string_encoder())
        >>> sink = builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
        >>> sink.rollover_interval_ms is None
        True
        >>> try:
        ...     builder.with_bucket_assigner(BucketAssigner.date_time_bucket_assigner())
        ... except ConfigurationError as error:
        ...     print(error)
        with_bucket_assigner(BucketAssigner.date_time_bucket_assigner('yyyy-MM-dd--HH', None)) cannot be honoured
        yet: ... Use BucketAssigner.base_path_bucket_assigner(), or one FileSink per bucket ...
        """

    class BulkFormatBuilder(_BulkFormatBuilder, _Compaction):
        """Configures a bulk-format :class:`FileSink`; start with :meth:`FileSink.for_bulk_format`. Its parts roll
        at checkpoints only (the one rolling policy accepted).

        >>> from runtime.datastream.formats.avro import AvroBulkWriters, AvroSchema
        >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
        >>> builder = FileSink.for_bulk_format("out/", AvroBulkWriters.for_generic_record(schema))
        >>> builder.with_output_file_config(OutputFileConfig("users", ".avro")).disable_compact().build().part_suffix
        '.avro'
        >>> builder.with_rolling_policy(RollingPolicy.default_rolling_policy())
        Traceback (most recent call last):
        ...
        runtime.errors.ConfigurationError: with_rolling_policy(RollingPolicy.default_rolling_policy(...)): a bulk-format
        sink rolls its part files at checkpoints only, ... Use RollingPolicy.on_checkpoint_rolling_policy(), ...
        """


class StreamingFileSink(file_sink.FileSink):
    """PyFlink's older file sink (deprecated there since Flink 1.15, and here: it warns likewise): the same
    Chandy :class:`operators.file_sink.FileSink`, for ``stream.add_sink(sink)``.

    >>> import warnings
    >>> from runtime.common.serialization import Encoder
    >>> with warnings.catch_warnings(record=True):
    ...     sink = StreamingFileSink.for_row_format("out/", Encoder.simple_string_encoder()).build()
    >>> sink.format, sink.max_part_bytes
    ('text', 134217728)
    """

    def __init__(self, *args, **kwargs):
        warnings.warn("StreamingFileSink is deprecated (in PyFlink since 1.15): use FileSink instead.",
                      DeprecationWarning, stacklevel=3)
        super().__init__(*args, **kwargs)

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "StreamingFileSink.DefaultRowFormatBuilder":
        """A builder of a sink writing each record under ``base_path`` with ``encoder``."""
        return StreamingFileSink.DefaultRowFormatBuilder(StreamingFileSink, base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) \
            -> "StreamingFileSink.DefaultBulkFormatBuilder":
        """A builder of a sink writing its part files with ``writer_factory``, as :meth:`FileSink.for_bulk_format`."""
        return StreamingFileSink.DefaultBulkFormatBuilder(StreamingFileSink, base_path, writer_factory)

    class DefaultRowFormatBuilder(_RowFormatBuilder):
        """Configures a row-format :class:`StreamingFileSink`, as :class:`FileSink.RowFormatBuilder` does.

        >>> from runtime.common.serialization import Encoder
        >>> builder = StreamingFileSink.for_row_format("out/", Encoder.simple_string_encoder())
        >>> builder.with_output_file_config(OutputFileConfig("part", ".txt")) is builder
        True
        """

    class DefaultBulkFormatBuilder(_BulkFormatBuilder):
        """Configures a bulk-format :class:`StreamingFileSink`, as :class:`FileSink.BulkFormatBuilder` does.

        >>> from runtime.datastream.formats.avro import AvroBulkWriters, AvroSchema
        >>> schema = AvroSchema.parse_string('{"type": "record", "name": "User", "fields": []}')
        >>> builder = StreamingFileSink.for_bulk_format("out/", AvroBulkWriters.for_generic_record(schema))
        >>> builder.with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()) is builder
        True
        """
