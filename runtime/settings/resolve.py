"""A job's settings, resolved once at launch from its Configuration and the Spark conf into a frozen value.

:func:`resolve` parses every value it finds (a value that does not parse is a
:class:`~runtime.errors.SettingValueError` naming the key, the value and what is accepted, before any Spark job is
submitted), picks each option's value by the order its declaration gives, and warns about ``spark.chandy.*`` keys
that no option declares, suggesting the nearest known key. The launch, the coordinator and the slots read the
resulting :class:`Settings`; nothing else reads a Spark conf key of Chandy's.

>>> settings = resolve({"heartbeat.timeout": "10 s"}, {"spark.chandy.heartbeatTimeout": "1 min",
...                                                    "spark.chandy.unalignedCheckpoints": "yes"})
>>> settings.heartbeat_timeout_ms, settings.source("heartbeat_timeout_ms")   # the job's key wins here
(10000, 'heartbeat.timeout')
>>> settings.unaligned_checkpoints, settings.progress, settings.slot_wait_ms
(True, True, 60000)
>>> resolve({}, {"spark.chandy.progress": "sometimes"})
Traceback (most recent call last):
...
runtime.errors.SettingValueError: spark.chandy.progress = 'sometimes' is not a boolean: write true or false (yes/no, on/off and 1/0 work too, in any case).
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from runtime.errors import SettingValueError
from runtime.settings.options import (
    IGNORED_FLINK_PREFIXES,
    OPTIONS,
    SPARK_SIGNALS,
    Applied,
    Option,
    known_flink_keys,
    known_spark_keys,
)
from runtime.settings.parsers import parse_boolean

__all__ = ["Settings", "resolve", "resolved_options", "unknown_keys", "warn_about_unknown_flink_keys",
           "SPARK_PREFIX"]

log = logging.getLogger(__name__)

SPARK_PREFIX = "spark.chandy."


@dataclass(frozen=True)
class Settings:
    """What a job runs with, beyond what its environment's setters hold. Durations are in milliseconds.

    The fields of options the environment applies (``unaligned_checkpoints`` and the state backend's) hold the
    Spark conf's override, None when it sets none (the job's own choice stands).

    >>> Settings().heartbeat_timeout_ms, Settings().ui_port, Settings().state_backend
    (30000, 8081, None)
    """

    unaligned_checkpoints: bool | None = None
    state_backend: str | None = None
    incremental_checkpoints: bool | None = None
    rocksdb_local_dir: str | None = None
    local_recovery: bool | None = None
    heartbeat_timeout_ms: int = 30_000
    buffer_debloating: bool = True
    buffer_debloat_target_ms: int = 1000  # 0: off
    metrics_interval_ms: int = 1000  # 0: off
    switch_interval_ms: float | None = None  # None: Python's own (5 ms)
    cpu_affinity: str = "auto"  # runtime.executor.cpu_affinity
    ui_enabled: bool = True
    ui_port: int = 8081
    ui_bind_address: str | None = None  # None: the driver's host
    ui_token: str | None = None  # None: a random one
    ui_require_token: bool = False
    progress: bool = True
    network_encryption: bool | None = None  # None: follow Spark's own settings
    tls_certificate: str | None = None
    tls_private_key: str | None = None
    tls_trusted_certificates: str | None = None
    restore_from: str | None = None
    allow_non_restored_state: bool = False
    slot_wait_ms: int = 60_000
    # Spark's own keys Chandy follows (SPARK_SIGNALS), true when Spark's conf says so
    spark_signals: tuple[str, ...] = ()
    # (option name, the key its value came from) for every option that was set
    sources: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def source(self, name: str) -> str | None:
        """The key that set option ``name``, or None when it has its default."""
        return dict(self.sources).get(name)

    def spark_says(self, key: str) -> bool:
        """Whether Spark's own ``key`` (one of ``SPARK_SIGNALS``) is true."""
        return key in self.spark_signals


def resolved_options() -> tuple[Option, ...]:
    """The options :func:`resolve` reads: those read at launch, and those with a Spark conf key."""
    return tuple(o for o in OPTIONS if o.applied is Applied.LAUNCH or o.spark_key is not None)


def resolve(job: Mapping[str, str], spark_conf: Mapping[str, str]) -> Settings:
    """The settings of a job whose Configuration holds ``job`` (Flink's keys) on a Spark conf ``spark_conf``.

    Every value present is parsed, the ones that lose too, so that a typo never waits for the day it matters. A
    blank value counts as unset.

    >>> resolve({}, {"spark.chandy.ui.enabled": "off", "spark.chandy.slotWaitSeconds": "90"}).ui_enabled
    False
    >>> resolve({"security.ssl.internal.enabled": "true"},
    ...         {"spark.chandy.network.encryption": "no"}).network_encryption   # the Spark conf wins here
    False
    """
    job = dict(job.to_dict() if hasattr(job, "to_dict") else job)
    values: dict[str, object] = {}
    sources: list[tuple[str, str]] = []
    errors: list[SettingValueError] = []
    for option in resolved_options():
        found = []
        if option.applied is Applied.LAUNCH:  # an environment option's Flink key was applied by env.configure()
            found = [(key, job[key]) for key in option.flink_keys if _given(job.get(key))][:1]  # current name first
        if option.spark_key and _given(spark_conf.get(option.spark_key)):
            spark = (option.spark_key, spark_conf[option.spark_key])
            found = [spark] + found if option.spark_conf_wins else found + [spark]
        parsed = []
        for key, text in found:
            try:
                parsed.append((key, option.parse(str(text).strip(), key)))
            except SettingValueError as error:
                errors.append(error)
        if parsed:
            key, values[option.name] = parsed[0]
            sources.append((option.name, key))
    if errors:
        raise errors[0] if len(errors) == 1 else SettingValueError(
            "Settings that do not parse: " + "; ".join(str(e) for e in errors))
    signals = tuple(key for key, _ in SPARK_SIGNALS if _is_true(spark_conf.get(key), key))
    for key, suggestion in unknown_keys((k for k in spark_conf if k.startswith(SPARK_PREFIX)), known_spark_keys()):
        log.warning("The Spark conf %s is not a setting of Chandy's, and does nothing%s", key,
                    f": did you mean {suggestion}?" if suggestion else " (check its spelling).")
    return Settings(**values, spark_signals=signals, sources=tuple(sources))


def unknown_keys(keys: Iterable[str], known: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each key of ``keys`` not in ``known``, with the nearest known key (None when none is near).

    >>> unknown_keys(["spark.chandy.heartbeatTimout", "spark.chandy.progress"], ["spark.chandy.heartbeatTimeout",
    ...                                                                       "spark.chandy.progress"])
    [('spark.chandy.heartbeatTimout', 'spark.chandy.heartbeatTimeout')]
    """
    known = sorted(set(known))
    lowered = {key.lower(): key for key in known}
    unknown = []
    for key in sorted(set(keys) - set(known)):
        near = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
        unknown.append((key, lowered[near[0]] if near else None))
    return unknown


def warn_about_unknown_flink_keys(keys: Iterable[str]) -> None:
    """One WARNING naming the keys of a job's Configuration that Chandy neither uses nor knows to ignore, each
    with the nearest key it knows (Flink drops unknown keys without a word; a typo must not pass silently).

    >>> warn_about_unknown_flink_keys(["parallelism.default", "pipeline.jars", "taskmanager.memory.process.size"])
    """
    candidates = [k for k in keys if not k.startswith(IGNORED_FLINK_PREFIXES)]
    unknown = unknown_keys(candidates, known_flink_keys() | known_spark_keys())
    if unknown:
        named = ", ".join(f"{key} (did you mean {near}?)" if near else key for key, near in unknown)
        log.warning("Configuration keys Chandy does not use (check their spelling if you meant one it does): %s",
                    named)


def _given(text) -> bool:
    return text is not None and str(text).strip() != ""


def _is_true(text, key: str) -> bool:
    if not _given(text):
        return False
    try:
        return parse_boolean(text, key)
    except SettingValueError:  # Spark's setting, Spark's to judge: for Chandy only a clear yes is a signal
        return False

