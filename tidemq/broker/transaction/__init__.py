"""Transactional messages (RocketMQ 4.9 wire): half messages, END_TRANSACTION, check-back.

* :mod:`~tidemq.broker.transaction.bridge`: the records (half, copy, op, committed, discarded);
* :mod:`~tidemq.broker.transaction.service`: pending table, commit / rollback, the check pass;
* :mod:`~tidemq.broker.transaction.processor`: END_TRANSACTION (37) and the half-send branch.

See docs/transactions.md for the guarantees and the check timing.
"""

from __future__ import annotations

from tidemq.broker.transaction.processor import EndTransactionProcessor, send_half_message
from tidemq.broker.transaction.service import PendingTransaction, TransactionalMessageService

__all__ = [
    "EndTransactionProcessor",
    "PendingTransaction",
    "TransactionalMessageService",
    "send_half_message",
]
