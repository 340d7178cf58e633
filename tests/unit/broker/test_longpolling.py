"""PullRequestHoldService: how a woken long-polling pull is answered."""

from __future__ import annotations

from tests.helpers import wait_for
from tidemq.broker.longpolling import HeldPullRequest, PullRequestHoldService
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand


class FakeChannel:
    """Records answers, and whether they were written at once or after waiting for the drain."""

    remote_addr = "10.0.0.9:5555"

    def __init__(self, write_paused: bool) -> None:
        self.write_paused = write_paused
        self.is_active = True
        self.now: list[RemotingCommand] = []
        self.later: list[RemotingCommand] = []

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        self.now.append(response)

    async def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        self.later.append(response)


def held(channel: FakeChannel, offset: int = 0) -> HeldPullRequest:
    request = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {"queueOffset": str(offset)})
    return HeldPullRequest(channel, request, "T", 0, offset, None, timeout_s=30.0)


async def test_woken_pull_is_answered_in_the_wake_up_unless_writes_are_paused() -> None:
    """A message past the held offset answers the pull inside the notify call (the put's loop turn);
    a connection whose writes are paused is answered by a task, which can wait for the drain."""

    def wakeup(held: HeldPullRequest) -> RemotingCommand:
        return RemotingCommand.create_response(
            ResponseCode.SUCCESS, remark=held.request.ext_fields["queueOffset"]
        )

    service = PullRequestHoldService(lambda topic, queue_id: 0, wakeup)
    ready, paused = FakeChannel(write_paused=False), FakeChannel(write_paused=True)
    service.suspend_pull_request("T", 0, held(ready, offset=4))
    service.suspend_pull_request("T", 0, held(paused, offset=4))

    service.notify_message_arriving("T", 0, max_offset=4)  # nothing past offset 4 yet
    assert service.held_count == 2 and not ready.now

    service.notify_message_arriving("T", 0, max_offset=5)
    assert [r.remark for r in ready.now] == ["4"]  # answered before notify returned
    assert service.held_count == 0
    assert not paused.later
    await wait_for(lambda: bool(paused.later), 5.0, "the paused connection's answer")
    assert [r.remark for r in paused.later] == ["4"] and not paused.now
    await service.shutdown()
