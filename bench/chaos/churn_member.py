"""One member of the churn scenario's consumer group (a subprocess the scenario SIGKILLs).

``python -m bench.chaos.churn_member --namesrv H:P --group G --topic T --out FILE``: a tidemq
``PushConsumer`` (CLUSTERING, from the first offset) that appends every consumed body as one line
to ``FILE`` (one ``write`` per batch, before the batch is acknowledged), prints ``ready`` once
started, and shuts down cleanly (committing its offsets) on SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from tidemq.client import ConsumeConcurrentlyStatus, PushConsumer

    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def on_messages(msgs: list[Any], context: Any) -> Any:
        os.write(fd, b"".join(m.body + b"\n" for m in msgs))  # durable before the ack
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        consumer_group=args.group,
        namesrv_addr=args.namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        persist_consumer_offset_interval=1.0,
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(on_messages)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    print("ready", flush=True)
    stop.wait()
    consumer.shutdown()
    os.close(fd)


if __name__ == "__main__":
    main()
