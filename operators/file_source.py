"""``FileSource``: replayable reading of files on any fsspec filesystem.

Each file is one split, owned by subtask ``stable_hash(path) % parallelism``; every reader lists the
files itself, so no coordinator is needed, and in continuous mode it lists again every discovery
interval. A reader's position in every file it knows (byte offset and line number, or done) is its
checkpointed state, kept as union list state: after a restore at any parallelism, each reader takes the
positions of the files it now owns, and files nobody knew yet are read from the start. So every line is
read exactly once across failures, restores and rescaling.

Formats: ``"jsonl"`` (one JSON value per line), ``"csv"`` (a header line, then rows as dicts), ``"text"``
(every line as a string, blank ones too), ``"parquet"`` (rows as dicts; the position is the row number), or a
:class:`~operators.file_formats.FileRecordFormat` (PyFlink's reader formats, such as ``CsvReaderFormat`` and
``ParquetColumnarRowInputFormat`` in ``runtime.datastream.formats``; the position is the format's: a row number
or a byte offset). A malformed line of a line format fails the job with its file and line number; with
``on_malformed="skip"`` it is counted and skipped; with ``on_malformed=OutputTag(...)`` it goes, as a
:class:`MalformedRecord`, to that side output (``stream.get_side_output(tag)``). A reader format fails the job
on a malformed record, naming the file.

>>> source = FileSource("data/*.jsonl", format="jsonl")
>>> source.bounded
True
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import posixpath
import time
from dataclasses import dataclass

from operators.file_formats import FileRecordFormat, ParquetRecordFormat, RecordReader
from operators.sources import Source, SourceReader
from runtime.errors import ConfigurationError, InputUnreachableError, MalformedRecordError, storage_diagnosis
from runtime.filesystems import failing_fast, filesystem_for, is_object_store
from runtime.keys.stable_hash import stable_hash
from runtime.protocol.records import TimestampedBatch
from runtime.side_outputs import OutputTag, SideOutputRecord

__all__ = ["FileSource", "MalformedRecord", "MalformedRecordError"]  # the error lives in runtime.errors

DONE = -1
_LINE_FORMATS = ("jsonl", "csv", "text")
_RECORD_FORMATS = {"parquet": ParquetRecordFormat()}  # formats named by a string that are read record by record


@dataclass(frozen=True)
class MalformedRecord:
    """What a side output of malformed lines carries.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/malformed-doc/a.csv", b"n,m\\n1,2\\n3\\n")
    >>> reader = FileSource("memory://malformed-doc", "csv", on_malformed=OutputTag("bad")).create_reader(0, 1)
    >>> reader.open(None); [record.value if isinstance(record, SideOutputRecord) else record
    ...                     for record in reader.poll(10)]
    [{'n': '1', 'm': '2'}, MalformedRecord(path='/malformed-doc/a.csv', line=3, text='3', error=...)]
    """

    path: str
    line: int
    text: str
    error: str


class FileSource(Source):
    """Reads the files under a directory or matching a glob, exactly once across failures.

    ``continuous=True`` keeps watching for new files every ``discovery_interval_ms`` (an unbounded source).
    ``storage_options``: fsspec's options for ``path``'s protocol (such as ``{"endpoint_url": ...}`` for s3://),
    sent to the executors with the source; without them the protocol's environment variables apply.

    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/file-source-doc/a.jsonl", b'{"n": 1}\\n{"n": 2}\\n')
    >>> reader = FileSource("memory://file-source-doc", format="jsonl").create_reader(0, 1)
    >>> reader.open(None); reader.poll(10), reader.poll(10)
    ([{'n': 1}, {'n': 2}], None)

    ``timestamp_field="ts"`` stamps each record with its event time from that field (epoch milliseconds, an
    ISO-8601 string, or a datetime, taken as UTC when naive): then ``env.from_source(source, watermark_strategy,
    name)`` needs no timestamp assigner. A record without a usable timestamp is malformed (``on_malformed``).

    >>> fsspec.filesystem("memory").pipe("/file-source-ts/a.csv", b"ts,user\\n1000,ann\\n2024-01-01T00:00:01,bo\\n")
    >>> reader = FileSource("memory://file-source-ts", format="csv", timestamp_field="ts").create_reader(0, 1)
    >>> reader.open(None); reader.poll(10).timestamps
    [1000, 1704067201000]
    """

    def __init__(self, path: str, format: "str | FileRecordFormat" = "jsonl", continuous: bool = False,
                 discovery_interval_ms: float = 1000, on_malformed: "str | OutputTag" = "fail",
                 timestamp_field: str | None = None, storage_options: dict | None = None):
        if not isinstance(format, FileRecordFormat) and format not in _LINE_FORMATS + tuple(_RECORD_FORMATS):
            raise ConfigurationError(f"FileSource format must be one of {_LINE_FORMATS + tuple(_RECORD_FORMATS)} or "
                                     f"a FileRecordFormat (such as CsvReaderFormat.for_schema(schema)), got "
                                     f"{format!r}")
        if not isinstance(on_malformed, OutputTag) and on_malformed not in ("fail", "skip"):
            raise ConfigurationError(f"FileSource on_malformed must be 'fail', 'skip' or an OutputTag, got {on_malformed!r}")
        if on_malformed != "fail" and format not in _LINE_FORMATS:
            raise ConfigurationError(f"FileSource on_malformed={on_malformed!r} applies to the line formats "
                                     f"{_LINE_FORMATS}; {format!r} fails the job on a malformed record. Leave "
                                     "on_malformed out, or fix the files.")
        self.emits_side_outputs = isinstance(on_malformed, OutputTag)
        self.url = path if "://" in path else "file://" + os.path.abspath(path)
        self.format = format
        self.continuous = continuous
        self.bounded = not continuous
        self.discovery_interval_ms = discovery_interval_ms
        self.on_malformed = on_malformed
        if timestamp_field is not None and format == "text":
            raise ConfigurationError("FileSource timestamp_field needs records with fields (jsonl, csv or parquet), "
                                     "not text lines: parse them in a map and use assign_timestamps_and_watermarks.")
        self.timestamp_field = timestamp_field
        self.storage_options = dict(storage_options or {})  # pickled to the executors with the source

    @property
    def record_format(self) -> FileRecordFormat | None:
        """The format that reads each file record by record; None for the line formats."""
        return self.format if isinstance(self.format, FileRecordFormat) else _RECORD_FORMATS.get(self.format)

    def validate(self) -> None:
        """Driver, before launch: the path must be listable (an empty match is fine in continuous mode)."""
        try:
            fs, root = filesystem_for(self.url, "FileSource path", self.storage_options)
            fs = failing_fast(fs)  # seconds, not botocore's retry loop, before saying why
            files = _list_files(self.url, fs)
            bucket = root.split("/", 1)[0]
            if not files and is_object_store(fs) and not fs.exists(bucket):  # else "no files", or a wait forever
                raise FileNotFoundError(f"The specified bucket does not exist: {bucket}")
        except ConfigurationError:
            raise
        except Exception as exc:  # unreachable input: say so now
            raise InputUnreachableError(f"FileSource cannot list {self.url}: {type(exc).__name__}: {exc}. "
                                        f"{storage_diagnosis(exc) or ''}".rstrip()) from exc
        if not files and not self.continuous:
            raise InputUnreachableError(f"FileSource found no files at {self.url}: check the path or glob "
                                       "(or use continuous=True to wait for files).")

    def create_reader(self, subtask_index: int, parallelism: int) -> SourceReader:
        return _FileReader(self, subtask_index, parallelism)


def _event_time(value) -> int:
    """Epoch milliseconds from a number, a numeric or ISO-8601 string, or a datetime (naive: UTC)."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a timestamp")
    if isinstance(value, (int, float)):
        if value != value:
            raise ValueError("NaN")
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            value = datetime.datetime.fromisoformat(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return int(value.timestamp() * 1000)
    raise TypeError(f"{type(value).__name__} is not a timestamp")


def _list_files(url: str, fs) -> list[str]:
    root = fs._strip_protocol(url)
    if any(c in root for c in "*?["):
        paths = fs.glob(root)
    elif fs.isdir(root):
        # Hidden directories too (as Flink's enumerator): a FileSink's _inprogress/ and _committed/ are not output.
        paths = [p for p in fs.find(root)
                 if not any(name.startswith((".", "_")) for name in posixpath.relpath(p, root).split("/"))]
    else:
        paths = [root] if fs.exists(root) else []
    return sorted(p for p in paths if not fs.isdir(p))


class _FileReader(SourceReader):
    union_state = True  # every subtask sees every file's position after a restore

    def __init__(self, source: FileSource, subtask: int, parallelism: int):
        self.source = source
        self.subtask = subtask
        self.parallelism = parallelism
        self.fs, _ = filesystem_for(source.url, "FileSource path", source.storage_options)
        # path -> (position or DONE, next line number); the position is a byte offset for the line formats,
        # and the record format's (a row number, a byte offset) otherwise
        self.positions: dict[str, tuple[int, int]] = {}
        self.current = None  # [path, file object, header] of a line format; [path, file object, RecordReader]
        self.record_format = source.record_format
        self.next_discovery = 0.0
        self.skipped = 0

    def _owns(self, path: str) -> bool:
        return stable_hash(path) % self.parallelism == self.subtask

    def _discover(self) -> None:
        for path in _list_files(self.source.url, self.fs):
            if self._owns(path) and path not in self.positions:
                self.positions[path] = (0, 1)
        self.next_discovery = time.monotonic() + self.source.discovery_interval_ms / 1000.0

    def open(self, runtime_context) -> None:
        self._discover()

    def _next_file(self):
        for path in sorted(self.positions):
            offset, line = self.positions[path]
            if offset != DONE:
                if self.record_format is not None:
                    handle = self.fs.open(path, "rb")
                    try:
                        return [path, handle, self.record_format.open(handle, offset, path)]
                    except BaseException:
                        handle.close()
                        raise
                handle = self.fs.open(path, "rb")
                header = None
                if self.source.format == "csv":
                    header = next(csv.reader([handle.readline().decode()]), None)
                    if offset == 0:
                        self.positions[path] = (handle.tell(), 2)
                    else:
                        handle.seek(offset)
                else:
                    handle.seek(offset)
                return path, handle, header
        return None

    def _poll_records(self, max_records: int) -> list:
        path, handle, reader = self.current
        _, count = self.positions[path]
        records = reader.read(max_records)
        if records is None:
            reader.close()
            handle.close()
            self.positions[path] = (DONE, count)
            self.current = None
            return []
        self.positions[path] = (reader.position, count + len(records))
        return records

    def poll(self, max_records: int) -> list | None:
        records = self._poll(max_records)
        if records and self.source.timestamp_field is not None:
            return self._stamped(records)
        return records

    def _stamped(self, records: list) -> TimestampedBatch:
        field = self.source.timestamp_field
        kept, timestamps = [], []
        for record in records:
            if type(record) is SideOutputRecord:
                kept.append(record)
                timestamps.append(None)
                continue
            try:
                timestamps.append(_event_time(record[field]))
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"no usable timestamp in field {field!r} ({type(exc).__name__}: {exc})"
                if self.source.on_malformed == "skip":
                    self.skipped += 1
                    continue
                if isinstance(self.source.on_malformed, OutputTag):
                    kept.append(SideOutputRecord(self.source.on_malformed.tag_id,
                                                 MalformedRecord("?", 0, repr(record)[:200], problem)))
                    timestamps.append(None)
                    continue
                raise MalformedRecordError(
                    f"FileSource {self.source.url}: record {record!r:.200} has {problem}. Fix the input, or pass "
                    "on_malformed='skip' to FileSource to skip such records.") from exc
            kept.append(record)
        return TimestampedBatch.of(kept, timestamps)

    def _poll(self, max_records: int) -> list | None:
        if self.current is None:
            self.current = self._next_file()
            if self.current is None:
                if not self.source.continuous:
                    return None
                if time.monotonic() >= self.next_discovery:
                    self._discover()
                else:
                    time.sleep(0.005)
                return []
        if self.record_format is not None:
            return self._poll_records(max_records)
        path, handle, header = self.current
        offset, line_number = self.positions[path]
        records = []
        for _ in range(max_records):
            raw = handle.readline()
            if not raw:
                handle.close()
                self.positions[path] = (DONE, line_number)
                self.current = None
                break
            if not raw.endswith(b"\n") and self.source.continuous:
                break  # a line still being written: read it whole next time
            offset += len(raw)
            text = raw.decode("utf-8").rstrip("\r\n")
            line = line_number
            line_number += 1
            if not text.strip() and self.source.format != "text":
                continue  # no JSON or CSV record; a text line is a record even when blank (as in Flink and Spark)
            try:
                records.append(self._parse(text, header))
            except (ValueError, TypeError) as exc:
                if self.source.on_malformed == "skip":
                    self.skipped += 1
                    continue
                if isinstance(self.source.on_malformed, OutputTag):
                    records.append(SideOutputRecord(self.source.on_malformed.tag_id,
                                                    MalformedRecord(path, line, text, str(exc))))
                    continue
                raise MalformedRecordError(
                    f"{path}, line {line}: malformed {self.source.format} record ({exc}): {text[:200]!r}. Fix the "
                    "input, or pass on_malformed='skip' to FileSource to skip such lines.") from exc
        if self.current is not None:
            self.positions[path] = (offset, line_number)
        return records

    def _parse(self, text: str, header):
        fmt = self.source.format
        if fmt == "jsonl":
            return json.loads(text)
        if fmt == "csv":
            (row,) = list(csv.reader([text]))
            if len(row) != len(header):
                raise ValueError(f"{len(row)} fields where the header has {len(header)}")
            return dict(zip(header, row))
        return text

    def snapshot_state(self) -> list:
        return [(path, offset, line) for path, (offset, line) in sorted(self.positions.items())]

    def restore_state(self, splits: list) -> None:
        self.positions = {path: (offset, line) for path, offset, line in splits if self._owns(path)}

    def close(self) -> None:
        if self.current is not None:
            if isinstance(self.current[2], RecordReader):
                self.current[2].close()
            self.current[1].close()
        self.current = None
