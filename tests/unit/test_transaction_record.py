"""A two-phase-commit sink's transaction records: moving between statuses costs nothing per record the
transaction holds (a Kafka transaction holds an interval's output)."""

import pytest

from operators.two_phase_commit import TransactionRecord
from runtime.errors import TransactionStateError


class HugeTransaction:
    """Stands for a transaction whose repr would take long: shown only in an error."""

    def __repr__(self):
        raise AssertionError("the transaction was shown although nothing went wrong")


def test_a_transaction_moves_through_its_statuses_without_being_shown():
    record = TransactionRecord(HugeTransaction()).pre_committed(checkpoint_id=3)
    assert record.committed().committed().status.value == "committed"
    assert TransactionRecord(HugeTransaction()).aborted().status.value == "aborted"


def test_a_wrong_move_names_the_transaction():
    with pytest.raises(TransactionStateError, match="Cannot pre-commit transaction 'tx-7': it is committed"):
        TransactionRecord("tx-7").pre_committed(1).committed().pre_committed(2)
