"""The shared pull state of a lite pull consumer's queues, behind one lock.

A :class:`~tidemq.client.consumer.pull.AsyncPullConsumer`'s queues are pulled by its pull tasks on
the client loop and, for the blocking ``PullConsumer``, by pulls a ``commit_sync`` sends along on
its caller's thread (:mod:`~tidemq.client.consumer.pull_caller`). Both sides read and write this
table and the queues' kernel state, always under :attr:`PullTable.lock` (re-entrant; held for
short sections that never await):

* ``requests``: the current :class:`PullRequest` of each queue being pulled;
* the pull in flight of each: the entry of its PullRequest's
  :attr:`~tidemq.client.consumer.pull_core.QueuePull.window` (the kernel's in-flight record),
  whose token says who sent it, :data:`LOOP` (the queue's pull task) or a ``CallerPull`` (a
  blocking commit's). One pull at a time per queue, so its batches reach the buffer in queue order;
* ``committed``: the offset last committed for each queue (a commit sends only what changed).

Mirrors no single RocketMQ class: ``DefaultLitePullConsumerImpl`` keeps the same state in its
``taskTable`` and ``assignedMessageQueue``.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from tidemq.client.consumer.pull_core import PullRequest
from tidemq.protocol.message import MessageQueue

if TYPE_CHECKING:
    from tidemq.client.consumer.pull_caller import CallerPull

__all__ = ["LOOP", "PullTable", "caller_pull"]

LOOP = "loop"
"""The token of a pull sent by the queue's pull task on the loop."""


def caller_pull(pr: PullRequest) -> CallerPull | None:
    """The caller's pull of ``pr`` in flight, or None (none, or the loop's). Under the table's lock."""
    window = pr.window
    if not window:
        return None
    token = window[0][1]
    return None if isinstance(token, str) else token  # type: ignore[return-value]


class PullTable:
    """Per-queue pull state shared by the loop and a blocking caller (module docstring).

    Args:
        pull_timeout: seconds after which a caller's pull still unanswered is given up (its answer
            is then dropped and the loop pulls that range again): ``consumer_pull_timeout``.
    """

    def __init__(self, pull_timeout: float) -> None:
        self.pull_timeout = pull_timeout
        self.lock = threading.RLock()
        self.requests: dict[MessageQueue, PullRequest] = {}
        self.committed: dict[MessageQueue, int] = {}

    def set_request(self, pr: PullRequest) -> None:
        """``pr`` is now its queue's PullRequest; a caller's pull for the previous one is dropped."""
        with self.lock:
            old = self.requests.get(pr.message_queue)
            self.requests[pr.message_queue] = pr
            if old is not None and old is not pr and caller_pull(old) is not None:
                old.window.clear()  # its answer is dropped when it comes

    def forget(self, mq: MessageQueue) -> None:
        """``mq`` is no longer pulled: its request and any caller's pull are dropped."""
        with self.lock:
            old = self.requests.pop(mq, None)
            if old is not None and caller_pull(old) is not None:
                old.window.clear()

    def claim_for_loop(self, pr: PullRequest) -> bool:
        """Let ``pr``'s pull task pull now: False while a caller's pull of it is in flight. Its
        answer is read here when it has arrived; one unanswered for :attr:`pull_timeout` is given up."""
        with self.lock:
            pending = caller_pull(pr)
            if pending is None:
                if not pr.window:
                    pr.window.append((pr.next_offset, LOOP))
                return True
            conn = pending.conn
        if conn.lock.acquire(blocking=False):  # not in use by a committer: read what has arrived
            try:
                conn.read_pending()
            finally:
                conn.lock.release()
        with self.lock:
            pending = caller_pull(pr)
            if pending is not None and time.monotonic() - pending.started < self.pull_timeout:
                return False
            pr.window.clear()  # a caller's pull given up: its answer is dropped when it comes
            pr.window.append((pr.next_offset, LOOP))
            return True

    def release_loop_claim(self, pr: PullRequest) -> None:
        """The pull task's pull of ``pr`` is answered (or failed)."""
        with self.lock:
            if pr.window and pr.window[0][1] == LOOP:
                pr.window.clear()
