"""Flink's writer settings (the ``parquet.*`` and ``orc.*`` keys of a Hadoop configuration or ORC writer properties)
as the keyword arguments of pyarrow's writers.

A key Chandy's writers have no counterpart for (filesystem settings among them: Chandy reaches files through the
path's fsspec URL) is refused, naming the keys it honours, rather than dropped unnoticed.

>>> from runtime.configuration import Configuration
>>> parquet_options(Configuration().set_string("parquet.compression", "ZSTD"), "ParquetBulkWriters.for_row_type")
{'compression': 'zstd'}
>>> parquet_options(Configuration().set_string("fs.s3a.endpoint", "x"), "ParquetBulkWriters.for_row_type")
Traceback (most recent call last):
...
runtime.errors.ConfigurationError: ParquetBulkWriters.for_row_type: the setting 'fs.s3a.endpoint' has no counterpart
in Chandy's Parquet writer (pyarrow). It honours ['parquet.compression', 'parquet.enable.dictionary',
'parquet.page.size']; filesystem settings come with the path (its fsspec URL and that filesystem's own
configuration). Remove the setting.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from runtime.settings.configuration import Configuration, parse_boolean
from runtime.errors import ApiUsageError, ConfigurationError

__all__ = ["parquet_options", "orc_options", "settings_of"]


def settings_of(config, where: str) -> dict[str, str]:
    """The key-value pairs of a :class:`~runtime.configuration.Configuration` (None: none)."""
    if config is None:
        return {}
    if not isinstance(config, Configuration):
        raise ApiUsageError(f"{where} expects a Configuration (runtime.common.Configuration) or None, got "
                            f"{type(config).__name__}.")
    return config.to_dict()


def _choice(names: dict[str, str], key: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        choice = names.get(str(value).strip().upper())
        if choice is None:
            raise ConfigurationError(f"{key} = {value!r}: Chandy's writers (pyarrow) take one of {sorted(names)}.")
        return choice
    return parse


def _positive_int(key: str, multiple_of: int = 1) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            number = 0
        if number <= 0 or number % multiple_of:
            unit = "" if multiple_of == 1 else f" that is a multiple of {multiple_of} (ORC's memory block)"
            raise ConfigurationError(f"{key} = {value!r}: a positive whole number{unit} is needed.")
        return number
    return parse


def _fraction(key: str) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = float(str(value).strip())
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= 1.0:
            raise ConfigurationError(f"{key} = {value!r}: a number from 0 to 1 is needed.")
        return number
    return parse


_PARQUET = {
    "parquet.compression": ("compression", _choice(
        {"UNCOMPRESSED": "none", "SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "LZ4": "lz4",
         "ZSTD": "zstd"}, "parquet.compression")),
    "parquet.page.size": ("data_page_size", _positive_int("parquet.page.size")),
    "parquet.enable.dictionary": ("use_dictionary", lambda value: parse_boolean(value, "parquet.enable.dictionary")),
}

_ORC = {
    "orc.compress": ("compression", _choice(
        {"NONE": "uncompressed", "ZLIB": "zlib", "SNAPPY": "snappy", "LZ4": "lz4", "ZSTD": "zstd"}, "orc.compress")),
    "orc.compress.size": ("compression_block_size", _positive_int("orc.compress.size", 64 << 10)),
    "orc.stripe.size": ("stripe_size", _positive_int("orc.stripe.size")),
    "orc.row.index.stride": ("row_index_stride", _positive_int("orc.row.index.stride")),
    "orc.bloom.filter.fpp": ("bloom_filter_fpp", _fraction("orc.bloom.filter.fpp")),
    "orc.dictionary.key.threshold": ("dictionary_key_size_threshold", _fraction("orc.dictionary.key.threshold")),
}


def _options(settings: dict[str, str], honoured: dict, writer: str, where: str) -> dict:
    options = {}
    for key, value in settings.items():
        if key not in honoured:
            raise ConfigurationError(
                f"{where}: the setting {key!r} has no counterpart in Chandy's {writer} writer (pyarrow). It honours "
                f"{sorted(honoured)}; filesystem settings come with the path (its fsspec URL and that filesystem's own "
                "configuration). Remove the setting.")
        name, parse = honoured[key]
        options[name] = parse(value)
    return options


def parquet_options(hadoop_config: Configuration | None, where: str) -> dict:
    """``pyarrow.parquet.ParquetWriter``'s keyword arguments for the ``parquet.*`` keys of ``hadoop_config``."""
    return _options(settings_of(hadoop_config, where), _PARQUET, "Parquet", where)


def orc_options(writer_properties: Configuration | None, hadoop_config: Configuration | None, schema: pa.Schema,
                where: str) -> dict:
    """``pyarrow.orc.ORCWriter``'s keyword arguments for the ``orc.*`` keys of ``hadoop_config`` and
    ``writer_properties`` (which win), as Flink's ORC writer takes them from both.

    >>> from runtime.configuration import Configuration
    >>> orc_options(Configuration().set_string("orc.bloom.filter.columns", "id"), None,
    ...             pa.schema([("name", pa.string()), ("id", pa.int64())]), "OrcBulkWriters.for_row_type")
    {'bloom_filter_columns': [1]}
    """
    settings = {**settings_of(hadoop_config, where), **settings_of(writer_properties, where)}
    columns = settings.pop("orc.bloom.filter.columns", None)
    options = _options(settings, {**_ORC, "orc.bloom.filter.columns": None}, "ORC", where)
    if columns is not None:
        names = [name.strip() for name in columns.split(",") if name.strip()]
        unknown = [name for name in names if name not in schema.names]
        if unknown:
            raise ConfigurationError(f"{where}: orc.bloom.filter.columns names {unknown}, which the row type does not "
                                     f"have (its fields are {schema.names}).")
        options["bloom_filter_columns"] = [schema.names.index(name) for name in names]
    return options
