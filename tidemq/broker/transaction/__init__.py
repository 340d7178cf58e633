"""Transactional messages (RocketMQ 4.9 wire): half messages, END_TRANSACTION, check-back.

* :mod:`~tidemq.broker.transaction.bridge`: the records (half, copy, op, committed, discarded);
* :mod:`~tidemq.broker.transaction.service`: pending table, commit / rollback, start-up;
* :mod:`~tidemq.broker.transaction.check`: the check-back pass;
* :mod:`~tidemq.broker.transaction.processor`: END_TRANSACTION (37) and the half-send branch;
* :mod:`~tidemq.broker.transaction.options`: the ``--transaction-*`` command-line options.

Nothing is imported here, so the CLI can load the options without the broker.

See docs/transactions.md for the guarantees and the check timing.
"""
