"""POP in the broker: pop / ack / change invisible time / revive / DLQ / FIFO over the in-process API
and over remoting (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, BATCH_ACK_MESSAGE)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.conftest import Wire
from tidemq.broker.metrics import BrokerCollector
from tidemq.broker.pop.extra_info import parse_extra_info
from tidemq.broker.pop.result import PopError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers.pop import (
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from tidemq.protocol.message_codec import decode_messages
from tidemq.remoting import RemotingClient
from tidemq.testing import Cluster, run_cluster


async def until(cond: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _fill(wire: Wire, topic: str, n: int, queue_id: int = 0, tag: str | None = None) -> None:
    await wire.create_topic(topic, queues=2)
    for i in range(n):
        props = {"TAGS": tag} if tag else None
        r = await wire.send(topic, f"m{i}".encode(), queue_id=queue_id, properties=props)
        assert r.code == ResponseCode.SUCCESS, r.remark


async def test_pop_ack_and_redelivery(cluster: Cluster, wire: Wire) -> None:
    await _fill(wire, "PopT", 4)
    pop = cluster.broker.pop_service
    first = pop.pop("PG1", "PopT", -1, 32, 600)
    bodies = [m.body for m in first.decode_messages()]
    assert sorted(bodies) == [b"m0", b"m1", b"m2", b"m3"]
    assert pop.pop("PG1", "PopT", -1, 32, 600).messages == []  # invisible
    msgs = first.decode_messages()
    for m in msgs[:2]:
        pop.ack("PG1", "PopT", m.get_property("POP_CK") or "")
    # the two un-acked come back through %RETRY%PG1_PopT with reconsume_times 1
    again: list = []

    async def got_two() -> bool:
        again.extend((await pop.pop_async("PG1", "PopT", -1, 32, 5000, 200)).decode_messages())
        return len(again) >= 2

    deadline = time.monotonic() + 10
    while not await got_two():
        assert time.monotonic() < deadline
    assert sorted(m.body for m in again) == sorted(m.body for m in msgs[2:])
    assert all(m.reconsume_times == 1 and m.topic == "PopT" for m in again)
    assert all(parse_extra_info(m.get_property("POP_CK") or "").retry == "1" for m in again)
    # RocketMQ's clients name the real (retry) topic in an ack, tidemq's in-process callers the popped one
    pop.ack("PG1", "%RETRY%PG1_PopT", again[0].get_property("POP_CK") or "")
    pop.ack("PG1", "PopT", again[1].get_property("POP_CK") or "")
    assert pop.stats.table[("PG1", "PopT")].acked == 4


async def test_change_invisible_time_and_dlq(cluster: Cluster, wire: Wire) -> None:
    await _fill(wire, "PopD", 1)
    broker = cluster.broker
    sgc = broker.subscription_group_manager.find_subscription_group_config("PG2")
    assert sgc is not None
    sgc.retry_max_times = 1
    pop = broker.pop_service
    [m] = pop.pop("PG2", "PopD", -1, 1, 300).decode_messages()
    handle = pop.change_invisible_time("PG2", "PopD", m.get_property("POP_CK") or "", 60_000)
    assert parse_extra_info(handle).invisible_time == 60_000
    await asyncio.sleep(0.5)  # past the old handle's window: still invisible
    assert pop.pop("PG2", "PopD", -1, 1, 300).messages == []
    try:
        pop.change_invisible_time("PG2", "PopD", m.get_property("POP_CK") or "", 1000)
        raise AssertionError("an expired handle must be refused")
    except PopError as exc:
        assert exc.expired
    pop.change_invisible_time("PG2", "PopD", handle, 200)  # due soon: revive -> retry (attempt 2)
    res = await pop.pop_async("PG2", "PopD", -1, 1, 200, 5000)
    [r] = res.decode_messages()
    assert r.reconsume_times == 1
    # not acked again: reconsume_times 1 >= retryMaxTimes 1 -> %DLQ%PG2
    await until(lambda: broker.store.get_max_offset_in_queue("%DLQ%PG2", 0) == 1)
    assert broker.pop_service.stats.table[("PG2", "PopD")].dead_lettered == 1
    families = {f.name: f for f in BrokerCollector(broker).collect()}
    samples = {
        s.name: s.value for s in families["tidemq_pop_redeliveries"].samples if s.labels["group"] == "PG2"
    }
    assert samples == {"tidemq_pop_redeliveries_total": 1.0}  # once to the retry topic, then the DLQ
    assert "tidemq_pop_inflight_messages" in families and "tidemq_pop_acks" in families


async def test_fifo_pop_blocks_queue_until_acked(cluster: Cluster, wire: Wire) -> None:
    await _fill(wire, "PopF", 3)
    pop = cluster.broker.pop_service
    a = pop.pop("PG3", "PopF", -1, 2, 400, order=True).decode_messages()
    assert [m.body for m in a] == [b"m0", b"m1"]
    assert pop.pop("PG3", "PopF", -1, 2, 400, order=True).messages == []  # blocked
    pop.ack("PG3", "PopF", a[1].get_property("POP_CK") or "")  # ack m1 only
    res = await pop.pop_async("PG3", "PopF", -1, 2, 5000, 3000, order=True)
    b = res.decode_messages()
    assert [m.body for m in b] == [b"m0"]  # m0 again (m1 acked), attempt 2
    assert b[0].reconsume_times == 1
    pop.ack("PG3", "PopF", b[0].get_property("POP_CK") or "")
    c = pop.pop("PG3", "PopF", -1, 2, 5000, order=True).decode_messages()
    assert [m.body for m in c] == [b"m2"]
    assert cluster.broker.consumer_offset_manager.query_offset("PG3", "PopF", 0) == 2


async def test_remoting_pop_ack_change_batch(cluster: Cluster, wire: Wire) -> None:
    await _fill(wire, "PopR", 3, tag="TagA")
    now = int(time.time() * 1000)
    header = PopMessageRequestHeader(
        consumer_group="PG4",
        topic="PopR",
        queue_id=-1,
        max_msg_nums=3,
        invisible_time=60_000,
        poll_time=1000,
        born_time=now,
        init_mode=0,
        exp_type="TAG",
        exp="TagA",
        order=False,
    )
    r = await wire.invoke(RequestCode.POP_MESSAGE, header.to_ext_fields())
    assert r.code == ResponseCode.SUCCESS, r.remark
    msgs = decode_messages(r.body or b"")
    assert len(msgs) == 3
    ext = r.ext_fields
    pt, it, rq = ext["popTime"], ext["invisibleTime"], ext["reviveQid"]
    so = ext["startOffsetInfo"].split(" ")[2]
    extra = [f"{so} {pt} {it} {rq} 0 broker-a 0 {m.queue_offset}" for m in msgs]
    ack = AckMessageRequestHeader(
        consumer_group="PG4", topic="PopR", queue_id=0, extra_info=extra[0], offset=msgs[0].queue_offset
    )
    assert (await wire.invoke(RequestCode.ACK_MESSAGE, ack.to_ext_fields())).code == ResponseCode.SUCCESS
    ch = ChangeInvisibleTimeRequestHeader(
        consumer_group="PG4",
        topic="PopR",
        queue_id=0,
        extra_info=extra[1],
        offset=msgs[1].queue_offset,
        invisible_time=30_000,
    )
    rc = await wire.invoke(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ch.to_ext_fields())
    assert rc.code == ResponseCode.SUCCESS and rc.ext_fields["invisibleTime"] == "30000"
    body = BatchAckMessageRequestBody(
        "broker-a",
        [
            BatchAck(
                "PG4",
                "PopR",
                "0",
                int(so),
                0,
                int(rq),
                int(pt),
                int(it),
                1 << (msgs[2].queue_offset - int(so)),
            )
        ],
    )
    assert (await wire.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, body.encode())).code == ResponseCode.SUCCESS
    bad = AckMessageRequestHeader(consumer_group="PG4", topic="PopR", queue_id=0, extra_info="x y", offset=0)
    rb = await wire.invoke(RequestCode.ACK_MESSAGE, bad.to_ext_fields())
    assert rb.code == ResponseCode.INVALID_PARAMETER and "extraInfo" in (rb.remark or "")
    # the group's offsets are ordinary consumer offsets (admin consumerProgress reads them)
    assert sum(cluster.broker.consumer_offset_manager.query_offset_table("PG4", "PopR").values()) == 3
    header.poll_time = 300
    header.born_time = int(time.time() * 1000)
    empty = await wire.invoke(RequestCode.POP_MESSAGE, header.to_ext_fields())
    assert empty.code == ResponseCode.POLLING_TIMEOUT


async def test_revive_holds_at_most_max_pending(tmp_path: Path) -> None:
    """With room for 2 check-points, 6 in flight still all come back, each once."""
    async with run_cluster(tmp_path, pop_revive_max_pending=2) as cluster:
        client = RemotingClient()
        try:
            wire = Wire(client, cluster)
            await _fill(wire, "PopM", 6)
            pop = cluster.broker.pop_service
            for _ in range(6):
                assert len(pop.pop("PGM", "PopM", 0, 1, 300).messages) == 1
            pop.revive.step()
            assert pop.revive.pending_count == 2
            again: list[bytes] = []
            deadline = time.monotonic() + 10
            while len(again) < 6:
                assert time.monotonic() < deadline, again
                assert pop.revive.pending_count <= 2
                res = await pop.pop_async("PGM", "PopM", -1, 32, 60_000, 300)
                again += [m.body for m in res.decode_messages()]
            assert sorted(again) == [f"m{i}".encode() for i in range(6)]
        finally:
            await client.close()


async def test_sql92_pop(cluster: Cluster, wire: Wire) -> None:
    await wire.create_topic("PopSql", queues=1)
    for i in range(4):
        r = await wire.send("PopSql", f"s{i}".encode(), properties={"a": str(i)})
        assert r.code == ResponseCode.SUCCESS
    pop = cluster.broker.pop_service
    res = pop.pop("PGS", "PopSql", -1, 32, 60_000, expression_type="SQL92", expression="a >= 2")
    assert [m.body for m in res.decode_messages()] == [b"s2", b"s3"]
    try:
        pop.pop("PGS", "PopSql", -1, 32, 60_000, expression_type="SQL92", expression="a >>> 2")
        raise AssertionError("a bad SQL92 filter must be refused")
    except PopError as exc:
        assert exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_fifo_shorter_repop_keeps_later_acks(cluster: Cluster, wire: Wire) -> None:
    """A batch [m0..m3] with m0, m2 acked expires; re-pops asking for 1 at a time give m1, then m3:
    m2, acked in the longer batch, is never delivered again (also after a restart)."""
    await _fill(wire, "PopF2", 5)
    pop = cluster.broker.pop_service
    first = pop.pop("PGF", "PopF2", 0, 4, 200, order=True).decode_messages()
    assert [m.body for m in first] == [b"m0", b"m1", b"m2", b"m3"]
    for m in (first[0], first[2]):
        pop.ack("PGF", "PopF2", m.get_property("POP_CK") or "")
    [m1] = (await pop.pop_async("PGF", "PopF2", 0, 1, 5000, 3000, order=True)).decode_messages()
    assert m1.body == b"m1" and m1.reconsume_times == 1
    pop.ack("PGF", "PopF2", m1.get_property("POP_CK") or "")
    await cluster.restart_broker()
    pop = cluster.broker.pop_service
    # m2 (acked in the first batch) is skipped, across the restart too
    res = await pop.pop_async("PGF", "PopF2", 0, 1, 5000, 3000, order=True)
    assert [m.body for m in res.decode_messages()] == [b"m3"]
    pop.ack("PGF", "PopF2", res.decode_messages()[0].get_property("POP_CK") or "")
    assert [m.body for m in pop.pop("PGF", "PopF2", 0, 4, 5000, order=True).decode_messages()] == [b"m4"]
