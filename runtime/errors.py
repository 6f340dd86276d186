"""Every error Chandy raises, under one root.

Each class has one meaning, and each message names the thing at fault (operator and its uid, checkpoint id,
state name) and the fix, so that a user reading only the message knows what to do next.

``retryable`` says whether restarting a job from its last checkpoint can help when the error is raised while
the job runs. Errors that will repeat on every attempt (bad records, a declared type the records do not fit,
state that cannot be pickled, a module missing on the executors) are not retryable: the job fails at once
instead of spending its restarts on them.

>>> issubclass(ConfigurationError, ChandyError) and issubclass(ConfigurationError, ValueError)
True
>>> MalformedRecordError.retryable, StorageUnreachableError.retryable
(False, True)
"""

from __future__ import annotations

__all__ = [
    "ChandyError",
    "AsyncFunctionError",
    "QueryableStateError",
    "is_retryable",
    "ApiUsageError",
    "UnknownNameError",
    "ConfigurationError",
    "SettingValueError",
    "JobGraphError",
    "UnpicklableFunctionError",
    "UnsupportedKeyError",
    "KeySelectorError",
    "InsufficientSlotsError",
    "JobFailedError",
    "JobCancelledError",
    "RecordEncodingError",
    "InvalidRecordError",
    "FunctionContractError",
    "MalformedRecordError",
    "InputUnreachableError",
    "ServerUnreachableError",
    "OutputUnreachableError",
    "OutputCommitError",
    "StateUsageError",
    "UnpicklableStateError",
    "TransactionStateError",
    "ProtocolError",
    "AuthenticationError",
    "CheckpointError",
    "StorageUnreachableError",
    "storage_diagnosis",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "IncompatibleCheckpointError",
    "SavepointError",
    "JobControlError",
]


class ChandyError(Exception):
    """Root of every error raised by Chandy.

    >>> from runtime import StreamExecutionEnvironment
    >>> try:
    ...     StreamExecutionEnvironment.get_execution_environment().set_parallelism(0)
    ... except ChandyError as error:
    ...     print(type(error).__name__, error.retryable)
    ConfigurationError False
    """

    retryable = True  # raised inside a running job: may a restart from the last checkpoint succeed?


def is_retryable(error: BaseException) -> bool:
    """Whether a restart may help after ``error``: only Chandy's own errors know that they would repeat.

    >>> is_retryable(ConfigurationError("bad")), is_retryable(OSError("connection refused"))
    (False, True)
    """
    return not isinstance(error, ChandyError) or error.retryable


# -- declaring a job -----------------------------------------------------------------------------------


class ApiUsageError(ChandyError, TypeError):
    """An API call got an argument of the wrong kind (a non-Source to ``from_source``, a record method on a
    columnar stream ...). Raised where the job is declared."""

    retryable = False


class UnknownNameError(ApiUsageError, KeyError):
    """A name the job does not have (a CollectSink's, an operator uid)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigurationError(ChandyError, ValueError):
    """A setting is outside its range (a parallelism of 0, a negative timeout, an unknown format name)."""

    retryable = False


class SettingValueError(ConfigurationError, ApiUsageError):
    """A boolean, a duration or a memory size that does not parse (``runtime.settings.parsers``). The same parsers
    read Configuration keys, Spark confs and API arguments (a window size, a timeout), so the error is both a
    ConfigurationError and an ApiUsageError: code that catches either kind for a bad value keeps catching it.

    >>> issubclass(SettingValueError, ConfigurationError) and issubclass(SettingValueError, ApiUsageError)
    True
    """


class JobGraphError(ChandyError, ValueError):
    """The job as written cannot run (no sink, duplicate uid, bad parallelism ...). Raised before launch.

    >>> from runtime import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> _ = env.from_collection([1, 2]).map(str)  # and no sink
    >>> env.get_job_graph("job")
    Traceback (most recent call last):
        ...
    runtime.errors.JobGraphError: Job 'job' has no sink...
    """

    retryable = False


class UnpicklableFunctionError(JobGraphError):
    """A user function cannot be shipped to the executors.

    >>> import threading
    >>> from runtime import StreamExecutionEnvironment
    >>> env, lock = StreamExecutionEnvironment.get_execution_environment(), threading.Lock()
    >>> _ = env.from_collection([1]).map(lambda x: (lock, x)).print()
    >>> env.get_job_graph("job")
    Traceback (most recent call last):
        ...
    runtime.errors.UnpicklableFunctionError: The function of operator 'Map' cannot be pickled: ...
    """

    def __init__(self, operator_name: str, cause: BaseException):
        self.operator_name = operator_name
        super().__init__(
            f"The function of operator '{operator_name}' cannot be pickled: "
            f"{type(cause).__name__}: {cause}. Functions run on Spark executors, so everything they "
            "capture must be picklable: create locks, sockets, clients, open files and SparkSessions "
            "inside open() instead of capturing them."
        )


class InsufficientSlotsError(ChandyError):
    """The Spark cluster cannot run every subtask of the job at once.

    >>> error = InsufficientSlotsError(needed=4, available=2, master="local[2]")
    >>> error.needed, error.available
    (4, 2)
    >>> print(error)
    The job needs 4 Spark task slots ... offers 2. Lower the job's parallelism to 2 or less, ...
    """

    def __init__(self, needed: int, available: int, master: str):
        self.needed = needed
        self.available = available
        super().__init__(
            f"The job needs {needed} Spark task slots (its highest parallelism; all subtasks run at once "
            f"in one barrier stage) but the cluster ({master}) offers {available}. Lower the job's "
            f"parallelism to {available} or less, or give Spark more executor cores "
            f"(e.g. --master local[{needed}] or more --executor-cores / --num-executors)."
        )


# -- how a job ends --------------------------------------------------------------------------------------


class JobFailedError(ChandyError):
    """A job failed on the executors. ``user_traceback`` is the traceback from the failing subtask.

    ``operator_name`` / ``operator_uid`` name the operator that raised (None for the runtime's own
    failures); ``retryable`` is False when the cause would repeat on a restart.

    >>> error = JobFailedError("Operator 'Map' raised", operator_name="Map", subtask=1,
    ...                        user_traceback="ZeroDivisionError: division by zero")
    >>> error.operator_name, error.subtask, error.retryable
    ('Map', 1, True)
    >>> print(error)
    Operator 'Map' raised
    <BLANKLINE>
    Traceback from the executor:
    ZeroDivisionError: division by zero
    """

    def __init__(self, message: str, operator_name: str | None = None, subtask: int | None = None,
                 user_traceback: str | None = None, operator_uid: str | None = None,
                 retryable: bool = True):
        self.operator_name = operator_name
        self.operator_uid = operator_uid
        self.subtask = subtask
        self.user_traceback = user_traceback
        self.retryable = retryable
        self.message = message
        text = message
        if user_traceback:
            text += "\n\nTraceback from the executor:\n" + user_traceback.rstrip()
        super().__init__(text)

    def with_note(self, note: str) -> "JobFailedError":
        """The same error with ``note`` after its message (before the executor's traceback).

        >>> print(JobFailedError("it broke", user_traceback="tb").with_note("not restarted"))
        it broke (not restarted)
        <BLANKLINE>
        Traceback from the executor:
        tb
        """
        error = JobFailedError(f"{self.message} ({note})", self.operator_name, self.subtask, self.user_traceback,
                               self.operator_uid, self.retryable)
        error.__cause__ = self.__cause__
        return error


class JobCancelledError(ChandyError):
    """The job was cancelled through its JobClient before it finished.

    ``client.get_job_execution_result()`` raises it after ``client.cancel()``:

    >>> try:
    ...     raise JobCancelledError("Job 'job' was cancelled")
    ... except ChandyError as error:
    ...     print(type(error).__name__, "-", error)
    JobCancelledError - Job 'job' was cancelled
    """


# -- records and user functions, while the job runs ------------------------------------------------------


class UnsupportedKeyError(ChandyError, TypeError):
    """A key of a type that has no stable, cross-process hash, or no hash at all (a list)."""

    retryable = False


class KeySelectorError(ChandyError):
    """A ``key_by`` selector raised: the user's function failed (a restart may help, as for any operator)."""


class RecordEncodingError(ChandyError, TypeError):
    """A record does not match the output type its operator declared."""

    retryable = False


class InvalidRecordError(ChandyError, ValueError):
    """A record an operator cannot process by its contract (a null key, the wrong number of fields)."""

    retryable = False


class FunctionContractError(ChandyError, TypeError):
    """A user function returned something of the wrong kind (a tuple where an iterable of records was
    expected, a batch of another schema than declared)."""

    retryable = False


class MalformedRecordError(ChandyError, ValueError):
    """A line of an input file cannot be parsed; the message names the file and the line.

    >>> import fsspec
    >>> from operators.file_source import FileSource
    >>> fsspec.filesystem("memory").pipe("/malformed-error-doc/bad.jsonl", b"{oops")
    >>> reader = FileSource("memory://malformed-error-doc", format="jsonl").create_reader(0, 1)
    >>> reader.open(None); reader.poll(10)
    Traceback (most recent call last):
        ...
    runtime.errors.MalformedRecordError: /malformed-error-doc/bad.jsonl, line 1: malformed jsonl record ...
    """

    retryable = False


class InputUnreachableError(ChandyError):
    """A source cannot reach its input: it cannot list or read it, or its path matches nothing."""


class ServerUnreachableError(ChandyError):
    """A server a connector talks to (a Kafka cluster, a database) does not answer, or refuses what it is sent for a
    reason that may pass (a restart may find it again)."""


class OutputUnreachableError(ChandyError):
    """A sink cannot create or write its output location."""

    def __init__(self, url: str, cause: BaseException):
        self.url = url
        super().__init__(
            f"Output location {url} is not usable: {type(cause).__name__}: {cause}. "
            + (storage_diagnosis(cause) or "Check the path, its credentials and that it can be created and written "
               "from the driver and the executors.")
        )


class OutputConflictError(ChandyError):
    """A sink's commit to a table conflicted with another writer's change that it cannot be reconciled with (a schema
    change, an overwrite). Retryable: the job restarts and the committer commits again on the table as it is then."""


class OutputCommitError(ChandyError):
    """A sink cannot commit output it had made durable (its files disappeared)."""

    retryable = False


class StateUsageError(ChandyError, TypeError):
    """State used in a way its declaration does not allow (keyed state outside a keyed stream, one name
    declared as two kinds of state)."""

    retryable = False


class UnpicklableStateError(ChandyError, TypeError):
    """State that cannot be checkpointed because a value in it cannot be pickled."""

    retryable = False


class TransactionStateError(ChandyError):
    """A sink's transaction was used out of order (written after its pre-commit, committed while still open):
    a bug in the sink or in the code that drives it."""

    retryable = False


class ProtocolError(ChandyError):
    """Two Chandy processes disagree about the protocol (an unknown event, a channel for another slot):
    a bug, or processes of different Chandy versions."""

    retryable = False


# -- checkpoints and their storage -----------------------------------------------------------------------


class AuthenticationError(ProtocolError):
    """The other end of a connection did not prove that it belongs to this job and attempt (it lacks the secret,
    replayed an old handshake, stalled, or presented a TLS certificate the job does not trust). Where Chandy
    accepts connections, such a peer is refused and logged, and the job never hears of it; where a slot
    connects, the peer it found is not the one it was told of (a port reused by another process), which a
    restart can cure."""

    retryable = True


class CheckpointError(ChandyError):
    """Root of errors about checkpoints and their storage."""


class StorageUnreachableError(CheckpointError):
    """The checkpoint storage cannot be listed, read or written right now."""

    def __init__(self, url: str, cause: BaseException):
        self.url = url
        super().__init__(
            f"Checkpoint storage {url} is unreachable: {type(cause).__name__}: {cause}. "
            + (storage_diagnosis(cause) or "Check the URL, its credentials and that the directory can be created and "
               "written from the driver and executors.")
        )


class CheckpointNotFoundError(CheckpointError):
    """The checkpoint to restore does not exist (or was never completed)."""

    retryable = False


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's ``_metadata`` or one of its state files is missing or unreadable."""

    retryable = False


class IncompatibleCheckpointError(CheckpointError):
    """The checkpoint cannot be restored into this job (max parallelism, unknown operators)."""

    retryable = False


class SavepointError(CheckpointError):
    """A savepoint was not taken: the job has no checkpointing, it is not running, a subtask declined, or the
    savepoint could not be written. The job itself goes on (a failed savepoint fails no job)."""


class JobControlError(ChandyError):
    """A running job's control endpoint (``chandy savepoint``, ``chandy stop``) cannot be reached, or refused;
    ``status``: the HTTP status it answered with (None when nothing answered)."""

    retryable = False

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class QueryableStateError(ChandyError):
    """A lookup of queryable state cannot be answered; ``status``: the HTTP status the REST API answers with
    (None in a client that reached no server). 503 means: ask again, the job is starting or restarting."""

    retryable = False

    def __init__(self, message: str, status: int | None = 400):
        super().__init__(message)
        self.status = status


class AsyncFunctionError(ChandyError):
    """An async function's call failed for an input record: it raised (after its retries), or it timed out and
    ``timeout`` raised. The user's exception is chained (``__cause__``), with its traceback. The job restarts from
    its last checkpoint if its restart strategy allows: a remote service may answer then.

    >>> issubclass(AsyncFunctionError, ChandyError), AsyncFunctionError.retryable
    (True, True)
    """


def storage_diagnosis(cause: BaseException) -> str | None:
    """What a failure of an object store (S3 through s3fs and botocore) means and its fix, or None when the
    cause is not one of those known; the classes are told apart by name, so nothing here imports botocore.

    >>> storage_diagnosis(FileNotFoundError("The specified bucket does not exist"))[:32]
    'The bucket does not exist. Fix: '
    >>> storage_diagnosis(ValueError("x")) is None
    True
    """
    chain, seen = [], cause
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain)
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ConnectionRefusedError"}:
        return ("Nothing answers at the storage's endpoint. Fix: start the server, or point Chandy at the one that "
                "runs: for s3://, the environment variable AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) where the "
                "driver and the executors run, or the storage option endpoint_url.")
    if "NoSuchBucket" in text or "specified bucket does not exist" in text:
        return ("The bucket does not exist. Fix: create it (for example `aws s3 mb s3://<bucket>`) or correct the "
                "URL; Chandy does not create buckets.")
    if "NoCredentialsError" in names or "Unable to locate credentials" in text:
        return ("No credentials were found. Fix: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) "
                "where the driver and the executors run, or give the storage options key and secret.")
    if any(code in text for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "Access Key Id you provided",
                                     "request signature we calculated")):
        return ("The server rejected the credentials. Fix: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                "the storage options key and secret) against the server's.")
    if "AccessDenied" in text:
        return ("Access was denied. Fix: grant the credentials list, read, write and delete permissions on the "
                "bucket and prefix (s3:ListBucket, s3:GetObject, s3:PutObject, s3:DeleteObject).")
    return None
