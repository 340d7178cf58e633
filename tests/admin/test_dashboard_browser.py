"""The dashboard of ``tidemq serve --dashboard-port`` in headless Chromium (Debian's ``chromium``,
driven by Playwright through ``executable_path``; no browser download).

Finds a topic, a group's lag (table and chart) and a searched message's body on the pages, sends a
test message, resets the group's offset, and saves screenshots (to ``tmp_path``; also to the
directory in ``$TIDEMQ_SCREENSHOT_DIR`` when set, which is how ``docs/`` images are refreshed).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tidemq.admin import AdminClient
from tidemq.protocol.body import SubscriptionGroupConfig
from tidemq.protocol.message import MessageQueue
from tidemq.testing import ServeProcess

CHROMIUM = os.environ.get("TIDEMQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        pytest.skip(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium as root (apt-get install -y chromium)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
            args=CHROMIUM_ARGS,
        )
        try:
            yield b
        finally:
            b.close()


def _shot(page: Any, tmp_path: Path, name: str, full_page: bool = True) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    extra = os.environ.get("TIDEMQ_SCREENSHOT_DIR")
    if extra:
        shutil.copy(path, Path(extra) / path.name)
    return path


def test_dashboard_in_chromium(tmp_path: Path, browser: Any) -> None:
    """A user finds the topic, the group's lag and a message body, sends a message and resets offsets."""
    with ServeProcess(tmp_path / "store", extra_args=["--dashboard-port", "0"]) as proc:
        base = f"http://{proc.fields['dashboard']}"
        with AdminClient(proc.namesrv_addr) as admin:
            admin.create_topic("OrderEvents", 2)
            admin.wait_for_route("OrderEvents")
            for i in range(8):
                admin.send_message(
                    "OrderEvents",
                    f'{{"order": {i}, "status": "paid"}}'.encode(),
                    keys=f"order-{i}",
                    tags="paid",
                )
            admin.call(
                "create_and_update_subscription_group_config", SubscriptionGroupConfig(group_name="billing")
            )
            mq0, mq1 = (MessageQueue("OrderEvents", "broker-a", q) for q in (0, 1))
            admin.update_consumer_offsets("billing", {mq0: 1, mq1: 1})  # lag 8 - 2 = 6
            page = browser.new_page(viewport={"width": 1200, "height": 820})

            page.goto(f"{base}/topics")
            page.get_by_role("link", name="OrderEvents").click()
            page.wait_for_selector("#consumers")
            assert page.locator("#consumers").get_by_text("billing").is_visible()
            assert page.locator("#queues tbody tr").count() == 2
            _shot(page, tmp_path, "dashboard-topic")

            page.goto(f"{base}/groups")
            row = page.locator("#groups tbody tr", has_text="billing")
            assert row.locator("td.lag").inner_text() == "6"
            for extra in range(3):  # lag grows; each visit of the group page adds a point to the chart
                page.goto(f"{base}/groups/billing")
                admin.send_message("OrderEvents", f"late {extra}".encode(), keys="late")
            page.goto(f"{base}/groups/billing")
            assert page.locator("#total-lag").inner_text() == "9"
            lags = [int(c.inner_text()) for c in page.locator("#progress td.lag").all()]
            assert len(lags) == 2 and sum(lags) == 9  # per queue
            page.wait_for_selector("#lag-chart .uplot canvas")
            assert int(page.locator("#lag-chart").get_attribute("data-points") or 0) >= 4
            _shot(page, tmp_path, "dashboard-group")

            page.goto(f"{base}/messages")
            page.fill("input[name=topic]", "OrderEvents")
            page.fill("input[name=key]", "order-3")
            page.click("#search button")
            page.wait_for_selector("pre.body")
            assert page.locator("pre.body").inner_text() == '{"order": 3, "status": "paid"}'
            _shot(page, tmp_path, "dashboard-messages")

            page.goto(f"{base}/send")
            page.fill("input[name=topic]", "OrderEvents")
            page.fill("textarea[name=body]", "sent from the dashboard")
            page.click("#send-form button")
            assert "SEND_OK" in page.locator("#send-result").inner_text()

            page.goto(f"{base}/groups/billing")
            page.click("#reset-form button")  # empty time: to the end
            page.wait_for_selector("#reset-result")
            assert page.locator("#total-lag").inner_text() == "0"
            assert admin.consumer_progress("billing", "OrderEvents")[0].lag == 0

            _issue_31_pages(page, base, admin, proc.namesrv_addr, tmp_path)
            _pop_pages(page, base, admin, proc.namesrv_addr, tmp_path)
            _topic_pages(page, base, admin, tmp_path)

            page.goto(f"{base}/topics/NoSuchTopic")
            assert "NoSuchTopic" in page.locator("#error").inner_text()
            page.goto(f"{base}/groups/nobody")
            assert "nobody does not exist" in page.locator("#error").inner_text()


def _issue_31_pages(page: Any, base: str, admin: AdminClient, namesrv: str, tmp_path: Path) -> None:
    """Browse a topic, create and delete one, thousands separators, the reset form's default topic,
    the lag chart's axis (issue 31)."""
    from tidemq.client.producer.producer import Producer
    from tidemq.protocol.message import Message

    # a topic alone in the search form lists its newest messages
    page.goto(f"{base}/messages")
    page.fill("input[name=topic]", "OrderEvents")
    page.click("#search button")
    page.wait_for_selector("pre.body")
    assert "newest" in page.locator("#found").inner_text()
    assert page.locator("pre.body").count() >= 8
    _shot(page, tmp_path, "dashboard-browse", full_page=False)

    # thousands separators, and a group with a retry topic resets its own topic by default
    for topic in ("BulkT", "%RETRY%bulk-g"):
        admin.create_topic(topic, 1)
    admin.wait_for_route("BulkT")
    producer = Producer(namesrv_addr=namesrv, producer_group="bulk-p")
    producer.start()
    try:
        producer.send_batch([Message("BulkT", f"bulk {i}".encode()) for i in range(12000)])
    finally:
        producer.shutdown()
    admin.update_consumer_offsets(
        "bulk-g", {MessageQueue("BulkT", "broker-a", 0): 0, MessageQueue("%RETRY%bulk-g", "broker-a", 0): 0}
    )
    page.goto(f"{base}/topics")
    assert page.locator("#topics tr", has_text="BulkT").locator("td.num").nth(1).inner_text() == "12,000"
    for _ in range(2):
        page.goto(f"{base}/groups/bulk-g")
    assert page.locator("#total-lag").inner_text() == "12,000"
    assert page.locator("#reset-form select[name=topic]").input_value() == "BulkT"
    page.wait_for_selector("#lag-chart .uplot canvas")
    # the y axis is wide enough for its widest tick label, so its title does not overlap the ticks
    fit = page.evaluate(
        """() => { const u = document.getElementById('lag-chart')._uplot; const ax = u.axes[1];
        u.ctx.font = ax.font[0];
        const widest = Math.max(...(ax._values || []).map(v => u.ctx.measureText(String(v)).width)) / devicePixelRatio;
        return {size: ax._size, needed: widest + ax.ticks.size + ax.gap, values: ax._values}; }"""
    )
    assert fit["values"] and any("," in str(v) for v in fit["values"]), fit
    assert fit["size"] >= fit["needed"], fit
    _shot(page, tmp_path, "dashboard-group-bulk")

    # create a topic from the Topics page, then delete it from its page (after the confirmation)
    page.goto(f"{base}/topics")
    page.fill("#create-topic input[name=topic]", "MadeInDashboard")
    page.fill("#create-topic input[name=queues]", "3")
    _shot(page, tmp_path, "dashboard-topics")
    page.click("#create-topic button")
    page.wait_for_selector("#queues")
    assert page.url.endswith("/topics/MadeInDashboard")
    assert page.locator("#queues tbody tr").count() == 3
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-topic button")
    page.wait_for_selector("#notice")
    assert "MadeInDashboard deleted" in page.locator("#notice").inner_text()
    assert "MadeInDashboard" not in admin.fetch_all_topic_list()


def _topic_pages(page: Any, base: str, admin: AdminClient, tmp_path: Path) -> None:
    """Thousands of topics: the Topics page shows 1,000 a page, sorted, with counts, next / last
    links and a substring filter (issue 30)."""
    admin.create_topic_list([f"Tenant-{i:04d}" for i in range(2500)], 1)  # UPDATE_AND_CREATE_TOPIC_LIST
    page.goto(f"{base}/topics")
    total = int(page.locator("#pager-top").inner_text().split(" of ")[1].split()[0].replace(",", ""))
    assert page.locator("#topics tbody tr").count() == 1000
    assert page.locator("#pager-top").inner_text().startswith(f"topics 1-1,000 of {total:,}")
    assert total >= 2502  # the tenants, BulkT, OrderEvents (and the broker's own: name, cluster)
    names = page.locator("#topics tbody td:first-child a").all_inner_texts()
    assert names == sorted(names) and names[0] == "BulkT"
    page.locator("#pager-bottom").get_by_role("link", name="last").click()
    page.wait_for_url("**page=*")
    last = page.locator("#topics tbody td:first-child a").all_inner_texts()
    assert last[-1] == "Tenant-2499"
    assert len(last) == total - 1000 * ((total - 1) // 1000)
    page.fill("#topic-filter input[name=q]", "tenant-12")
    page.click("#topic-filter button")
    page.wait_for_url("**q=tenant-12*")
    names = page.locator("#topics tbody td:first-child a").all_inner_texts()
    assert names == [f"Tenant-12{i:02d}" for i in range(100)]
    assert page.locator("#pager-top").inner_text().startswith("topics 1-100 of 100")
    _shot(page, tmp_path, "dashboard-topics-filter", full_page=False)
    page.goto(f"{base}/topics?page=zero")
    assert "page must be a whole number" in page.locator("#error").inner_text()


def _until(what: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def _pop_pages(page: Any, base: str, admin: AdminClient, namesrv: str, tmp_path: Path) -> None:
    """A POP group with one message acked, one redelivered and popped again (in flight): the figures
    in `tidemq admin pop-status`, on the POP groups page and on the group's page (issue 27)."""
    from concurrent.futures import ThreadPoolExecutor

    from click.testing import CliRunner

    from tidemq.admin.cli import admin_group
    from tidemq.client import SimpleConsumer

    admin.create_topic("PopOrders", 1)
    admin.wait_for_route("PopOrders")
    for i in range(2):
        admin.send_message("PopOrders", f"pop {i}".encode())
    consumer = SimpleConsumer(namesrv_addr=namesrv, consumer_group="pop-billing", await_duration=1.0)
    consumer.subscribe("PopOrders")
    consumer.start()
    try:
        got: list[Any] = []
        _until(lambda: got.extend(consumer.receive(2, 60)) or len(got) == 2)
        first, second = sorted(got, key=lambda m: m.queue_offset)
        consumer.ack(first)
        consumer.change_invisible_duration(second, 0.2)  # visible again soon: a redelivery
        again = _until(lambda: consumer.receive(1, 300))  # popped again, left un-acked: in flight
        assert [m.body for m in again] == [b"pop 1"]
        expected = {"inFlight": 1, "popped": 3, "acked": 1, "redelivered": 1, "deadLettered": 0}

        def figures() -> dict[str, int] | None:
            rows = [r.to_json() for r in admin.pop_status("pop-billing")]
            return {k: rows[0][k] for k in expected} if len(rows) == 1 else None

        _until(lambda: figures() == expected)  # acks reach the in-flight count within reviveInterval
        args = ["pop-status", "-n", namesrv, "-g", "pop-billing"]
        with ThreadPoolExecutor(1) as pool:  # off this thread: Playwright's loop runs on it
            result = pool.submit(CliRunner().invoke, admin_group, [*args, "--json"]).result()
            text = pool.submit(CliRunner().invoke, admin_group, args).result()
        assert result.exit_code == 0, result.output
        (row,) = orjson.loads(result.output)
        assert (row["group"], row["topic"]) == ("pop-billing", "PopOrders") and row | expected == row
        assert text.exit_code == 0 and "inFlight" in text.output and "pop-billing" in text.output, text.output

        page.goto(f"{base}/pop")
        row_ = page.locator("#pop tbody tr", has_text="pop-billing")
        cells = {
            c: row_.locator(f"td.{c}").inner_text() for c in ("inflight", "popped", "acked", "redelivered")
        }
        assert cells == {"inflight": "1", "popped": "3", "acked": "1", "redelivered": "1"}
        _shot(page, tmp_path, "dashboard-pop", full_page=False)
        page.goto(f"{base}/groups/pop-billing")
        assert page.locator("#group-pop td.inflight").inner_text() == "1"
        assert page.locator("#group-pop td.redelivered").inner_text() == "1"
    finally:
        consumer.shutdown()
