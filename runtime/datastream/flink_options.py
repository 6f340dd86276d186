"""Flink's option keys, applied to a :class:`StreamExecutionEnvironment` (``env.configure(config)``).

Each key's meaning, parser and default are declared in :mod:`runtime.settings.options`. Keys the environment
has a setter for are applied through it now; keys read at launch (``heartbeat.timeout``, ``rest.port`` ...) are
parsed now, so that a bad value fails here, and kept for :func:`runtime.settings.resolve.resolve`. Keys that only
concern a JVM cluster (``pipeline.jars``, ``taskmanager.*``, ``python.*`` ...) pass quietly; any other key is
named in one WARNING with the nearest known key, so that a typo does not pass silently (Flink drops unknown keys
without a word).

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

from runtime.checkpoint_config import CheckpointingMode, RestartStrategies
from runtime.errors import ConfigurationError
from runtime.settings.configuration import Configuration
from runtime.settings.options import OPTIONS, Applied, option_named
from runtime.settings.resolve import resolve, warn_about_unknown_flink_keys

__all__ = ["apply_configuration"]


def apply_configuration(env, config: Configuration) -> None:
    """Set on ``env`` what ``config``'s Flink keys say; a SettingValueError naming the key for a bad value."""
    if not isinstance(config, Configuration):
        raise ConfigurationError(f"configure() expects a Configuration, got {type(config).__name__}")
    job = config.to_dict()
    given = {}
    for option in OPTIONS:
        if option.applied is Applied.ENVIRONMENT:
            read = option.read(job)
            if read is not None:
                given[option.name] = read
    resolve(job, {})  # the keys read at launch: a bad value fails now, where the program sets it
    _environment(env, {name: value for name, (_, value) in given.items()})
    _restart(env, given)
    _state_backend(env, given)
    env._configuration.add_all(config)
    warn_about_unknown_flink_keys(config.keys())


def _environment(env, given: dict) -> None:
    checkpoints = env.get_checkpoint_config()
    setters = {
        "parallelism": env.set_parallelism,
        "max_parallelism": env.set_max_parallelism,
        "buffer_timeout_ms": env.set_buffer_timeout,
        "auto_watermark_interval_ms": env.get_config().set_auto_watermark_interval,
        "runtime_mode": lambda mode: env.set_runtime_mode(_runtime_mode(mode)),
        "checkpoint_interval_ms": env.enable_checkpointing,
        "checkpointing_mode": lambda mode: checkpoints.set_checkpointing_mode(CheckpointingMode[mode]),
        "checkpoint_timeout_ms": checkpoints.set_checkpoint_timeout,
        "min_pause_ms": checkpoints.set_min_pause_between_checkpoints,
        "max_concurrent_checkpoints": checkpoints.set_max_concurrent_checkpoints,
        "tolerable_failed_checkpoints": checkpoints.set_tolerable_checkpoint_failure_number,
        "retained_checkpoints": checkpoints.set_max_retained_checkpoints,
        "checkpoint_storage": checkpoints.set_checkpoint_storage,
        "savepoint_directory": checkpoints.set_default_savepoint_directory,
        "unaligned_checkpoints": checkpoints.enable_unaligned_checkpoints,
        "aligned_checkpoint_timeout_ms": checkpoints.set_aligned_checkpoint_timeout,
    }
    for name, setter in setters.items():  # in this order: the interval's enable_checkpointing sets a mode too
        if name in given:
            setter(given[name])


def _runtime_mode(name: str):
    from runtime.datastream.execution_mode import RuntimeExecutionMode

    return RuntimeExecutionMode[name]


def _value(given: dict, name: str):
    return given[name][1] if name in given else option_named(name).default


def _restart(env, given: dict) -> None:
    kind = _value(given, "restart_strategy")
    if kind is None and "fixed_delay_attempts" not in given:
        return
    if kind in (None, "fixed-delay"):
        strategy = RestartStrategies.fixed_delay_restart(_value(given, "fixed_delay_attempts"),
                                                         _value(given, "fixed_delay_ms"))
    elif kind == "none":
        strategy = RestartStrategies.no_restart()
    elif kind == "failure-rate":
        strategy = RestartStrategies.failure_rate_restart(_value(given, "failure_rate_max_failures"),
                                                          _value(given, "failure_rate_interval_ms"),
                                                          _value(given, "failure_rate_delay_ms"))
    else:
        strategy = RestartStrategies.exponential_delay_restart(
            _value(given, "exponential_initial_backoff_ms"), _value(given, "exponential_max_backoff_ms"),
            _value(given, "exponential_backoff_multiplier"), _value(given, "exponential_reset_threshold_ms"),
            _value(given, "exponential_jitter"))
    env.set_restart_strategy(strategy)


def _state_backend(env, given: dict) -> None:
    from runtime.datastream.state_backend import state_backend_named

    if "state_backend" in given:
        key, kind = given["state_backend"]
        env.set_state_backend(state_backend_named(kind, _value(given, "incremental_checkpoints"),
                                                  _value(given, "rocksdb_local_dir"), key,
                                                  _value(given, "local_recovery")))
