"""The topics a Kafka connector needs: which exist, and creating the missing ones when the user asked for it.

Chandy creates no topic on its own (a typo in a topic name must not become a new, empty topic). A builder's
``set_create_missing_topics(num_partitions, replication_factor)`` asks for it: the topics are created before the job
starts, with those settings and the cluster's defaults for everything else.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from operators.kafka.client import METADATA_TIMEOUT_S, error_text, for_role, with_log
from runtime.errors import ConfigurationError, ServerUnreachableError

__all__ = ["TopicCreation", "existing_topics", "ensure_topics"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicCreation:
    """How to create a topic that does not exist: its partitions and replication factor (``-1``: the cluster's
    default).

    >>> TopicCreation(4, 3)
    TopicCreation(num_partitions=4, replication_factor=3)
    >>> TopicCreation(0)
    Traceback (most recent call last):
    runtime.errors.ConfigurationError: set_create_missing_topics(): num_partitions must be a positive int or -1 (the cluster's default), not 0.
    """

    num_partitions: int = -1
    replication_factor: int = -1

    def __post_init__(self):
        for name in ("num_partitions", "replication_factor"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not (value == -1 or value > 0):
                raise ConfigurationError(f"set_create_missing_topics(): {name} must be a positive int or -1 (the "
                                         f"cluster's default), not {value!r}.")


def _admin(config: dict):
    from confluent_kafka.admin import AdminClient

    return AdminClient(with_log(for_role(config, "admin")))


def existing_topics(config: dict, what: str, timeout_s: float | None = None) -> dict:
    """Topic name -> partition count on the cluster of ``config``; ServerUnreachableError when it does not answer
    within ``timeout_s`` (default :data:`METADATA_TIMEOUT_S`)."""
    from confluent_kafka import KafkaException

    timeout_s = METADATA_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        metadata = _admin(config).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ServerUnreachableError(
            f"{what}: the Kafka cluster at {config.get('bootstrap.servers')} does not answer within {timeout_s:.0f} s "
            f"({error_text(exc)}). Check the bootstrap servers, that the brokers run, and that this machine and the "
            "executors can reach them.") from None
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def ensure_topics(config: dict, wanted: list[str], creation: TopicCreation | None, what: str, also: str = "") -> dict:
    """The cluster's topics (as :func:`existing_topics`) once every topic of ``wanted`` exists: the missing ones are
    created with ``creation``, or, without it, a ConfigurationError names them and the fixes (``also``: one
    more)."""
    topics = existing_topics(config, what)
    missing = [t for t in dict.fromkeys(wanted) if t not in topics]
    if not missing:
        return topics
    if creation is None:
        plural = len(missing) > 1
        visible = [t for t in topics if not t.startswith("__")]  # not the cluster's own
        raise ConfigurationError(
            f"{what}: topic{'s' if plural else ''} {', '.join(map(repr, missing))} do{'' if plural else 'es'} not exist "
            f"on {config.get('bootstrap.servers')} (it has {', '.join(sorted(visible)[:10]) or 'none'}). Create "
            f"{'them' if plural else 'it'} first (kafka-topics.sh --create, or your cluster's tools), or let the job "
            f"create missing topics with the builder's set_create_missing_topics(num_partitions, replication_factor){also}.")
    _create(config, missing, creation, what)
    return existing_topics(config, what)


def _create(config: dict, missing: list[str], creation: TopicCreation, what: str) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(config)  # kept while its futures resolve: a destroyed client fails them
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=creation.num_partitions, replication_factor=creation.replication_factor)
         for t in missing], operation_timeout=METADATA_TIMEOUT_S, request_timeout=METADATA_TIMEOUT_S)
    for topic, future in futures.items():
        try:
            future.result(timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # another job or subtask made it meanwhile: what was asked for exists
            raise ConfigurationError(f"{what}: creating the missing topic {topic!r} failed: {error_text(exc)}. "
                                     "Create it with your cluster's tools instead.") from None
        except TimeoutError:
            raise ServerUnreachableError(f"{what}: the Kafka cluster at {config.get('bootstrap.servers')} did not "
                                         f"create topic {topic!r} within {METADATA_TIMEOUT_S:.0f} s.") from None
        log.info("%s: created the missing topic %r (%s partitions, replication factor %s)", what, topic,
                 creation.num_partitions, creation.replication_factor)
