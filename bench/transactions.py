"""Transactional sends against plain sends, in the same run.

Setup: ``python -m tidemq serve`` (ASYNC_FLUSH) in a subprocess on 127.0.0.1 with its store in a
temporary directory. In this process a blocking ``Producer`` (group ``tx-bench-plain``) sends to
topic ``PlainBench`` and a blocking ``TransactionProducer`` (group ``tx-bench``; its local
transaction commits at once) runs ``send_message_in_transaction`` to ``TxBench``: a half message,
the listener, END_TRANSACTION oneway, so the broker writes the half record, then the real message
and its op record. 128-byte bodies. Two shapes, each measured for plain and transactional sends
alternately in blocks of 20 per thread (so both see the same machine noise):

* ``sync_1``: one thread, one send at a time, ``--count`` messages;
* ``threads_8``: 8 threads sharing the producer, ``--count`` messages in all.

At the end every committed message must be on ``TxBench`` (its queues' max offsets sum to the
transactions sent): a transaction that is only fast because it is not delivered does not count.

Prints ONE JSON line::

    {"bench": "transactions", "setup": {...},
     "sync_1": {"plain_per_s": ..., "tx_per_s": ..., "ratio": ...},
     "threads_8": {"plain_per_s": ..., "tx_per_s": ..., "ratio": ...},
     "tx_delivered": N, "tx_sent": N}

Goal: ``ratio`` >= 0.5 in both shapes (RocketMQ pays two extra writes per transaction too).
Run: ``python -m bench.transactions [--count N]`` (default 2000; about 20 s of wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BODY = b"t" * 128
BLOCK = 20


def _rate(send: Any, topic: str, n: int, threads: int) -> float:
    """Messages per second for ``n`` sends of ``send(Message)`` spread over ``threads`` threads."""
    from tidemq.protocol.message import Message

    per = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]

    def work(k: int) -> None:
        for _ in range(k):
            send(Message(topic, BODY))

    start = time.perf_counter()
    if threads == 1:
        work(n)
    else:
        pool = [threading.Thread(target=work, args=(k,)) for k in per]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return n / (time.perf_counter() - start)


def _shape(plain: Any, tx: Any, count: int, threads: int) -> tuple[dict[str, float], int]:
    """Alternate blocks of plain and transactional sends; rates over all blocks."""
    plain_s = tx_s = 0.0
    done = 0
    block = BLOCK * threads
    while done < count:
        k = min(block, count - done)
        plain_s += k / _rate(plain.send, "PlainBench", k, threads)
        tx_s += k / _rate(tx.send_message_in_transaction, "TxBench", k, threads)
        done += k
    plain_rate, tx_rate = count / plain_s, count / tx_s
    return {
        "plain_per_s": round(plain_rate, 1),
        "tx_per_s": round(tx_rate, 1),
        "ratio": round(tx_rate / plain_rate, 3),
    }, count


def run(count: int) -> dict[str, Any]:
    from tidemq.admin.client import AdminClient
    from tidemq.client import LocalTransactionState, TransactionListener, TransactionProducer
    from tidemq.client.producer.producer import Producer
    from tidemq.protocol.message import Message, MessageExt
    from tidemq.testing import ServeProcess

    class Commit(TransactionListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store") as serve:
        ns = serve.namesrv_addr
        plain = Producer(namesrv_addr=ns, producer_group="tx-bench-plain")
        tx = TransactionProducer(Commit(), namesrv_addr=ns, producer_group="tx-bench")
        plain.start()
        tx.start()
        sent = 0
        try:
            for _ in range(200):  # warm both paths (routes, connections, topic creation)
                plain.send(Message("PlainBench", BODY))
                tx.send_message_in_transaction(Message("TxBench", BODY))
            sent += 200
            sync_1, n1 = _shape(plain, tx, count, 1)
            threads_8, n8 = _shape(plain, tx, count, 8)
            sent += n1 + n8
        finally:
            tx.shutdown()
            plain.shutdown()
        admin = AdminClient(ns)
        try:
            deadline = time.monotonic() + 30
            while True:  # END_TRANSACTION is oneway: wait for the last ones to land
                stats = admin.examine_topic_stats("TxBench")
                delivered = sum(o.max_offset for o in stats.offset_table.values())
                if delivered >= sent or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            admin.close()
    return {
        "bench": "transactions",
        "setup": {
            "count": count,
            "body_bytes": len(BODY),
            "block": BLOCK,
            "broker": "tidemq serve (subprocess, ASYNC_FLUSH)",
            "producers": "blocking Producer vs TransactionProducer (listener commits at once), one process",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "sync_1": sync_1,
        "threads_8": threads_8,
        "tx_sent": sent,
        "tx_delivered": delivered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=2000, help="messages per shape and kind (default 2000)")
    args = parser.parse_args()
    print(json.dumps(run(max(1, args.count))))


if __name__ == "__main__":
    main()
