"""PullRequestHoldService: how a woken long-polling pull is answered."""

from __future__ import annotations

from tests.helpers import wait_for
from tidemq.broker.longpolling import HeldPullRequest, PullRequestHoldService
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand


class FakeChannel:
    """Records answers, and whether they were written at once or through the wake-up coroutine."""

    def __init__(self, write_paused: bool) -> None:
        self.write_paused = write_paused
        self.is_active = True
        self.now: list[RemotingCommand] = []

    def respond_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        self.now.append(response)


def held(channel: FakeChannel, offset: int = 0) -> HeldPullRequest:
    request = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {"queueOffset": str(offset)})
    return HeldPullRequest(channel, request, "T", 0, offset, None, timeout_s=30.0)


async def test_woken_pull_is_answered_in_the_wake_up_unless_writes_are_paused() -> None:
    """A message past the held offset answers the pull inside the notify call (the put's loop turn);
    a connection whose writes are paused is answered by the wake-up coroutine, which can wait."""
    later: list[RemotingCommand] = []

    async def wakeup(channel: FakeChannel, request: RemotingCommand) -> None:
        later.append(request)

    def process_now(channel: FakeChannel, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(ResponseCode.SUCCESS, remark=request.ext_fields["queueOffset"])

    service = PullRequestHoldService(lambda topic, queue_id: 0, wakeup, process_now=process_now)
    ready, paused = FakeChannel(write_paused=False), FakeChannel(write_paused=True)
    service.suspend_pull_request("T", 0, held(ready, offset=4))
    service.suspend_pull_request("T", 0, held(paused, offset=4))

    service.notify_message_arriving("T", 0, max_offset=4)  # nothing past offset 4 yet
    assert service.held_count == 2 and not ready.now

    service.notify_message_arriving("T", 0, max_offset=5)
    assert [r.remark for r in ready.now] == ["4"]  # answered before notify returned
    assert service.held_count == 0
    await wait_for(lambda: bool(later), 5.0, "the paused connection's answer")
    assert not paused.now
    await service.shutdown()
