"""Settings: one parser per kind of value, one declaration per option, resolved once per job.

- :mod:`~runtime.settings.parsers`: booleans, durations, memory sizes, whole numbers, ports;
- :mod:`~runtime.settings.options`: the table of every option (Flink keys, ``spark.chandy.*`` key, parser,
  default, description) and the Flink keys Chandy knows and ignores;
- :mod:`~runtime.settings.resolve`: the job's Configuration and the Spark conf, read once into :class:`Settings`;
- :mod:`~runtime.settings.reference`: the README's configuration reference, rendered from the table;
- :mod:`~runtime.settings.configuration`, :mod:`~runtime.settings.durations`: PyFlink's ``Configuration``,
  ``Duration`` and ``Time``; :mod:`~runtime.settings.units`: sizes and counts as people read them.

>>> from runtime.settings import resolve, parse_duration_ms
>>> resolve({}, {"spark.chandy.metricsInterval": "5 s"}).metrics_interval_ms, parse_duration_ms("2 min")
(5000, 120000)
"""

from runtime.settings.options import OPTIONS, Option
from runtime.settings.parsers import parse_boolean, parse_duration_ms, parse_memory_size
from runtime.settings.resolve import Settings, resolve

__all__ = ["OPTIONS", "Option", "Settings", "resolve", "parse_boolean", "parse_duration_ms", "parse_memory_size"]
