"""Every setting Chandy reads, declared once: Flink's ``ConfigOption`` idea in our words.

An :class:`Option` names its Flink key(s) (the current name first, older names after it, as Flink's fallback
keys), its ``spark.chandy.*`` key, its parser, its default and what it does. ``OPTIONS`` is the table of all of
them: the environment applies and :func:`runtime.settings.resolve.resolve` reads settings from it, the README's
configuration reference is rendered from it, and a key in neither the table nor ``IGNORED_FLINK_KEYS`` is
named in a warning with the nearest known key.

>>> option = option_named("heartbeat_timeout_ms")
>>> option.flink_keys, option.spark_key, option.default
(('heartbeat.timeout',), 'spark.chandy.heartbeatTimeout', 30000)
>>> option.parse("1 min", "heartbeat.timeout")
60000
>>> sorted(o.spark_key for o in OPTIONS if o.spark_key and o.spark_key.startswith("spark.chandy.ui."))
['spark.chandy.ui.bindAddress', 'spark.chandy.ui.enabled', 'spark.chandy.ui.port', 'spark.chandy.ui.requireToken', 'spark.chandy.ui.token']
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Mapping

from runtime.errors import SettingValueError
from runtime.settings.parsers import (
    parse_boolean,
    parse_duration_ms,
    parse_int,
    parse_port,
    parse_string,
)

__all__ = ["Option", "Applied", "Choice", "OPTIONS", "IGNORED_FLINK_KEYS", "IGNORED_FLINK_PREFIXES",
           "SPARK_SIGNALS", "option_named", "known_flink_keys", "known_spark_keys", "parse_float",
           "parse_duration_or_off", "parse_switch_interval_ms", "readable_ms", "STATE_BACKENDS", "CHECKPOINTING_MODES",
           "RUNTIME_MODES", "RESTART_STRATEGIES", "CPU_AFFINITY"]


class Applied(Enum):
    """When an option takes effect.

    ``ENVIRONMENT``: ``env.configure(config)`` applies its Flink key through the environment's setter (so PyFlink's
    getters show it, and a later setter call wins); its Spark conf key, if any, overrides the job's choice at
    launch, so that a job can be switched without editing it. ``LAUNCH``: read when the job launches, from the
    job's Configuration, else from the Spark conf, else the default (the other way round with
    ``spark_conf_wins``).
    """

    ENVIRONMENT = "environment"
    LAUNCH = "launch"


@dataclass(frozen=True)
class Choice:
    """A parser for one of a few names, in any case; ``names`` maps each spelling to the name it stands for.

    >>> STATE_BACKENDS("RocksDB", "spark.chandy.stateBackend")
    'rocksdb'
    >>> STATE_BACKENDS("leveldb", "state.backend.type")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: state.backend.type = 'leveldb' is not a state backend: write 'hashmap' (keyed state in the workers' memory, the fastest) or 'rocksdb' (keyed state on the workers' local disks: larger than memory).
    """

    what: str
    names: tuple[tuple[str, str], ...]
    accepted: str

    def __call__(self, value, key: str) -> str:
        chosen = dict(self.names).get(str(value).strip().lower())
        if chosen is None:
            raise SettingValueError(f"{key} = {value!r} is not {self.what}: write {self.accepted}.")
        return chosen


STATE_BACKENDS = Choice("a state backend", (("hashmap", "hashmap"), ("heap", "hashmap"), ("filesystem", "hashmap"),
                                            ("jobmanager", "hashmap"), ("rocksdb", "rocksdb"),
                                            ("embeddedrocksdb", "rocksdb")),
                        "'hashmap' (keyed state in the workers' memory, the fastest) or 'rocksdb' (keyed state on the "
                        "workers' local disks: larger than memory)")
CHECKPOINTING_MODES = Choice("a checkpointing mode", (("exactly_once", "EXACTLY_ONCE"),
                                                      ("at_least_once", "AT_LEAST_ONCE")),
                             "one of ['AT_LEAST_ONCE', 'EXACTLY_ONCE']")
RUNTIME_MODES = Choice("a runtime mode", (("streaming", "STREAMING"), ("batch", "BATCH"), ("automatic", "AUTOMATIC")),
                       "one of STREAMING, BATCH, AUTOMATIC")
CPU_AFFINITY = Choice("a CPU affinity policy", (("auto", "auto"), ("on", "on"), ("true", "on"), ("off", "off"),
                                               ("false", "off")),
                      "'auto' (pin each slot's worker to a CPU when the slots on an executor are as many as its "
                      "CPUs), 'on' (always) or 'off' (never)")
RESTART_STRATEGIES = Choice("a restart strategy", (
    ("fixed-delay", "fixed-delay"), ("fixeddelay", "fixed-delay"), ("fixed_delay", "fixed-delay"),
    ("failure-rate", "failure-rate"), ("failurerate", "failure-rate"), ("failure_rate", "failure-rate"),
    ("exponential-delay", "exponential-delay"), ("exponentialdelay", "exponential-delay"),
    ("exponential_delay", "exponential-delay"), ("none", "none"), ("off", "none"), ("disable", "none"),
    ("no_restart", "none"), ("norestart", "none")),
    "Chandy has 'fixed-delay', 'failure-rate', 'exponential-delay' and 'none'")


def parse_float(value, key: str) -> float:
    """A number, from a number or its text.

    >>> parse_float("1.5", "restart-strategy.exponential-delay.backoff-multiplier")
    1.5
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise SettingValueError(f"{key} = {value!r} is not a number: write a number such as 1.5.") from None


def parse_duration_or_off(value, key: str) -> int:
    """A duration in milliseconds where 0 turns the feature off; ``false``/``no``/``off`` say the same.

    >>> parse_duration_or_off("off", "spark.chandy.metricsInterval"), parse_duration_or_off("2 s", "k")
    (0, 2000)
    """
    try:
        if parse_boolean(value, key) is False:
            return 0
    except SettingValueError:
        pass
    return parse_duration_ms(value, key)


def parse_switch_interval_ms(value, key: str) -> float:
    """The GIL's switch interval in milliseconds, parts of one kept; more than zero, as Python takes it.

    >>> parse_switch_interval_ms("500 us", "spark.chandy.gilSwitchInterval"), parse_switch_interval_ms("1", "k")
    (0.5, 1)
    >>> parse_switch_interval_ms("0", "spark.chandy.gilSwitchInterval")
    Traceback (most recent call last):
    ...
    runtime.errors.SettingValueError: spark.chandy.gilSwitchInterval = '0' is no switch interval: write a duration above 0, such as '1 ms' or '500 us'.
    """
    millis = parse_duration_ms(value, key, fractional=True)
    if millis <= 0:
        raise SettingValueError(f"{key} = {value!r} is no switch interval: write a duration above 0, such as "
                                "'1 ms' or '500 us'.")
    return millis


def _slot_wait_ms(value, key: str) -> int:
    return parse_duration_ms(value, key, bare_unit="s")


_DURATION_OR_OFF = "duration; 0 or off: off"


@dataclass(frozen=True)
class Option:
    """One setting: its keys, its parser, its default and what it does.

    ``name`` is the field of :class:`~runtime.settings.resolve.Settings` that holds its resolved value.
    ``kind`` names what the parser takes, in a few words for the reference (the parser's errors say it in
    full); ``default_text`` is how the default reads there.
    """

    name: str
    flink_keys: tuple[str, ...]
    spark_key: str | None
    parse: Callable[[Any, str], Any]
    default: Any
    description: str
    kind: str
    applied: Applied = Applied.LAUNCH
    spark_conf_wins: bool = False
    default_text: str | None = None

    def __post_init__(self):
        if not self.flink_keys and self.spark_key is None:
            raise ValueError(f"option {self.name} has no key")
        if self.applied is Applied.ENVIRONMENT and self.spark_key is not None and not self.spark_conf_wins:
            raise ValueError(f"option {self.name}: a Spark conf key of an environment option overrides the job")

    def keys(self) -> tuple[str, ...]:
        return self.flink_keys + ((self.spark_key,) if self.spark_key else ())

    def read(self, job: Mapping[str, str]) -> tuple[str, Any] | None:
        """(key, parsed value) of the first of the Flink keys that ``job`` sets (the current name before older
        ones), or None when it sets none; a blank value counts as unset.

        >>> option_named("retained_checkpoints").read({"state.checkpoints.num-retained": "5"})
        ('state.checkpoints.num-retained', 5)
        """
        for key in self.flink_keys:
            text = job.get(key)
            if text is not None and str(text).strip():
                return key, self.parse(str(text).strip(), key)
        return None


def _bool(name, flink_keys, spark_key, default, description, **more) -> Option:
    return Option(name, flink_keys, spark_key, parse_boolean, default, description, "boolean", **more)


def _duration(name, flink_keys, spark_key, default, description, **more) -> Option:
    more.setdefault("default_text", readable_ms(default))
    return Option(name, flink_keys, spark_key, parse_duration_ms, default, description, "duration", **more)


def readable_ms(millis: int | None) -> str | None:
    """A default span as the reference shows it, in the largest unit that divides it.

    >>> readable_ms(30_000), readable_ms(3_600_000), readable_ms(5), readable_ms(0)
    ('30 s', '1 h', '5 ms', '0')
    """
    if millis is None:
        return None
    if millis == 0:
        return "0"
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size} {unit}"
    return f"{millis} ms"


def _int(name, flink_keys, default, description, **more) -> Option:
    return Option(name, flink_keys, None, parse_int, default, description, "whole number", **more)


_ENV = {"applied": Applied.ENVIRONMENT}
_SWITCHED = {"applied": Applied.ENVIRONMENT, "spark_conf_wins": True}

OPTIONS: tuple[Option, ...] = (
    # the job: what env.configure(config) sets through the environment's own setters
    _int("parallelism", ("parallelism.default",), 1, "Subtasks of every operator (each needs a Spark task slot).",
         **_ENV),
    _int("max_parallelism", ("pipeline.max-parallelism",), None,
         "Key groups: the upper limit of rescaling, fixed for the life of a job's state.",
         default_text="from the parallelism, at least 128 (a restore: the checkpoint's)", **_ENV),
    _duration("buffer_timeout_ms", ("execution.buffer-timeout.interval", "execution.buffer-timeout"), None, 5,
              "Longest time a record waits in an output buffer before it is sent.", **_ENV),
    _duration("auto_watermark_interval_ms", ("pipeline.auto-watermark-interval",), None, 200,
              "How often periodic watermarks are emitted.", **_ENV),
    Option("runtime_mode", ("execution.runtime-mode",), None, RUNTIME_MODES, "STREAMING",
           "Batch when every source is bounded, with AUTOMATIC.", "STREAMING, BATCH or AUTOMATIC", **_ENV),
    _duration("checkpoint_interval_ms", ("execution.checkpointing.interval",), None, None,
              "Take a checkpoint this often.", default_text="off", **_ENV),
    Option("checkpointing_mode", ("execution.checkpointing.mode",), None, CHECKPOINTING_MODES, "EXACTLY_ONCE",
           "EXACTLY_ONCE aligns barriers across inputs; AT_LEAST_ONCE only counts them.",
           "EXACTLY_ONCE or AT_LEAST_ONCE", **_ENV),
    _duration("checkpoint_timeout_ms", ("execution.checkpointing.timeout",), None, 600_000,
              "A checkpoint not acknowledged by every subtask within this time is aborted.", **_ENV),
    _duration("min_pause_ms", ("execution.checkpointing.min-pause",), None, 0,
              "Least time between the end of a checkpoint and the start of the next.", **_ENV),
    _int("max_concurrent_checkpoints", ("execution.checkpointing.max-concurrent-checkpoints",), 1,
         "Checkpoints in progress at once.", **_ENV),
    _int("tolerable_failed_checkpoints", ("execution.checkpointing.tolerable-failed-checkpoints",), 0,
         "Consecutive failed checkpoints tolerated before the job fails over.", **_ENV),
    _int("retained_checkpoints", ("execution.checkpointing.num-retained", "state.checkpoints.num-retained"), 3,
         "Completed checkpoints kept; older ones are deleted once a newer one is committed.", **_ENV),
    Option("checkpoint_storage", ("execution.checkpointing.dir", "state.checkpoints.dir",
                                  "state.checkpoint-storage.dir"), None, parse_string, None,
           "Where checkpoints go: a path or an fsspec URL (s3://, hdfs://, file://).", "path or URL",
           default_text="`./chandy-checkpoints`", **_ENV),
    Option("savepoint_directory", ("execution.checkpointing.savepoint-dir", "state.savepoints.dir"), None,
           parse_string, None, "Where savepoints go when none is named.", "path or URL",
           default_text="`<checkpoint storage>/<job>/savepoints`", **_ENV),
    _bool("unaligned_checkpoints", ("execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned"),
          "spark.chandy.unalignedCheckpoints", False,
          "Unaligned checkpoints (EXACTLY_ONCE only): barriers overtake the records in flight, which are stored.",
          **_SWITCHED),
    _duration("aligned_checkpoint_timeout_ms", ("execution.checkpointing.aligned-checkpoint-timeout",
                                             "execution.checkpointing.alignment-timeout"), None, 0,
              "With unaligned checkpoints: start aligned, switch to unaligned after this long (0: at once).", **_ENV),
    Option("restart_strategy", ("restart-strategy.type", "restart-strategy"), None, RESTART_STRATEGIES, None,
           "How a failed job restarts (each strategy's keys follow).",
           "fixed-delay, failure-rate, exponential-delay or none",
           default_text="exponential-delay with checkpointing, else none", **_ENV),
    _int("fixed_delay_attempts", ("restart-strategy.fixed-delay.attempts",), 1, "Restarts before the job fails.",
         **_ENV),
    _duration("fixed_delay_ms", ("restart-strategy.fixed-delay.delay",), None, 1000,
              "Time between a failure and its restart.", **_ENV),
    _int("failure_rate_max_failures", ("restart-strategy.failure-rate.max-failures-per-interval",), 1,
         "Failures within the interval that fail the job.", **_ENV),
    _duration("failure_rate_interval_ms", ("restart-strategy.failure-rate.failure-rate-interval",), None, 60_000,
              "The interval failures are counted in.", **_ENV),
    _duration("failure_rate_delay_ms", ("restart-strategy.failure-rate.delay",), None, 1000,
              "Time between a failure and its restart.", **_ENV),
    _duration("exponential_initial_backoff_ms", ("restart-strategy.exponential-delay.initial-backoff",), None, 1000,
              "The first restart's delay.", **_ENV),
    _duration("exponential_max_backoff_ms", ("restart-strategy.exponential-delay.max-backoff",), None, 60_000,
              "The longest delay.", **_ENV),
    Option("exponential_backoff_multiplier", ("restart-strategy.exponential-delay.backoff-multiplier",), None,
           parse_float, 1.5, "Each delay is the one before times this.", "number", **_ENV),
    _duration("exponential_reset_threshold_ms", ("restart-strategy.exponential-delay.reset-backoff-threshold",), None,
              3_600_000, "After this long without a failure the delay starts over.", **_ENV),
    Option("exponential_jitter", ("restart-strategy.exponential-delay.jitter-factor",), None, parse_float, 0.1,
           "Each delay moves by up to this fraction of itself at random.", "number from 0 to 1", **_ENV),
    Option("state_backend", ("state.backend.type", "state.backend"), "spark.chandy.stateBackend", STATE_BACKENDS,
           "hashmap", "Where keyed state lives; the Spark conf overrides the job's set_state_backend().",
           "hashmap or rocksdb", **_SWITCHED),
    _bool("incremental_checkpoints", ("execution.checkpointing.incremental", "state.backend.incremental"),
          "spark.chandy.incrementalCheckpoints", False,
          "Checkpoints upload only what changed since the last one (either backend).", **_SWITCHED),
    Option("rocksdb_local_dir", ("state.backend.rocksdb.localdir",), "spark.chandy.rocksdb.localDir", parse_string,
           None, "The workers' directory for RocksDB's files.", "local path",
           default_text="the worker's Spark local directory", **_SWITCHED),
    _bool("local_recovery", ("execution.state-recovery.from-local", "state.backend.local-recovery"),
          "spark.chandy.localRecovery", True,
          "RocksDB restores from the files a worker kept, not from the checkpoint storage, when it can.",
          **_SWITCHED),
    # the launch: read when the job starts
    _duration("heartbeat_timeout_ms", ("heartbeat.timeout",), "spark.chandy.heartbeatTimeout", 30_000,
              "A slot silent this long is taken for hung: the attempt fails and the job restarts."),
    _bool("buffer_debloating", ("taskmanager.network.memory.buffer-debloat.enabled",), None, True,
          "Buffer debloating: producers cut their batches so that the records in flight drain in the target time."),
    Option("buffer_debloat_target_ms", ("taskmanager.network.memory.buffer-debloat.target",),
           "spark.chandy.bufferDebloatTarget", parse_duration_or_off, 1000,
           "The time the records in flight drain in, with buffer debloating.", _DURATION_OR_OFF,
           default_text="1 s"),
    Option("metrics_interval_ms", ("metrics.fetcher.update-interval",), "spark.chandy.metricsInterval",
           parse_duration_or_off, 1000, "How often slots report their metrics to the driver.", _DURATION_OR_OFF,
           default_text="1 s"),
    Option("switch_interval_ms", (), "spark.chandy.gilSwitchInterval", parse_switch_interval_ms, None,
           "How long a busy thread of an executor's Python worker may keep the GIL from a waiting one while a "
           "slot runs (sys.setswitchinterval): shorter, a lookup of queryable state waits less at each thread it "
           "crosses.", "duration above 0 ('1 ms', '500 us')",
           default_text="Python's, 5 ms"),
    Option("cpu_affinity", (), "spark.chandy.cpuAffinity", CPU_AFFINITY, "auto",
           "Pin each slot's Python worker to one CPU while the slot runs: a worker computes on one core at a time, "
           "and pinned, its threads never queue on another worker's core while their own idles. auto: when the "
           "job's slots on an executor are as many as its CPUs; on: always (slots round-robin over the CPUs); off: "
           "never.", "auto, on or off"),
    _bool("ui_enabled", (), "spark.chandy.ui.enabled", True,
          "The dashboard and REST API on the driver. Off, a job with checkpointing still runs the REST API (its "
          "control plane for chandy savepoint / stop), without the page and with the token for every request."),
    Option("ui_port", ("rest.port",), "spark.chandy.ui.port", parse_port, 8081,
           "The dashboard's port; when it is taken, the next free one.", "port, 0..65535 (0: any free)"),
    Option("ui_bind_address", ("rest.bind-address",), "spark.chandy.ui.bindAddress", parse_string, None,
           "The address the dashboard listens on (on a network address, on 127.0.0.1 too).", "host name or address",
           default_text="the driver's host"),
    Option("ui_token", (), "spark.chandy.ui.token", parse_string, None,
           "The token the dashboard's actions (and reads, with requireToken) need.", "text",
           default_text="a random one, printed once"),
    _bool("ui_require_token", (), "spark.chandy.ui.requireToken", False,
          "Reads need the dashboard's token too (so they do with spark.acls.enable=true)."),
    _bool("progress", (), "spark.chandy.progress", True,
          "The live status line under the log (shown only when stdout is a terminal)."),
    _bool("network_encryption", ("security.ssl.internal.enabled",), "spark.chandy.network.encryption", None,
          "TLS on the job's own connections; the Spark conf wins over the job's key.", spark_conf_wins=True,
          default_text="on when spark.network.crypto.enabled or spark.ssl.enabled is true"),
    Option("tls_certificate", (), "spark.chandy.network.tls.certificate", parse_string, None,
           "Your own certificate for encryption (PEM, on the driver).", "path",
           default_text="one made for each job"),
    Option("tls_private_key", (), "spark.chandy.network.tls.privateKey", parse_string, None,
           "The key of that certificate (PEM, unencrypted, on the driver).", "path"),
    Option("tls_trusted_certificates", (), "spark.chandy.network.tls.trustedCertificates", parse_string, None,
           "The certificates every end trusts (PEM).", "path", default_text="the certificate"),
    Option("restore_from", ("execution.savepoint.path",), "spark.chandy.restoreFrom", parse_string, None,
           "The checkpoint or savepoint to start from: an id, 'latest', or a path.",
           "checkpoint id, latest, or path", default_text="none"),
    _bool("allow_non_restored_state", ("execution.savepoint.ignore-unclaimed-state",),
          "spark.chandy.allowNonRestoredState", False,
          "A restore drops the state of operators the job no longer has, instead of failing."),
    Option("slot_wait_ms", (), "spark.chandy.slotWaitSeconds", _slot_wait_ms, 60_000,
           "On a cluster, how long to wait for the job's task slots before failing.",
           "seconds, or a duration ('2 min')", default_text="60"),
)

# Flink keys that Chandy accepts and has nothing to do with: the settings of a JVM cluster, of PyFlink's Python
# harness, or ones it derives itself. They pass without a warning.
IGNORED_FLINK_PREFIXES = ("pipeline.jars", "pipeline.classpaths", "pipeline.name", "taskmanager.", "jobmanager.",
                          "python.", "rest.", "web.", "metrics.", "env.java", "kubernetes.", "yarn.",
                          "high-availability", "execution.target", "execution.attached", "classloader.")
IGNORED_FLINK_KEYS = (
    "heartbeat.interval",  # derived from the timeout: a fifth of it, at most 2 s
    "execution.checkpointing.unaligned.forced",  # Flink forces unaligned checkpoints on iterations; Chandy has none
)

# Spark's own keys that Chandy follows (it never warns about them): (key, what it tells Chandy).
SPARK_SIGNALS = (("spark.network.crypto.enabled", "Spark encrypts its RPC"),
                 ("spark.ssl.enabled", "Spark uses TLS"),
                 ("spark.acls.enable", "Spark's ACLs are on"))


def option_named(name: str) -> Option:
    """The option whose resolved value is ``Settings.<name>``."""
    for option in OPTIONS:
        if option.name == name:
            return option
    raise KeyError(name)


def known_flink_keys() -> frozenset[str]:
    return frozenset(key for option in OPTIONS for key in option.flink_keys) | frozenset(IGNORED_FLINK_KEYS)


def known_spark_keys() -> frozenset[str]:
    return frozenset(option.spark_key for option in OPTIONS if option.spark_key)
