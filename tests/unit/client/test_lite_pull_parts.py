"""The lite pull consumer's components, without a broker: pull answers through the kernel into the
poll buffer, subscription vs assignment, commits before start."""

from __future__ import annotations

import struct

import pytest

from tidemq.client.api import PullResult, PullStatus
from tidemq.client.consumer.lite_pulls import count_records
from tidemq.client.consumer.process_queue import ProcessQueue
from tidemq.client.consumer.pull import AsyncPullConsumer
from tidemq.client.consumer.pull_core import PullRequest
from tidemq.errors import ClientError
from tidemq.protocol.message import MessageQueue

MQ = MessageQueue("T", "b", 0)


def _records(n: int) -> bytes:
    return b"".join(struct.pack(">i", 12) + b"\0" * 8 for _ in range(n))


def test_count_records_walks_sizes() -> None:
    assert count_records(_records(3)) == 3
    assert count_records(b"") == 0
    assert count_records(_records(1) + struct.pack(">i", 0)) == 1


def test_pulled_answers_go_through_the_kernel_into_the_buffer() -> None:
    core = AsyncPullConsumer(consumer_group="g", namesrv_addr="127.0.0.1:1")
    pr = PullRequest("g", MQ, ProcessQueue(), 10)
    put: list[object] = []
    found = PullResult(PullStatus.FOUND, 13, 0, 20, suggest_which_broker_id=1, body=_records(3))
    core.pulls.pulled(pr, found, None, put.append)
    assert put == [(MQ, pr.process_queue, found, None, 3, 36)]
    pq = pr.process_queue
    assert (pr.next_offset, pr.max_offset, pq.msg_count, pq.msg_size, pr.suggest_which_broker_id) == (
        13,
        20,
        3,
        36,
        1,
    )
    # OFFSET_ILLEGAL: the lite pull consumer goes on from the broker's offset
    core.pulls.pulled(pr, PullResult(PullStatus.OFFSET_ILLEGAL, 5, 5, 20), None, put.append)
    assert pr.next_offset == 5 and len(put) == 1
    assert core.committer.changed_offsets() == []  # not started: nothing to commit


async def test_subscribe_and_assign_do_not_mix() -> None:
    a = AsyncPullConsumer(consumer_group="g", namesrv_addr="127.0.0.1:1")
    a.subscribe("T")
    with pytest.raises(ClientError):
        await a.assign([MQ])
    b = AsyncPullConsumer(consumer_group="g", namesrv_addr="127.0.0.1:1")
    await b.assign([MQ])
    assert b.queues.assigned == {MQ} and "T" in b.subscribed_topics()
    with pytest.raises(ClientError):
        b.subscribe("T")
