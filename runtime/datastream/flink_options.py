"""Flink's option keys, applied to a :class:`StreamExecutionEnvironment` (``env.configure(config)``).

Keys with a Chandy meaning set what their Flink meaning sets; keys that only concern a JVM cluster
(``pipeline.jars``, ``taskmanager.*``, ``python.*`` ...) are accepted and have nothing to do here; any other
key is named in one WARNING, so that a typo does not pass silently (Flink drops unknown keys without a word).

>>> from runtime import StreamExecutionEnvironment
>>> from runtime.configuration import Configuration
>>> config = (Configuration().set_string("execution.checkpointing.interval", "30 s")
...           .set_string("restart-strategy.type", "fixed-delay")
...           .set_string("restart-strategy.fixed-delay.attempts", "5")
...           .set_string("restart-strategy.fixed-delay.delay", "2 s"))
>>> env = StreamExecutionEnvironment.get_execution_environment(config)
>>> env.get_checkpoint_interval(), env.get_restart_strategy()
(30000, FixedDelayRestartStrategy(max_attempts=5, delay_ms=2000))
"""

from __future__ import annotations

import logging

from runtime.checkpoint_config import CheckpointingMode, RestartStrategies
from runtime.configuration import Configuration, parse_duration_ms
from runtime.errors import ConfigurationError

__all__ = ["apply_configuration"]

log = logging.getLogger(__name__)

# Settings of a JVM cluster or of PyFlink's Python harness: nothing to set on Spark executors.
_NOT_APPLICABLE_PREFIXES = ("pipeline.jars", "pipeline.classpaths", "pipeline.name", "taskmanager.", "jobmanager.",
                            "python.", "rest.", "web.", "metrics.", "env.java", "kubernetes.", "yarn.",
                            "high-availability", "execution.target", "execution.attached", "classloader.")


def _restart(env, config: Configuration) -> None:
    kind = (config.get_string("restart-strategy.type") or config.get_string("restart-strategy") or "").lower()
    if kind in ("", "fixed-delay", "fixeddelay", "fixed_delay"):
        if kind or config.contains_key("restart-strategy.fixed-delay.attempts"):
            attempts = config.get_integer("restart-strategy.fixed-delay.attempts", 1)
            delay = parse_duration_ms(config.get_string("restart-strategy.fixed-delay.delay", "1 s"),
                                      "restart-strategy.fixed-delay.delay")
            env.set_restart_strategy(RestartStrategies.fixed_delay_restart(attempts, delay))
    elif kind in ("none", "off", "disable", "no_restart", "norestart"):
        env.set_restart_strategy(RestartStrategies.no_restart())
    elif kind in ("failure-rate", "failurerate", "failure_rate"):
        prefix = "restart-strategy.failure-rate."
        env.set_restart_strategy(RestartStrategies.failure_rate_restart(
            config.get_integer(prefix + "max-failures-per-interval", 1),
            _duration(config, prefix + "failure-rate-interval", "1 min"), _duration(config, prefix + "delay", "1 s")))
    elif kind in ("exponential-delay", "exponentialdelay", "exponential_delay"):
        prefix = "restart-strategy.exponential-delay."
        env.set_restart_strategy(RestartStrategies.exponential_delay_restart(
            _duration(config, prefix + "initial-backoff", "1 s"), _duration(config, prefix + "max-backoff", "1 min"),
            float(config.get_string(prefix + "backoff-multiplier", "1.5")),
            _duration(config, prefix + "reset-backoff-threshold", "1 h"),
            float(config.get_string(prefix + "jitter-factor", "0.1"))))
    else:
        raise ConfigurationError(f"restart-strategy.type = {kind!r}: Chandy has 'fixed-delay', 'failure-rate', "
                                 "'exponential-delay' and 'none'.")


def _duration(config: Configuration, key: str, default: str) -> float:
    return parse_duration_ms(config.get_string(key, default), key)


def _state_backend(env, config: Configuration) -> None:
    from runtime.datastream.state_backend import state_backend_named

    key = "state.backend.type" if config.get_string("state.backend.type") else "state.backend"
    kind = config.get_string(key) or ""
    if kind:
        incremental = (config.get_string("execution.checkpointing.incremental")
                       or config.get_string("state.backend.incremental") or "false").strip().lower() == "true"
        local_dir = config.get_string("state.backend.rocksdb.localdir")
        local_recovery = (config.get_string("execution.state-recovery.from-local")
                          or config.get_string("state.backend.local-recovery") or "true").strip().lower() == "true"
        env.set_state_backend(state_backend_named(kind, incremental, local_dir, key, local_recovery))


def _checkpointing(env, config: Configuration) -> None:
    checkpoints = env.get_checkpoint_config()
    interval = config.get_string("execution.checkpointing.interval")
    if interval is not None:
        env.enable_checkpointing(parse_duration_ms(interval, "execution.checkpointing.interval"))
    mode = config.get_string("execution.checkpointing.mode")
    if mode is not None:
        names = {m.name: m for m in CheckpointingMode}
        if mode.upper() not in names:
            raise ConfigurationError(f"execution.checkpointing.mode = {mode!r}: one of {sorted(names)}.")
        checkpoints.set_checkpointing_mode(names[mode.upper()])
    durations = {"execution.checkpointing.timeout": checkpoints.set_checkpoint_timeout,
                 "execution.checkpointing.min-pause": checkpoints.set_min_pause_between_checkpoints}
    for key, setter in durations.items():
        if config.contains_key(key):
            setter(parse_duration_ms(config.get_string(key), key))
    counts = {"execution.checkpointing.max-concurrent-checkpoints": checkpoints.set_max_concurrent_checkpoints,
              "execution.checkpointing.tolerable-failed-checkpoints":
                  checkpoints.set_tolerable_checkpoint_failure_number,
              "state.checkpoints.num-retained": checkpoints.set_max_retained_checkpoints,
              "execution.checkpointing.num-retained": checkpoints.set_max_retained_checkpoints}
    for key, setter in counts.items():
        if config.contains_key(key):
            setter(config.get_integer(key))
    for key in ("state.checkpoints.dir", "execution.checkpointing.dir", "state.checkpoint-storage.dir"):
        if config.contains_key(key):
            checkpoints.set_checkpoint_storage(config.get_string(key))
    for key in ("state.savepoints.dir", "execution.checkpointing.savepoint-dir"):
        if config.contains_key(key):
            checkpoints.set_default_savepoint_directory(config.get_string(key))
    for key in ("execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned"):
        if config.contains_key(key):
            checkpoints.enable_unaligned_checkpoints(config.get_boolean(key, False))
    for key in ("execution.checkpointing.aligned-checkpoint-timeout", "execution.checkpointing.alignment-timeout"):
        if config.contains_key(key):
            checkpoints.set_aligned_checkpoint_timeout(parse_duration_ms(config.get_string(key), key))
    if config.contains_key(DEBLOAT_ENABLED) and not config.get_boolean(DEBLOAT_ENABLED, True):
        env._debloat_target_ms = 0
    elif config.contains_key(DEBLOAT_TARGET):
        env._debloat_target_ms = parse_duration_ms(config.get_string(DEBLOAT_TARGET), DEBLOAT_TARGET)
    if config.contains_key("heartbeat.timeout"):
        env._heartbeat_timeout_ms = parse_duration_ms(config.get_string("heartbeat.timeout"), "heartbeat.timeout")
    if config.contains_key("rest.port"):
        port = config.get_integer("rest.port")
        if not 0 <= port < 65536:
            raise ConfigurationError(f"rest.port = {port}: a port number, 0..65535 (0: any free port).")
        env._ui_port = port
    if config.contains_key("rest.bind-address"):
        env._ui_bind_address = config.get_string("rest.bind-address")
    if config.contains_key("metrics.fetcher.update-interval"):
        env._metrics_interval_ms = parse_duration_ms(config.get_string("metrics.fetcher.update-interval"),
                                                     "metrics.fetcher.update-interval")
    if config.contains_key("security.ssl.internal.enabled"):
        env._internal_ssl = config.get_boolean("security.ssl.internal.enabled", False)
    if config.contains_key("execution.savepoint.path"):
        env._savepoint_path = config.get_string("execution.savepoint.path")
    if config.contains_key("execution.savepoint.ignore-unclaimed-state"):
        env._allow_non_restored_state = config.get_boolean("execution.savepoint.ignore-unclaimed-state", False)


_HANDLED = {
    "parallelism.default", "pipeline.max-parallelism", "execution.buffer-timeout",
    "execution.buffer-timeout.interval", "restart-strategy", "restart-strategy.type",
    "restart-strategy.fixed-delay.attempts", "restart-strategy.fixed-delay.delay", "state.backend",
    "restart-strategy.failure-rate.max-failures-per-interval", "restart-strategy.failure-rate.failure-rate-interval",
    "restart-strategy.failure-rate.delay", "restart-strategy.exponential-delay.initial-backoff",
    "restart-strategy.exponential-delay.max-backoff", "restart-strategy.exponential-delay.backoff-multiplier",
    "restart-strategy.exponential-delay.reset-backoff-threshold", "restart-strategy.exponential-delay.jitter-factor",
    "state.backend.type", "execution.checkpointing.incremental", "state.backend.incremental",
    "state.backend.rocksdb.localdir", "execution.state-recovery.from-local", "state.backend.local-recovery",
    "execution.checkpointing.interval", "execution.checkpointing.mode",
    "execution.checkpointing.timeout", "execution.checkpointing.min-pause",
    "execution.checkpointing.max-concurrent-checkpoints", "execution.checkpointing.tolerable-failed-checkpoints",
    "state.checkpoints.num-retained", "execution.checkpointing.num-retained", "state.checkpoints.dir",
    "execution.checkpointing.dir", "state.checkpoint-storage.dir", "pipeline.auto-watermark-interval",
    "execution.runtime-mode", "state.savepoints.dir", "execution.checkpointing.savepoint-dir",
    "execution.savepoint.path", "execution.savepoint.ignore-unclaimed-state", "heartbeat.timeout",
    "heartbeat.interval",  # derived from the timeout: a fifth of it, at most 2 s
    "execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned",
    "execution.checkpointing.aligned-checkpoint-timeout", "execution.checkpointing.alignment-timeout",
    "execution.checkpointing.unaligned.forced",
    "taskmanager.network.memory.buffer-debloat.enabled", "taskmanager.network.memory.buffer-debloat.target",
    "rest.port", "rest.bind-address", "metrics.fetcher.update-interval", "security.ssl.internal.enabled",
}
DEBLOAT_ENABLED = "taskmanager.network.memory.buffer-debloat.enabled"
DEBLOAT_TARGET = "taskmanager.network.memory.buffer-debloat.target"


def apply_configuration(env, config: Configuration) -> None:
    """Set on ``env`` what ``config``'s Flink keys say; ConfigurationError naming the key for a bad value."""
    if not isinstance(config, Configuration):
        raise ConfigurationError(f"configure() expects a Configuration, got {type(config).__name__}")
    if config.contains_key("parallelism.default"):
        env.set_parallelism(config.get_integer("parallelism.default"))
    if config.contains_key("pipeline.max-parallelism"):
        env.set_max_parallelism(config.get_integer("pipeline.max-parallelism"))
    for key in ("execution.buffer-timeout", "execution.buffer-timeout.interval"):
        if config.contains_key(key):
            env.set_buffer_timeout(parse_duration_ms(config.get_string(key), key))
    if config.contains_key("pipeline.auto-watermark-interval"):
        key = "pipeline.auto-watermark-interval"
        env.get_config().set_auto_watermark_interval(parse_duration_ms(config.get_string(key), key))
    if config.contains_key("execution.runtime-mode"):
        from runtime.datastream.execution_mode import RuntimeExecutionMode

        mode = config.get_string("execution.runtime-mode").upper()
        if mode not in RuntimeExecutionMode.__members__:
            raise ConfigurationError(f"execution.runtime-mode = {mode!r}: one of STREAMING, BATCH, AUTOMATIC.")
        env.set_runtime_mode(RuntimeExecutionMode[mode])
    _checkpointing(env, config)
    _restart(env, config)
    _state_backend(env, config)
    unknown = sorted(k for k in config.keys() if k not in _HANDLED and not k.startswith(_NOT_APPLICABLE_PREFIXES))
    if unknown:
        log.warning("Configuration keys Chandy does not use (check their spelling if you meant one it does): %s",
                    ", ".join(unknown))
