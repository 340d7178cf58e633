"""tidemq's FIFO SimpleConsumer and lost pop answers: the pop is sent again at once with the same
``attemptId`` (the v5 Java client's ``ReceiveMessageRequest.attempt_id``), and the broker answers it
with the batch it already handed out, instead of keeping the queue blocked for the invisible time."""

from __future__ import annotations

import time

from tests.integration.conftest import Wire
from tidemq.client import AsyncSimpleConsumer
from tidemq.client.instance import ClientInstance
from tidemq.errors import RemotingSendRequestError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing import Cluster


class _CutAfterAnswer:
    """An RPC hook that loses the next ``lose`` POP answers: the broker has answered (its batch is
    in flight) when the client's connection is cut and the answer dropped."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance
        self.lose = 0
        self.attempts: list[str | None] = []

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        if request.code == RequestCode.POP_MESSAGE:
            self.attempts.append(request.ext_fields.get("attemptId"))

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        if request.code != RequestCode.POP_MESSAGE or self.lose <= 0:
            return
        self.lose -= 1
        self.instance.remoting.channels[remote_addr].close()
        raise RemotingSendRequestError(f"connection to {remote_addr} cut after the broker answered")


async def test_a_fifo_pop_whose_answer_is_lost_is_retried_with_its_attempt_id(
    cluster: Cluster, wire: Wire
) -> None:
    await wire.create_topic("FifoAttempt", queues=1)
    for i in range(3):
        r = await wire.send("FifoAttempt", f"m{i}".encode(), queue_id=0)
        assert r.code == ResponseCode.SUCCESS, r.remark
    consumer = AsyncSimpleConsumer(
        namesrv_addr=cluster.namesrv_addr,
        consumer_group="FifoAttemptG",
        subscriptions={"FifoAttempt": "*"},
        await_duration=0,
        fifo=True,
        instance_name="fifo-attempt",
    )
    await consumer.start()
    hook = _CutAfterAnswer(consumer.instance)
    consumer.instance.remoting.register_rpc_hook(hook)
    try:
        hook.lose = 1
        began = time.monotonic()
        got = await consumer.receive(2, 60)  # the answer is lost; the retry gets the same batch
        assert [m.body for m in got] == [b"m0", b"m1"]
        assert time.monotonic() - began < 5  # at once, not after the 60 s invisible time
        assert [m.reconsume_times for m in got] == [0, 0]  # the same delivery
        first = hook.attempts[0]
        assert first is not None and hook.attempts == [first, first]
        await consumer.ack_many(got)

        hook.lose, hook.attempts = 2, []  # the retry's answer is lost too: the next receive reuses the id
        assert await consumer.receive(2, 60) == []
        got = await consumer.receive(2, 60)
        assert [m.body for m in got] == [b"m2"]
        second = hook.attempts[0]
        assert second not in (None, first) and hook.attempts == [second] * 3
        await consumer.ack(got[0])
    finally:
        await consumer.shutdown()
    plain = AsyncSimpleConsumer(
        namesrv_addr=cluster.namesrv_addr,
        consumer_group="PlainAttemptG",
        subscriptions={"FifoAttempt": "*"},
        await_duration=0,
        instance_name="plain-attempt",
    )
    await plain.start()
    hook = _CutAfterAnswer(plain.instance)
    plain.instance.remoting.register_rpc_hook(hook)
    try:
        hook.lose = 1  # not FIFO: no attempt id, no retry (the messages come back after 60 s)
        assert await plain.receive(2, 60) == []
        assert hook.attempts == [None]
    finally:
        await plain.shutdown()
