"""Nobody but the job's own processes gets in: an outsider's attack on every port a running job opens runs no
code anywhere, and the job neither fails nor restarts nor loses a record.

(The same attack in TLS, on separate executor JVMs: tests/integration/test_deployment.py; TLS through real
failures: tests/integration/test_exactly_once.py.)"""

import logging
import os

from benchmarks.security import junk_burst
from operators import CollectSink, SequenceSource
from runtime import RestartStrategies, StreamExecutionEnvironment
from tests.integration.attack import attack, listening_ports
from tests.integration.jobs import CountPerKey, final_counts
from tests.integration.paced import FileExists, PacedSource
from tests.integration.waiting import wait_for

N = 20_000
KEYS = 50


def paced_counting_job(env, tmp_path, sink):
    """numbers -> key_by -> running count -> sink at parallelism 2, running until tmp_path/end exists."""
    env.set_parallelism(2).enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    source = PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 8,
                         end_when=FileExists(str(tmp_path / "end")), together=str(tmp_path / "paced"))
    env.from_source(source, "numbers").uid("numbers").key_by(lambda x: x % KEYS).process(CountPerKey()) \
        .uid("count").sink_to(sink).uid("sink")


def test_an_outsiders_pickles_run_nowhere_and_the_job_ends_exact_without_a_restart(spark, tmp_path, caplog):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    sink = CollectSink("counts")
    paced_counting_job(env, tmp_path, sink)
    marker = tmp_path / "code-ran"
    caplog.set_level(logging.WARNING, logger="runtime.network.acceptor")
    client = env.execute_async("attacked")
    master = client._run
    try:
        wait_for(lambda: master.coordinator.completed_checkpoints(), what="a completed checkpoint")
        registrations = list(master.control.registrations.values())
        assert len(registrations) == 2
        # As an outsider would: every TCP port the driver and the job's Python workers listen on.
        ports = listening_ports([os.getpid()] + [r.pid for r in registrations])
        ours = {master.control.address, master.job_control.address} | {(r.host, r.port) for r in registrations}
        assert ours <= ports, f"the listing misses some of the job's ports: {ours - ports}"
        closed = attack(ports, str(marker), ours)
        assert all(closed[port] for port in ours), f"a port kept an attacker's connection open: {closed}"
        # 1,000 junk connections in a burst, to the control server and both data servers.
        junk_burst(sorted((r.host, r.port) for r in registrations) + [master.control.address], 1000)
        assert master.status.name == "RUNNING"
    finally:
        open(tmp_path / "end", "w").close()
    result = client.get_job_execution_result()
    assert not marker.exists(), "an outsider's pickle was unpickled"
    assert result.restarts == 0
    assert final_counts(result.collected(sink)) == {k: N // KEYS for k in range(KEYS)}
    refused = [r.getMessage() for r in caplog.records if r.name == "runtime.network.acceptor"]
    assert any(m.startswith("Refused a connection to the control server of attempt 0 from ") for m in refused)
    assert any(m.startswith("Refused a connection to the job-control endpoint") for m in refused)
    assert len(refused) < 20, "refusals are summed up, not logged one by one"
