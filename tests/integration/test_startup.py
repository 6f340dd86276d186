"""A job's start-up, as the driver and its slots mark it (runtime.protocol.startup), and the one-call read of the
Spark conf that made it shorter (issue 36)."""

from runtime.tools.count_sink import FinalCountSink
from runtime import Types
from runtime.driver.launcher import _conf_in_one_call, spark_conf_of
from runtime.protocol.startup import PHASES
from runtime.tools.demo import CountPerKey


def test_the_conf_read_in_one_call_is_the_whole_conf_entry_by_entry(spark):
    awkward = "a=b, c\nd -> (e,f) \u00e9"
    spark.conf.set("spark.chandy.test.awkward", awkward)
    try:
        whole = _conf_in_one_call(spark)
        assert whole is not None and whole["spark.chandy.test.awkward"] == awkward
        assert whole == dict(spark.conf.getAll) == spark_conf_of(spark)
    finally:
        spark.conf.unset("spark.chandy.test.awkward")


def test_a_checkpointed_keyed_job_marks_every_part_of_its_startup(env, tmp_path):
    env.set_parallelism(2).enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path))
    sink = FinalCountSink()
    (env.from_sequence(0, 19_999).map(lambda x: x % 100, output_type=Types.LONG()).key_by(lambda x: x)
        .process(CountPerKey()).sink_to(sink))
    client = env.execute_async("startup-marks")
    (seen, _, first, _), = client.get_job_execution_result().sink_results.values()
    assert seen == 20_000
    phases = client._run.startup_phases()
    assert list(phases) == [name for name, _, _ in PHASES] + ["total"]
    assert all(ms is not None and ms >= 0 for ms in phases.values()), phases
    assert abs(sum(ms for name, ms in phases.items() if name != "total") - phases["total"]) < 0.1
    # the slots' own mark of the first record at the sink, and the one the sink noted, are one moment
    with_sink = client._run.startup_phases(first_sink_record=first)
    assert abs(with_sink["total"] - phases["total"]) < 50, (with_sink, phases)
