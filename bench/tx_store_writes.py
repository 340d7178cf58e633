"""Store writes and broker CPU per committed transaction, without the network.

Setup: an in-process broker (:func:`tidemq.testing.run_cluster`, ASYNC_FLUSH, store in a temporary
directory). Each transaction is what END_TRANSACTION COMMIT does on the broker, called directly on
its :class:`~tidemq.broker.transaction.service.TransactionalMessageService`: ``put_half`` of a
128-byte message (UNIQ_KEY, PGROUP, TRAN_MSG), ``find_half``, ``end(commit=True)``. Counted per
transaction over ``--count`` transactions (after 200 warm-up ones):

* ``commit_log_writes``: writes into commit-log segments (one per put: the half, then the real
  message and its op record in one append);
* ``consume_queue_writes``: writes into consume-queue files (half queue, real queue, op queue);
* ``index_entries``: key-index entries written;
* ``other_pwrites``: other ``os.pwrite`` calls (the transaction fate file, written as the next
  check pass would);
* ``cpu_us``: process CPU time per transaction (best of ``--reps`` runs).

Prints ONE JSON line: ``{"bench": "tx_store_writes", "setup": {...}, "per_transaction": {...}}``.
Run: ``python -m bench.tx_store_writes [--count N] [--reps R]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from typing import Any

BODY = b"t" * 128
WARMUP = 200


class _Counts:
    def __init__(self) -> None:
        self.commit_log = self.consume_queue = self.pwrites = 0


def _instrument(counts: _Counts) -> None:
    """Count MappedFile writes by kind and every other os.pwrite (process-wide, for this run)."""
    from tidemq.store import mapped_file

    write = mapped_file.MappedFile.write

    def counted(self: Any, pos: int, data: Any) -> Any:
        if "consumequeue" in str(self.path):
            counts.consume_queue += 1
        else:
            counts.commit_log += 1
        return write(self, pos, data)

    mapped_file.MappedFile.write = counted  # type: ignore[method-assign]
    pwrite = os.pwrite

    def counted_pwrite(fd: int, data: Any, offset: int) -> int:
        counts.pwrites += 1
        return pwrite(fd, data, offset)

    os.pwrite = counted_pwrite


async def _run(count: int, reps: int) -> dict[str, Any]:
    from tidemq.broker.transaction.bridge import half_batch
    from tidemq.testing import run_cluster

    counts = _Counts()
    with tempfile.TemporaryDirectory(prefix="tx-writes-") as tmp:
        async with run_cluster(tmp) as cluster:
            broker = cluster.broker
            service = broker.transaction_service
            index = broker.store.index_service
            assert service is not None and index is not None

            async def one(i: int) -> None:
                text = f"UNIQ_KEY\x01U{i:08d}\x02PGROUP\x01PG\x02TRAN_MSG\x01true"
                batch = half_batch(
                    topic="TxWrites",
                    queue_id=i % 4,
                    sys_flag=4,
                    born_timestamp=int(time.time() * 1000),
                    born_host="127.0.0.1:1",
                    reconsume_times=0,
                    flag=0,
                    body=BODY,
                    properties_text=text,
                )
                put = service.put_half(batch, "PG", "TxWrites").append_result
                assert put is not None
                half = service.find_half(put.wrote_offset, put.logics_offset, "PG")
                assert not isinstance(half, str)
                result = service.end(half, True)
                assert result is not None and not isinstance(result, str) and result.status.value == "PUT_OK"
                if i % 32 == 0:
                    await asyncio.sleep(0)  # let the dispatcher drain

            n = 0
            for _ in range(WARMUP):
                await one(n)
                n += 1
            await asyncio.sleep(0.05)
            _instrument(counts)
            entries0 = sum(f.index_count for f in index.files)
            best = float("inf")
            for _ in range(reps):
                start = time.process_time()
                for _ in range(count):
                    await one(n)
                    n += 1
                await asyncio.sleep(0)
                best = min(best, time.process_time() - start)
            await asyncio.sleep(0.05)
            fates = getattr(service, "fates", None)  # (none before fates were recorded)
            if fates is not None:
                fates.sync()  # the fates still in memory are written as the check pass would
            entries = sum(f.index_count for f in index.files) - entries0
    total = count * reps
    return {
        "commit_log_writes": round(counts.commit_log / total, 3),
        "consume_queue_writes": round(counts.consume_queue / total, 3),
        "index_entries": round(entries / total, 3),
        "other_pwrites": round((counts.pwrites - counts.consume_queue) / total, 3),
        "cpu_us": round(best / count * 1e6, 1),
    }


def main() -> None:
    """Parse the command line, run the transactions, print the write and CPU counts as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=5000, help="transactions per rep (default 5000)")
    parser.add_argument("--reps", type=int, default=3, help="reps; cpu_us is the best (default 3)")
    args = parser.parse_args()
    per = asyncio.run(_run(args.count, args.reps))
    setup = {"count": args.count, "reps": args.reps, "body_bytes": len(BODY), "loadavg": os.getloadavg()[0]}
    print(json.dumps({"bench": "tx_store_writes", "setup": setup, "per_transaction": per}))


if __name__ == "__main__":
    main()
