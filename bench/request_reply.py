"""Request-reply round trip against a plain synchronous send, in the same run.

Setup: ``python -m tidemq serve`` (ASYNC_FLUSH) in a subprocess on 127.0.0.1 with its store in a
temporary directory; topic ``RpcBench`` (4 queues). A responder in a second process: a
``PushConsumer`` (group ``rpc-bench-server``) whose listener answers every request with
``create_reply_message`` + ``Producer.send_reply``. In this process one blocking ``Producer``
measures, alternating blocks of 50, ``--count`` synchronous sends of a 64-byte message to the same
topic (the responder ignores them) and ``--count`` ``Producer.request`` calls (64-byte request,
64-byte reply: send -> broker -> long-polled consumer -> reply 325 -> broker push 326 -> requester);
a second producer with ``enable_msg_trace=True`` sends ``--count`` more in blocks between them, to
show what tracing adds to a send (records are written by the trace dispatcher in the background).

Prints ONE JSON line::

    {"bench": "request_reply", "setup": {...},
     "send": {"n": N, "p50_ms": ..., "p99_ms": ..., "mean_ms": ...},
     "request_reply": {"n": N, "p50_ms": ..., "p99_ms": ..., "mean_ms": ...},
     "send_traced": {"n": N, "p50_ms": ..., "p99_ms": ..., "mean_ms": ..., "trace_records": ...},
     "request_over_send_p50": ...}

Run: ``python -m bench.request_reply [--count N]`` (default 400; about 10 s of wall time).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TOPIC = "RpcBench"
BODY = b"x" * 64


def _responder(namesrv: str, stop: Any) -> None:
    """Child process: answer every request on TOPIC until ``stop`` is set."""
    from tidemq.client.consumer.push import PushConsumer
    from tidemq.client.producer.producer import Producer
    from tidemq.client.producer.request import create_reply_message, get_reply_to_client
    from tidemq.protocol.message import MessageExt

    producer = Producer(namesrv_addr=namesrv, producer_group="rpc-bench-responder")
    producer.start()

    def answer(msgs: list[MessageExt], ctx: object) -> None:
        for m in msgs:
            if get_reply_to_client(m) is not None:
                producer.send_reply(create_reply_message(m, BODY))

    consumer = PushConsumer(
        namesrv_addr=namesrv, consumer_group="rpc-bench-server", consume_from_where="CONSUME_FROM_LAST_OFFSET"
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(answer)
    consumer.start()
    stop.wait()
    consumer.shutdown()
    producer.shutdown()


def _figures(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2], 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def run(count: int) -> dict[str, Any]:
    from tidemq.client.producer.producer import Producer
    from tidemq.client.producer.request import RequestTimeoutError
    from tidemq.protocol.message import Message
    from tidemq.testing import ServeProcess

    with tempfile.TemporaryDirectory() as tmp, ServeProcess(Path(tmp) / "store") as serve:
        ns = serve.namesrv_addr
        producer = Producer(namesrv_addr=ns, producer_group="rpc-bench-client", default_topic_queue_nums=4)
        producer.start()
        producer.send(Message(TOPIC, b"create the topic"))
        traced = Producer(namesrv_addr=ns, producer_group="rpc-bench-traced", enable_msg_trace=True)
        traced.start()
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        child = ctx.Process(target=_responder, args=(ns, stop), daemon=True)
        child.start()
        try:
            deadline = time.monotonic() + 60
            while True:  # the responder is ready when a request comes back
                try:
                    producer.request(Message(TOPIC, BODY), timeout_ms=1000)
                    break
                except RequestTimeoutError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the responder never answered") from None
            for _ in range(50):  # warm every path
                producer.send(Message(TOPIC, BODY))
                traced.send(Message(TOPIC, BODY))
                producer.request(Message(TOPIC, BODY), timeout_ms=3000)
            sends: list[float] = []
            requests: list[float] = []
            traced_sends: list[float] = []
            while len(sends) < count:
                for _ in range(min(50, count - len(sends))):
                    t0 = time.perf_counter()
                    producer.send(Message(TOPIC, BODY))
                    sends.append((time.perf_counter() - t0) * 1000)
                for _ in range(min(50, count - len(requests))):
                    t0 = time.perf_counter()
                    reply = producer.request(Message(TOPIC, BODY), timeout_ms=3000)
                    requests.append((time.perf_counter() - t0) * 1000)
                    assert reply.body == BODY
                for _ in range(min(50, count - len(traced_sends))):
                    t0 = time.perf_counter()
                    traced.send(Message(TOPIC, BODY))
                    traced_sends.append((time.perf_counter() - t0) * 1000)
            dispatcher = traced.core.trace_hook.dispatcher
        finally:
            stop.set()
            child.join(30)
            if child.is_alive():
                child.kill()
            traced.shutdown()
            producer.shutdown()
    send_fig, rr_fig = _figures(sends), _figures(requests)
    traced_fig = _figures(traced_sends) | {"trace_records": dispatcher.sent_records}
    return {
        "bench": "request_reply",
        "setup": {
            "count": count,
            "body_bytes": len(BODY),
            "broker": "tidemq serve (subprocess, ASYNC_FLUSH)",
            "responder": "PushConsumer + Producer.send_reply in a second process",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "send": send_fig,
        "request_reply": rr_fig,
        "send_traced": traced_fig,
        "request_over_send_p50": round(rr_fig["p50_ms"] / send_fig["p50_ms"], 2)
        if send_fig["p50_ms"]
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=400, help="sends and requests each (default 400)")
    args = parser.parse_args()
    from tidemq.remoting.loop import use_best_event_loop

    use_best_event_loop()
    print(json.dumps(run(max(1, args.count))))


if __name__ == "__main__":
    main()
