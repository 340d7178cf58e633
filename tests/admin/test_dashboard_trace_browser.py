"""The dashboard's message page shows a traced message's path, in headless Chromium (as
``test_dashboard_browser``: Debian's ``chromium`` driven by Playwright). The screenshot goes to
``tmp_path`` and, with ``$TIDEMQ_SCREENSHOT_DIR``, to ``docs/images/dashboard-trace.png``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.admin.test_dashboard_browser import _shot, browser  # noqa: F401  (fixture)
from tests.helpers import wait_for_sync
from tidemq.admin import AdminClient
from tidemq.client.consumer.push import PushConsumer
from tidemq.client.producer.producer import Producer
from tidemq.protocol.message import Message, MessageExt
from tidemq.testing import ServeProcess


def test_message_page_shows_the_trace(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    """Sent by one group, consumed by another: the message page lists both steps with costs and results."""
    with ServeProcess(tmp_path / "store", extra_args=["--dashboard-port", "0"]) as proc:
        base = f"http://{proc.fields['dashboard']}"
        ns = proc.namesrv_addr
        producer = Producer(namesrv_addr=ns, producer_group="checkout-service", enable_msg_trace=True)
        producer.start()
        consumed = threading.Event()

        def on_message(msgs: list[MessageExt], ctx: object) -> None:
            consumed.set()

        consumer = PushConsumer(
            namesrv_addr=ns,
            consumer_group="billing-service",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            enable_msg_trace=True,
        )
        consumer.subscribe("Payments", "*")
        consumer.register_message_listener(on_message)
        try:
            sent = producer.send(
                Message("Payments", b'{"order": 42, "amount": "19.90"}', tags="paid", keys="order-42")
            )
            consumer.start()
            assert consumed.wait(20)
        finally:
            consumer.shutdown()  # flushes the trace records
            producer.shutdown()
        url = f"{base}/messages?topic=Payments&msgId={sent.msg_id}"
        page = browser.new_page(viewport={"width": 1200, "height": 700})

        def traced() -> bool:
            page.goto(url)
            return page.locator("section.trace tr", has_text="billing-service").count() == 1

        with AdminClient(ns):
            wait_for_sync(traced, 15, "the trace on the message page")
        trace = page.locator("section.trace")
        sent_row = trace.locator("tr", has_text="Sent")
        assert "checkout-service" in sent_row.inner_text() and "success" in sent_row.inner_text()
        assert proc.broker_addr in sent_row.inner_text()
        consumed_row = trace.locator("tr", has_text="Consumed")
        assert "billing-service" in consumed_row.inner_text() and "SUCCESS" in consumed_row.inner_text()
        _shot(page, tmp_path, "dashboard-trace")
