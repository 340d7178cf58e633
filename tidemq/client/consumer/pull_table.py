"""The shared pull state of a lite pull consumer's queues, behind one lock.

A :class:`~tidemq.client.consumer.pull.AsyncPullConsumer`'s queues are pulled by its pull tasks on
the client loop and, for the blocking ``PullConsumer``, by pulls a ``commit_sync`` sends along on
its caller's thread (:mod:`~tidemq.client.consumer.pull_caller`). Both sides read and write this
table, always under :attr:`PullTable.lock` (re-entrant; held for short sections that never await):

* ``requests``: the current :class:`PullRequest` of each queue being pulled;
* ``pulling``: who has a pull of the queue in flight, :data:`LOOP` (its pull task) or a
  ``CallerPull`` (a blocking commit's). One pull at a time per queue, so its batches reach the
  cache in queue order;
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

__all__ = ["LOOP", "PullTable"]

LOOP = "loop"
"""In :attr:`PullTable.pulling`: the queue's pull task on the loop is pulling it."""


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
        self.pulling: dict[MessageQueue, CallerPull | str] = {}
        self.committed: dict[MessageQueue, int] = {}

    def set_request(self, pr: PullRequest) -> None:
        """``pr`` is now its queue's PullRequest; a caller's pull for the previous one is dropped."""
        with self.lock:
            self.requests[pr.message_queue] = pr
            self._drop_caller_pull(pr.message_queue)

    def forget(self, mq: MessageQueue) -> None:
        """``mq`` is no longer pulled: its request and any caller's pull are dropped."""
        with self.lock:
            self.requests.pop(mq, None)
            self._drop_caller_pull(mq)

    def _drop_caller_pull(self, mq: MessageQueue) -> None:
        if not isinstance(self.pulling.get(mq, LOOP), str):
            del self.pulling[mq]  # its answer is dropped when it comes

    def claim_for_loop(self, mq: MessageQueue) -> bool:
        """Let the queue's pull task pull now: False while a caller's pull of it is in flight. Its
        answer is read here when it has arrived; one unanswered for :attr:`pull_timeout` is given up."""
        with self.lock:
            current = self.pulling.get(mq)
            if current is None or current == LOOP:
                self.pulling[mq] = LOOP
                return True
            assert not isinstance(current, str)
            conn = current.conn
        if conn.lock.acquire(blocking=False):  # not in use by a committer: read what has arrived
            try:
                conn.read_pending()
            finally:
                conn.lock.release()
        with self.lock:
            current = self.pulling.get(mq)
            if not isinstance(current, str | None) and time.monotonic() - current.started < self.pull_timeout:
                return False
            self.pulling[mq] = LOOP
            return True

    def release_loop_claim(self, mq: MessageQueue) -> None:
        """The pull task's pull of ``mq`` is answered (or failed)."""
        with self.lock:
            if self.pulling.get(mq) == LOOP:
                del self.pulling[mq]
