"""FIFO POP ``attemptId`` (RocketMQ 5's ``PopMessageRequestHeader.attemptId``,
``ConsumerOrderInfoManager.checkBlock``): a pop retried with the id of the batch in flight gets the
same messages again at once, same attempt, new handles; another id (or none) stays blocked. Over
remoting and in-process, across a broker restart."""

from __future__ import annotations

import time

from tests.integration.conftest import Wire
from tests.integration.test_pop import _fill
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers.pop import PopMessageRequestHeader
from tidemq.protocol.message_codec import decode_messages
from tidemq.testing import Cluster


async def _wire_pop(wire: Wire, attempt_id: str | None) -> list[bytes]:
    header = PopMessageRequestHeader(
        consumer_group="PGA", topic="PopA", queue_id=-1, max_msg_nums=2, invisible_time=60_000,
        poll_time=0, born_time=int(time.time() * 1000), init_mode=0, order=True, attempt_id=attempt_id,
    )  # fmt: skip
    r = await wire.invoke(RequestCode.POP_MESSAGE, header.to_ext_fields())
    assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), r.remark
    return [m.body for m in decode_messages(r.body or b"")]


async def test_a_retried_fifo_pop_with_its_attempt_id_gets_the_same_messages(
    cluster: Cluster, wire: Wire
) -> None:
    await _fill(wire, "PopA", 3)
    assert await _wire_pop(wire, "attempt-1") == [b"m0", b"m1"]
    assert await _wire_pop(wire, "attempt-1") == [b"m0", b"m1"]  # the answer was lost: again
    assert await _wire_pop(wire, "attempt-2") == []  # another attempt: blocked (60 s invisible)
    assert await _wire_pop(wire, None) == []
    await cluster.restart_broker()  # the batch's attempt id is in its revive-log record
    pop = cluster.broker.pop_service
    again = pop.pop("PGA", "PopA", -1, 2, 60_000, order=True, attempt_id="attempt-1").decode_messages()
    assert [m.body for m in again] == [b"m0", b"m1"]
    assert [m.reconsume_times for m in again] == [0, 0]  # the same delivery, not a redelivery
    assert pop.stats.table[("PGA", "PopA")].revived == 0
    for m in again:  # the newest handles ack
        pop.ack("PGA", "PopA", m.get_property("POP_CK") or "")
    nxt = pop.pop("PGA", "PopA", -1, 2, 60_000, order=True, attempt_id="attempt-3").decode_messages()
    assert [m.body for m in nxt] == [b"m2"]
