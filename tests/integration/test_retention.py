"""What a job's retention mode leaves of its checkpoints when it ends: DELETE_ON_CANCELLATION deletes them when it
is cancelled (never the checkpoint it was restored from), NO_EXTERNALIZED_CHECKPOINTS whenever it ends."""

from operators import DiscardingSink, SequenceSource
from runtime import StreamExecutionEnvironment
from runtime.checkpoint_config import ExternalizedCheckpointCleanup
from state_backends.storage import CheckpointStorage
from tests.integration.paced import FileExists, PacedSource
from tests.integration.waiting import wait_for

N = 20_000


def job(spark, tmp_path, retention, held):
    env = StreamExecutionEnvironment.get_execution_environment(spark)
    env.set_parallelism(2).enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "ck")).set_externalized_checkpoint_retention(
        retention)
    numbers = PacedSource(SequenceSource(0, N - 1), per_checkpoint=N // 2 // 4, together=str(tmp_path / "paced"),
                          end_when=FileExists(str(tmp_path / "never")) if held else None)
    env.from_source(numbers, "numbers").uid("numbers").key_by(lambda n: n % 7).reduce(lambda a, b: a + b) \
        .uid("sum").sink_to(DiscardingSink())
    return env


def test_delete_on_cancellation_deletes_this_runs_checkpoints_when_cancelled_and_keeps_them_otherwise(spark, tmp_path):
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "retention")
    job(spark, tmp_path, ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION, held=False).execute("retention")
    kept = storage.usable_ids()
    assert kept, "a finished job keeps its checkpoints"
    client = job(spark, tmp_path, ExternalizedCheckpointCleanup.DELETE_ON_CANCELLATION, held=True) \
        .execute_async("retention", restore_from="latest")
    # retention while it runs deletes the older ones of the first run, as for any checkpoint it supersedes, once a
    # checkpoint of its own completes (a newer directory alone may belong to one still pending)
    wait_for(lambda: max(storage.checkpoint_ids()) > kept[-1] + 1 and min(storage.checkpoint_ids()) == kept[-1],
             what="checkpoints of the second run, and retention of the first run's older ones")
    client.cancel()
    assert storage.checkpoint_ids() == [kept[-1]], "the cancelled run's checkpoints went; the one it restored stays"


def test_no_externalized_checkpoints_leaves_nothing_when_the_job_ends(spark, tmp_path):
    storage = CheckpointStorage("file://" + str(tmp_path / "ck"), "retention")
    result = job(spark, tmp_path, ExternalizedCheckpointCleanup.NO_EXTERNALIZED_CHECKPOINTS, held=False) \
        .execute("retention")
    assert len(result.checkpoints) >= 2, "it took checkpoints while it ran"
    assert storage.checkpoint_ids() == [] and storage.final_state_tokens() == []
