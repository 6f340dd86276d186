"""State as data: a savepoint's or a checkpoint's state read from Python, as Arrow tables (and pandas frames).

``SavepointReader.read(path)`` opens a savepoint or a ``chk-<n>`` directory (``read(job_directory, "latest")`` the
newest restorable checkpoint of a job); ``operators()`` says what state each operator has; ``keyed_state(uid,
name)`` and ``operator_state(uid, name)`` read it. ``SavepointWriter`` writes one: bootstrapped from tables, or an
existing one changed.

>>> from runtime.state_api import SavepointReader
>>> SavepointReader.read("memory://state-api-doc/orders/chk-7")
Traceback (most recent call last):
...
runtime.errors.CheckpointNotFoundError: Checkpoint 7 does not exist in memory://state-api-doc/orders. There is no \
usable checkpoint.
"""

from runtime.state_api.reader import OperatorInfo, SavepointReader
from runtime.state_api.writer import SavepointWriter

__all__ = ["SavepointReader", "SavepointWriter", "OperatorInfo"]
