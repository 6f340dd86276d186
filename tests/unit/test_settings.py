"""Settings: one parser per kind, one declaration per option, resolved once before Spark runs anything."""

import dataclasses
import logging
import os
from datetime import timedelta

import pytest

from runtime import StreamExecutionEnvironment
from runtime.configuration import Configuration
from runtime.errors import ApiUsageError, ConfigurationError, SettingValueError
from runtime.settings import OPTIONS, Settings, resolve
from runtime.settings.durations import Duration, Time
from runtime.settings.options import IGNORED_FLINK_KEYS, Applied, option_named
from runtime.settings.parsers import parse_boolean, parse_duration_ms, parse_memory_size
from runtime.settings.reference import readme_block, render
from runtime.settings.resolve import resolved_options

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRUE_SPELLINGS = ["true", "TRUE", "True", "yes", "YES", "on", "On", "1", " true "]
FALSE_SPELLINGS = ["false", "FALSE", "no", "No", "off", "OFF", "0", " off "]
BOOLEAN_OPTIONS = [option for option in OPTIONS if option.kind == "boolean"]


# -- the table ---------------------------------------------------------------------------------------------


def test_every_key_is_declared_once():
    keys = [key for option in OPTIONS for key in option.keys()]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    names = [option.name for option in OPTIONS]
    assert len(names) == len(set(names))
    assert not set(keys) & set(IGNORED_FLINK_KEYS)


def test_settings_has_one_field_per_resolved_option_with_its_default():
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    fields.pop("spark_signals"), fields.pop("sources")
    assert set(fields) == {option.name for option in resolved_options()}
    for option in resolved_options():
        expected = option.default if option.applied is Applied.LAUNCH else None  # None: the job's choice stands
        assert fields[option.name] == expected, option.name


def test_every_spark_key_is_a_spark_chandy_key():
    assert all(o.spark_key.startswith("spark.chandy.") for o in OPTIONS if o.spark_key)


# -- booleans ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", [o for o in BOOLEAN_OPTIONS if o.spark_key], ids=lambda o: o.spark_key)
@pytest.mark.parametrize("text, expected", [(t, True) for t in TRUE_SPELLINGS] + [(t, False) for t in FALSE_SPELLINGS])
def test_every_boolean_spark_conf_takes_every_spelling(option, text, expected):
    settings = resolve({}, {option.spark_key: text})
    assert getattr(settings, option.name) is expected
    assert settings.source(option.name) == option.spark_key


@pytest.mark.parametrize("option", [o for o in BOOLEAN_OPTIONS if o.flink_keys], ids=lambda o: o.name)
@pytest.mark.parametrize("text, expected", [(t, True) for t in TRUE_SPELLINGS] + [(t, False) for t in FALSE_SPELLINGS])
def test_every_boolean_flink_key_takes_every_spelling(option, text, expected):
    for key in option.flink_keys:
        assert option.read({key: text}) == (key, expected)
        if option.applied is Applied.LAUNCH:
            assert getattr(resolve({key: text}, {}), option.name) is expected


@pytest.mark.parametrize("option", BOOLEAN_OPTIONS, ids=lambda o: o.name)
def test_a_boolean_that_does_not_parse_names_key_value_and_what_is_accepted(option):
    key = option.spark_key or option.flink_keys[0]
    with pytest.raises(SettingValueError) as error:
        if option.spark_key:
            resolve({}, {key: "ture"})
        else:
            option.read({key: "ture"})
    assert str(error.value) == (f"{key} = 'ture' is not a boolean: write true or false (yes/no, on/off and 1/0 "
                                "work too, in any case).")


def test_unaligned_checkpoints_yes_in_the_spark_conf_takes_effect(tmp_path):
    from runtime.datastream.stream_execution_environment import _checkpoint_settings
    from state_backends.storage import CheckpointStorage

    settings = resolve({}, {"spark.chandy.unalignedCheckpoints": "yes"})
    assert settings.unaligned_checkpoints is True
    env = StreamExecutionEnvironment.get_execution_environment().enable_checkpointing(1000)
    storage = CheckpointStorage("file://" + str(tmp_path), "job")
    assert _checkpoint_settings(env.get_checkpoint_config(), storage, settings).unaligned
    off = resolve({}, {"spark.chandy.unalignedCheckpoints": "0"})
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    assert not _checkpoint_settings(env.get_checkpoint_config(), storage, off).unaligned, "the Spark conf wins"
    configured = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("execution.checkpointing.unaligned", "on"))
    assert configured.get_checkpoint_config().is_unaligned_checkpoints_enabled()


@pytest.mark.parametrize("incremental, local_recovery", [("yes", "no"), ("1", "0"), ("ON", "OFF")])
def test_incremental_checkpoints_and_local_recovery_take_every_spelling(incremental, local_recovery):
    from runtime.datastream.stream_execution_environment import _state_backend_from

    backend = _state_backend_from(resolve({}, {"spark.chandy.stateBackend": "rocksdb",
                                               "spark.chandy.incrementalCheckpoints": incremental,
                                               "spark.chandy.localRecovery": local_recovery}))
    assert backend.is_incremental_checkpoints_enabled() and not backend.local_recovery
    config = (Configuration().set_string("state.backend.type", "rocksdb")
              .set_string("execution.checkpointing.incremental", incremental)
              .set_string("state.backend.local-recovery", local_recovery))
    backend = StreamExecutionEnvironment.get_execution_environment(config).get_state_backend()
    assert backend.is_incremental_checkpoints_enabled() and not backend.local_recovery


def test_backend_confs_without_the_backend_conf_are_named_in_a_warning(caplog):
    from runtime.datastream.stream_execution_environment import _state_backend_from

    with caplog.at_level(logging.WARNING):
        assert _state_backend_from(resolve({}, {"spark.chandy.incrementalCheckpoints": "true"})) is None
    assert "spark.chandy.incrementalCheckpoints apply with spark.chandy.stateBackend only" in caplog.text


# -- durations and memory sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize("value, millis", [
    ("10 s", 10_000), ("10s", 10_000), ("500ms", 500), ("500 milliseconds", 500), ("1 min", 60_000),
    ("1m", 60_000), ("2 minutes", 120_000), ("2h", 7_200_000), ("1 hour", 3_600_000), ("1 d", 86_400_000),
    ("1500", 1500), (" 3 seconds ", 3000), ("1.5 s", 1500), ("2000 us", 2), (1500, 1500), (2.0, 2),
    (timedelta(seconds=2), 2000), (timedelta(minutes=1, milliseconds=5), 60_005), (Duration.of_seconds(5), 5000),
    (Duration.of_nanos(2_500_000), 2), (Time.minutes(1), 60_000), (0, 0), ("0", 0),
])
def test_durations_in_every_accepted_form(value, millis):
    assert parse_duration_ms(value, "k") == millis


@pytest.mark.parametrize("value, message", [
    ("10 parsecs", "is not a duration"), ("soon", "is not a duration"), (None, "is not a duration"),
    (True, "is not a duration"), ([1], "is not a duration"), (1.5, "is not a whole number of milliseconds"),
    ("0.5 ms", "is not a whole number of milliseconds"), (-1, "is negative"), ("-5 s", "is negative"),
    (timedelta(seconds=-1), "is negative"),
])
def test_a_duration_that_does_not_parse_names_key_value_and_what_is_accepted(value, message):
    with pytest.raises(SettingValueError, match=message) as error:
        parse_duration_ms(value, "heartbeat.timeout")
    assert str(error.value).startswith(f"heartbeat.timeout = {value!r} ")
    assert isinstance(error.value, ConfigurationError) and isinstance(error.value, ApiUsageError)


def test_negative_and_fractional_durations_where_a_call_site_takes_them():
    assert parse_duration_ms("-5 s", "offset", negative=True) == -5000
    assert parse_duration_ms(Time.hours(-1), "offset", negative=True) == -3_600_000
    assert parse_duration_ms(0.5, "delay", fractional=True) == 0.5
    assert parse_duration_ms(timedelta(microseconds=1500), "delay", fractional=True) == 1.5
    assert parse_duration_ms("90", "spark.chandy.slotWaitSeconds", bare_unit="s") == 90_000


def test_every_api_that_takes_a_span_takes_every_form():
    from operators.window import TumblingEventTimeWindows
    from runtime import RestartStrategies, WatermarkStrategy

    env = StreamExecutionEnvironment.get_execution_environment()
    for value in ("2 s", 2000, timedelta(seconds=2), Duration.of_seconds(2), Time.seconds(2)):
        assert env.enable_checkpointing(value).get_checkpoint_interval() == 2000
        assert env.get_config().set_auto_watermark_interval(value).get_auto_watermark_interval() == 2000
        assert RestartStrategies.fixed_delay_restart(1, value).delay_ms == 2000
        assert TumblingEventTimeWindows.of(value).size == 2000
        assert WatermarkStrategy.for_monotonous_timestamps().with_idleness(value).idle_timeout_ms == 2000


@pytest.mark.parametrize("value, size", [
    ("64 mb", 64 << 20), ("64MB", 64 << 20), ("1g", 1 << 30), ("1 gb", 1 << 30), ("512 kb", 512 << 10),
    ("2 kibibytes", 2048), ("100", 100), ("100 b", 100), ("100 bytes", 100), (4096, 4096), ("1 t", 1 << 40),
])
def test_memory_sizes_in_every_accepted_form(value, size):
    assert parse_memory_size(value, "k") == size


@pytest.mark.parametrize("value", ["lots", "1.5 mb", "-1", -1, True, None, "64 parsecs"])
def test_a_memory_size_that_does_not_parse_names_key_value_and_what_is_accepted(value):
    with pytest.raises(SettingValueError, match=r"^part_size = .* (is not a memory size|is negative)"):
        parse_memory_size(value, "part_size")


def test_the_file_sinks_part_size_takes_a_memory_size():
    from runtime.datastream.connectors.file_system import RollingPolicy

    assert RollingPolicy.default_rolling_policy("128 mb", "15 min").max_part_bytes == 128 << 20
    assert RollingPolicy.default_rolling_policy(1 << 20).max_part_bytes == 1 << 20


# -- resolution ----------------------------------------------------------------------------------------------


def test_the_jobs_key_wins_where_it_should_and_the_spark_conf_where_it_should():
    job = {"heartbeat.timeout": "10 s", "security.ssl.internal.enabled": "true"}
    spark = {"spark.chandy.heartbeatTimeout": "1 min", "spark.chandy.network.encryption": "false"}
    settings = resolve(job, spark)
    assert (settings.heartbeat_timeout_ms, settings.source("heartbeat_timeout_ms")) == (10_000, "heartbeat.timeout")
    assert (settings.network_encryption, settings.source("network_encryption")) == (
        False, "spark.chandy.network.encryption")
    assert resolve({}, spark).heartbeat_timeout_ms == 60_000
    assert resolve({}, {}).heartbeat_timeout_ms == 30_000 and resolve({}, {}).source("heartbeat_timeout_ms") is None


def test_off_and_zero_turn_debloating_and_metrics_off_and_blank_is_unset():
    settings = resolve({}, {"spark.chandy.bufferDebloatTarget": "off", "spark.chandy.metricsInterval": "0"})
    assert (settings.buffer_debloat_target_ms, settings.metrics_interval_ms) == (0, 0)
    assert resolve({}, {"spark.chandy.metricsInterval": "false"}).metrics_interval_ms == 0
    assert resolve({"taskmanager.network.memory.buffer-debloat.enabled": "no"}, {}).buffer_debloating is False
    assert resolve({}, {"spark.chandy.ui.token": "  "}).ui_token is None
    assert resolve({}, {"spark.chandy.slotWaitSeconds": "90"}).slot_wait_ms == 90_000
    assert resolve({}, {"spark.chandy.slotWaitSeconds": "2 min"}).slot_wait_ms == 120_000


def test_every_value_that_does_not_parse_is_named_in_one_error():
    with pytest.raises(SettingValueError) as error:
        resolve({"heartbeat.timeout": "soon"}, {"spark.chandy.ui.port": "http", "spark.chandy.progress": "maybe"})
    message = str(error.value)
    assert message.startswith("Settings that do not parse: ")
    for part in ("heartbeat.timeout = 'soon' is not a duration", "spark.chandy.ui.port = 'http' is not a port",
                 "spark.chandy.progress = 'maybe' is not a boolean"):
        assert part in message


def test_a_losing_value_that_does_not_parse_fails_too():
    with pytest.raises(SettingValueError, match="spark.chandy.heartbeatTimeout = 'soon'"):
        resolve({"heartbeat.timeout": "10 s"}, {"spark.chandy.heartbeatTimeout": "soon"})


class SparkTouched(AssertionError):
    pass


class _ConfOnly:
    """A SparkSession stand-in: its conf answers, anything else means Spark was touched."""

    def __init__(self, values):
        self.conf = type("Conf", (), {"get": lambda _, key, default=None: values.get(key, default)})()

    def __getattr__(self, name):
        raise SparkTouched(f"execute_async touched spark.{name}")


@pytest.mark.parametrize("key, value, accepted", [
    ("spark.chandy.heartbeatTimeout", "soon", "write a number and a unit"),
    ("spark.chandy.unalignedCheckpoints", "yess", "write true or false"),
    ("spark.chandy.ui.port", "http", "write a port number"),
    ("spark.chandy.stateBackend", "leveldb", "write 'hashmap'"),
    ("spark.chandy.slotWaitSeconds", "a while", "write a number and a unit"),
])
def test_a_bad_spark_conf_fails_execute_async_before_spark_is_touched(key, value, accepted):
    env = StreamExecutionEnvironment(spark=_ConfOnly({key: value}))
    env.from_sequence(0, 9).print()
    with pytest.raises(SettingValueError) as error:
        env.execute_async("job")
    assert str(error.value).startswith(f"{key} = {value!r} is not ") and accepted in str(error.value)


def test_a_bad_flink_key_fails_where_the_program_sets_it():
    with pytest.raises(SettingValueError, match="heartbeat.timeout = 'soon' is not a duration: write"):
        StreamExecutionEnvironment.get_execution_environment(Configuration().set_string("heartbeat.timeout", "soon"))


def test_the_jobs_configuration_reaches_the_launch():
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("heartbeat.timeout", "7 s").set_string("rest.port", "9999"))
    settings = resolve(env._configuration, {"spark.chandy.heartbeatTimeout": "1 min"})
    assert (settings.heartbeat_timeout_ms, settings.ui_port) == (7000, 9999)
    env.from_sequence(0, 9).print()
    graph = env.get_job_graph("job")
    env._tune(graph, settings)
    assert (graph.heartbeat_timeout_ms, graph.debloat_target_ms, graph.metrics_interval_ms) == (7000, 1000, 1000)


# -- unknown keys ----------------------------------------------------------------------------------------


def test_an_unknown_spark_chandy_conf_is_a_warning_with_the_nearest_key(caplog):
    with caplog.at_level(logging.WARNING):
        settings = resolve({}, {"spark.chandy.heartbeatTimout": "1 min", "spark.chandy.ui.enable": "false",
                                "spark.executor.memory": "2g", "spark.chandy.progress": "off"})
    assert settings.heartbeat_timeout_ms == 30_000 and settings.ui_enabled and not settings.progress
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "The Spark conf spark.chandy.heartbeatTimout is not a setting of Chandy's, and does nothing: did you mean "
        "spark.chandy.heartbeatTimeout?",
        "The Spark conf spark.chandy.ui.enable is not a setting of Chandy's, and does nothing: did you mean "
        "spark.chandy.ui.enabled?"]


def test_an_unknown_flink_key_is_a_warning_with_the_nearest_key_and_ignored_keys_pass_quietly(caplog):
    config = (Configuration().set_string("heartbeat.timout", "1 min").set_string("heartbeat.interval", "1 s")
              .set_string("execution.checkpointing.unaligned.forced", "true").set_string("pipeline.jars", "x.jar")
              .set_string("python.executable", "python3").set_string("completely.different", "1"))
    with caplog.at_level(logging.WARNING):
        StreamExecutionEnvironment.get_execution_environment(config)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "heartbeat.timout (did you mean heartbeat.timeout?)" in warnings[0]
    assert "completely.different" in warnings[0]
    for quiet in ("heartbeat.interval", "forced", "pipeline.jars", "python.executable"):
        assert quiet not in warnings[0]


def test_every_key_chandy_reads_from_a_configuration_passes_quietly(caplog):
    config = Configuration()
    for option in OPTIONS:
        for key in option.flink_keys:
            config.set_string(key, _valid_text(option))
    with caplog.at_level(logging.WARNING):
        StreamExecutionEnvironment.get_execution_environment(config)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING and "Configuration keys" in r.getMessage()]


def _valid_text(option) -> str:
    samples = {"boolean": "false", "duration": "1 s", "whole number": "2", "number": "1.5",
               "number from 0 to 1": "0.5"}
    if option.kind in samples:
        return samples[option.kind]
    return {"runtime_mode": "STREAMING", "checkpointing_mode": "EXACTLY_ONCE", "restart_strategy": "fixed-delay",
            "state_backend": "hashmap", "ui_port": "0", "buffer_debloat_target_ms": "1 s",
            "metrics_interval_ms": "1 s"}.get(option.name, "/tmp/chandy-settings-test")


# -- the README's reference ----------------------------------------------------------------------------------


def test_the_readmes_configuration_reference_is_the_rendered_table():
    with open(os.path.join(ROOT, "README.md")) as file:
        block = readme_block(file.read())
    assert block == render(), ("README.md's configuration reference differs from the option table: run "
                               "python -m runtime.settings.reference README.md")


def test_the_reference_lists_every_key():
    text = render()
    for option in OPTIONS:
        for key in option.keys():
            assert f"`{key}`" in text


def test_parse_boolean_takes_bools_and_refuses_other_types():
    assert parse_boolean(True, "k") is True and parse_boolean(0, "k") is False
    with pytest.raises(SettingValueError):
        parse_boolean(2, "k")
    assert option_named("progress").parse("Off", "spark.chandy.progress") is False
