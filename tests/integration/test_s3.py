"""The checkpoint chaos tests with their checkpoints on an S3-protocol server (tests/s3_server.py): a killed worker
restored from S3, an S3 server that goes away mid-job (for 5 s, and until a checkpoint has failed), and a rescaled
restore. The file chaos test runs on
S3 too (tests/integration/test_file_pipeline.py, ``[s3]``)."""

import random
import threading
from urllib.parse import urlsplit

import s3fs

from tests.integration.test_checkpoint_restore import assert_rescaled_restore_is_exact, run_until_checkpointed
from tests.integration.test_exactly_once import KEYS, build, expected_running_counts
from tests.integration.waiting import wait_for
from tests.tcp_proxy import TcpProxy

OUTAGE_S = 5
OUTAGE_N = 40_000  # a third of the local test's numbers: each checkpoint costs more on S3, the paths are the same


def test_a_killed_worker_and_a_server_away_for_seconds_cost_checkpoints_not_exactly_once(env, s3_server, tmp_path):
    """A worker is killed after a checkpoint (the job restores from S3), then the server is unreachable for 5 s:
    checkpoints fail while it is away (tolerated), the job goes on once it is back, and the output is exactly the
    plain-Python reference."""
    target = urlsplit(s3_server.endpoint_url)
    proxy = TcpProxy(target.hostname, target.port)
    # Executors get this filesystem pickled: the proxy's endpoint, and few retries, so that an upload fails while the
    # server is away rather than outlasting the outage inside botocore's retry loop.
    filesystem = s3fs.S3FileSystem(endpoint_url=proxy.endpoint_url, skip_instance_cache=True, use_listings_cache=False,
                                   config_kwargs={"retries": {"max_attempts": 2, "mode": "standard"},
                                                  "connect_timeout": 2, "read_timeout": 20})
    client = None
    try:
        # A kill before 40% of the input (build() draws it from the seed) leaves most of it for after the outage,
        # which paces on completed checkpoints: the job cannot end while S3 is away.
        seed = random.choice([s for s in range(1000) if random.Random(s).uniform(0.2, 0.8) < 0.4])
        sink = build(env, tmp_path, 2, "kill", seed, storage=f"s3://{s3_server.bucket('outage')}/checkpoints",
                     filesystem=filesystem, n=OUTAGE_N)
        env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(100)
        client = env.execute_async("s3-outage")
        run = client._run
        wait_for(lambda: run.restarts >= 1 and len(run.restored_from) >= 2, what="the restart after the kill")
        restored = run.restored_from[-1]
        wait_for(lambda: (run.newest_checkpoint() or (0,))[0] > (restored or 0),
                 what="a checkpoint of the restored attempt")
        # Away for 5 s and until a checkpoint has failed: uploads retried on a slow machine can outlast 5 s, and the
        # count goes back to 0 at the first success once the server is back, so it is read while the server is away.
        failed = threading.Event()

        def a_checkpoint_failed() -> bool:
            if run.coordinator.consecutive_failures >= 1:
                failed.set()
            return failed.is_set()

        over = proxy.outage(OUTAGE_S, until=a_checkpoint_failed)
        assert failed.wait(120), f"seed {seed}: timed out waiting for a checkpoint failing while S3 is away"
        result = client.get_job_execution_result(timeout=300)
        assert over.is_set(), f"seed {seed}: the job finished during the outage"
        assert result.restarts == 1, f"seed {seed}: failed checkpoints were tolerated, only the kill restarted"
        assert result.restored_from[0] is None and result.restored_from[1] is not None, f"seed {seed}"
        assert sorted(result.collected(sink)) == expected_running_counts(OUTAGE_N, KEYS), f"seed {seed}"
    finally:
        if client is not None and not client._run.ended:  # a failed assertion leaves no job running
            client.cancel()
        proxy.close()


def test_a_rescaled_restore_from_s3_is_exact(spark, s3_server, tmp_path):
    url = f"s3://{s3_server.bucket('rescale')}/checkpoints"
    _, ids = run_until_checkpointed(spark, url, "rescale-s3", tmp_path)
    assert ids, "the first run left completed checkpoints"
    assert_rescaled_restore_is_exact(spark, url, "rescale-s3", ids, 3, together=str(tmp_path / "restore-paced"))
