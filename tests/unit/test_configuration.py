"""Flink's option keys set what they set in Flink; bad values and unknown keys are named."""

import logging

import pytest

from runtime import CheckpointingMode, StreamExecutionEnvironment
from runtime.configuration import Configuration
from runtime.settings import resolve
from runtime.settings.parsers import parse_duration_ms
from runtime.errors import ConfigurationError


def test_flink_keys_configure_parallelism_checkpointing_restarts_and_state():
    config = Configuration()
    for key, value in {
        "parallelism.default": "3", "pipeline.max-parallelism": "256", "execution.buffer-timeout": "10 ms",
        "execution.checkpointing.interval": "2 s", "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "execution.checkpointing.timeout": "1 min", "execution.checkpointing.min-pause": "500 ms",
        "execution.checkpointing.max-concurrent-checkpoints": "2",
        "execution.checkpointing.tolerable-failed-checkpoints": "4", "state.checkpoints.num-retained": "5",
        "state.checkpoints.dir": "file:///tmp/chandy-config-test", "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "7", "restart-strategy.fixed-delay.delay": "3 s",
        "state.backend.type": "hashmap", "pipeline.auto-watermark-interval": "50 ms",
        "execution.runtime-mode": "AUTOMATIC",
    }.items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    checkpoints = env.get_checkpoint_config()
    assert (env.get_parallelism(), env.get_max_parallelism(), env.get_buffer_timeout()) == (3, 256, 10)
    assert env.get_checkpoint_interval() == 2000
    assert checkpoints.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert (checkpoints.get_checkpoint_timeout(), checkpoints.get_min_pause_between_checkpoints()) == (60000, 500)
    assert (checkpoints.get_max_concurrent_checkpoints(), checkpoints.get_tolerable_checkpoint_failure_number(),
            checkpoints.get_max_retained_checkpoints()) == (2, 4, 5)
    assert checkpoints.get_checkpoint_storage() == "file:///tmp/chandy-config-test"
    assert (env.get_restart_strategy().max_attempts, env.get_restart_strategy().delay_ms) == (7, 3000)
    assert env.get_config().get_auto_watermark_interval() == 50
    assert env.get_runtime_mode().name == "AUTOMATIC"


def test_no_restart_and_configure_on_an_existing_environment():
    env = StreamExecutionEnvironment.get_execution_environment().enable_checkpointing(1000)
    env.configure(Configuration().set_string("restart-strategy.type", "none"))
    assert env.get_restart_strategy().max_attempts == 0


@pytest.mark.parametrize("key, value, message", [
    ("execution.checkpointing.interval", "10 parsecs", "not a duration"),
    ("parallelism.default", "many", "not an integer"),
    ("execution.checkpointing.mode", "SOMETIMES", "EXACTLY_ONCE"),
    ("restart-strategy.type", "sometimes", "'fixed-delay', 'failure-rate', 'exponential-delay' and 'none'"),
    ("state.backend.type", "leveldb", "'leveldb' is not a state backend: write 'hashmap' .* or 'rocksdb'"),
    ("execution.runtime-mode", "BATCHED", "one of STREAMING, BATCH, AUTOMATIC"),
    ("rest.port", "70000", "a port number, 0..65535"),
    ("metrics.fetcher.update-interval", "often", "not a duration"),
])
def test_a_bad_value_is_a_configuration_error_naming_the_key(key, value, message):
    with pytest.raises(ConfigurationError, match=message):
        StreamExecutionEnvironment.get_execution_environment(Configuration().set_string(key, value))


def test_flinks_rocksdb_keys_choose_the_rocksdb_backend():
    config = (Configuration().set_string("state.backend.type", "rocksdb")
              .set_string("execution.checkpointing.incremental", "true")
              .set_string("state.backend.rocksdb.localdir", "/mnt/fast"))
    backend = StreamExecutionEnvironment.get_execution_environment(config).get_state_backend()
    assert type(backend).__name__ == "EmbeddedRocksDBStateBackend"
    assert backend.is_incremental_checkpoints_enabled() and backend.get_db_storage_paths() == ["/mnt/fast"]
    assert backend.local_recovery, "local recovery is on unless turned off"
    config.set_string("state.backend.local-recovery", "false")
    assert not StreamExecutionEnvironment.get_execution_environment(config).get_state_backend().local_recovery


def test_unknown_keys_are_named_in_one_warning_and_cluster_keys_pass_quietly(caplog):
    config = (Configuration().set_string("paralelism.default", "2").set_string("pipeline.jars", "file:///x.jar")
              .set_string("taskmanager.memory.process.size", "4g"))
    with caplog.at_level(logging.WARNING):
        StreamExecutionEnvironment.get_execution_environment(config)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "paralelism.default" in warnings[0] and "jars" not in warnings[0], warnings


@pytest.mark.parametrize("text, millis", [("10 s", 10_000), ("10s", 10_000), ("1 min", 60_000), ("2h", 7_200_000),
                                          ("250 ms", 250), ("1500", 1500), (" 3 seconds ", 3000), (42, 42)])
def test_durations_are_read_as_flink_writes_them(text, millis):
    assert parse_duration_ms(text) == millis


def test_flinks_rest_keys_set_the_dashboards_port_and_address_and_the_metrics_interval():
    from runtime.datastream.stream_execution_environment import _dashboard_settings

    config = (Configuration().set_string("rest.port", "9091").set_string("rest.bind-address", "0.0.0.0")
              .set_string("metrics.fetcher.update-interval", "5 s"))
    env = StreamExecutionEnvironment.get_execution_environment(config)
    spark_conf = {"spark.chandy.ui.port": "7000"}
    settings = resolve(env._configuration, spark_conf)
    dashboard = _dashboard_settings(settings)
    assert (dashboard.enabled, dashboard.port, dashboard.bind_address) == (True, 9091, "0.0.0.0"), "Flink's keys win"
    assert settings.metrics_interval_ms == 5000
    plain = _dashboard_settings(resolve(StreamExecutionEnvironment.get_execution_environment()._configuration,
                                        spark_conf))
    assert (plain.port, plain.bind_address) == (7000, None), "else the Spark conf, else 8081 on the driver's host"
