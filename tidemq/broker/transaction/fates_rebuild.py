"""Rebuilding the fate file from the store, once: a store from before fates were recorded, a slave
promoted to master (fates are not replicated: the records they come from are), a deleted directory.

Fates come from the op records below the check service's op offset (those above it are read by
every start-up anyway: :meth:`TransactionalMessageService.load`) and from the discarded halves on
``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0 (their ``TRAN_PREPARED_QUEUE_OFFSET`` names the origin; a
discard written before tidemq added it to first records cannot be placed and is skipped). A marker
file ``.complete`` in the fates directory says it was done; a crash before it only means doing it
again. Cost: one read of each op and discard record (about 10 us each), once, at start-up.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from tidemq.broker.transaction.bridge import PREPARED_QUEUE_OFFSET
from tidemq.broker.transaction.fates import DISCARDED, UNKNOWN
from tidemq.protocol.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from tidemq.broker.transaction.service import TransactionalMessageService

__all__ = ["COMPLETE_MARKER", "rebuild_fates"]

log = logging.getLogger(__name__)

COMPLETE_MARKER: Final = ".complete"


def rebuild_fates(service: TransactionalMessageService) -> int | None:
    """Record the fates the store tells below the op offset, unless done before; returns how many
    records were read (None when the marker says it was done)."""
    fates = service.fates
    marker = fates.directory / COMPLETE_MARKER
    if marker.exists():
        return None
    store = service.broker.store
    started = time.monotonic()
    read = 0
    op_cq = store.find_consume_queue(TRANS_OP_HALF_TOPIC, 0)
    if op_cq is not None:
        for offset in range(
            op_cq.get_min_offset_in_queue(), service.queue_offset(TRANS_OP_HALF_TOPIC, op_cq)
        ):
            op = service.read(op_cq, offset)
            if op is not None:
                service.note_fate(op)
                read += 1
    discards = store.find_consume_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0)
    if discards is not None:
        for offset in range(discards.get_min_offset_in_queue(), discards.get_max_offset_in_queue()):
            msg = service.read(discards, offset)
            raw = msg.get_property(PREPARED_QUEUE_OFFSET) if msg is not None else None
            if raw is not None and raw.isascii() and raw.isdigit():
                read += 1
                if fates.get(int(raw)) == UNKNOWN:
                    fates.set(int(raw), DISCARDED)
    fates.sync()
    fates.directory.mkdir(parents=True, exist_ok=True)
    marker.touch()
    if read:
        log.info(
            "transactions: fates of %d decided or discarded transactions rebuilt from the store in %.1f s",
            read,
            time.monotonic() - started,
        )
    return read
