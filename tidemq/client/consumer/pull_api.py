"""One pull path for every consumer. Mirrors RocketMQ's ``PullAPIWrapper``.

:class:`PullAPIWrapper` is used by the push consumer and the lite pull consumer:

* :meth:`PullAPIWrapper.pull_kernel_impl` picks the broker of the queue's group to pull from --
  the node the last answer suggested (``suggestWhichBrokerId``, kept in the queue's pull state,
  :attr:`QueuePull.suggest_which_broker_id <tidemq.client.consumer.pull_core.QueuePull>`, and
  passed in the pull's fields: RocketMQ's ``pullFromWhichNodeTable``), else the master; the
  first address present when that node is
  not in the route (so consumers continue from a slave while the master is gone) -- clears the
  commit-offset flag when it is a slave, and sends PULL_MESSAGE.
* A broker address whose connect failed is avoided for :data:`UNREACHABLE_BACKOFF_S` seconds: the
  next pulls of that group go to another node of the group (a slave) even though the route (not
  refreshed yet) still lists the master and the slave keeps suggesting it.
* :func:`process_pull_result` decodes/filters the body (the kernel's ``on_result`` remembers the
  suggestion).

:func:`pull_messages` is the same request for callers without a client instance (the Spark
reader): one address, one pull, optionally decoded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol, TypedDict, Unpack

from tidemq.client.api import ClientAPI, PullResult, PullStatus
from tidemq.client.route import FindBrokerResult, find_broker_in_subscribe
from tidemq.errors import BrokerError, ClientError, RemotingConnectError
from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import is_tag_matched
from tidemq.protocol.headers import PullSysFlag
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.message_codec import decode_messages
from tidemq.protocol.topic import MASTER_ID

__all__ = [
    "UNREACHABLE_BACKOFF_S",
    "BrokerTable",
    "PullAPIWrapper",
    "PullKernelFields",
    "process_pull_result",
    "pull_messages",
]

log = logging.getLogger(__name__)

_GROUP_UNKNOWN_CODES = frozenset(
    {
        ResponseCode.SUBSCRIPTION_NOT_EXIST,
        ResponseCode.SUBSCRIPTION_NOT_LATEST,
        ResponseCode.FILTER_DATA_NOT_EXIST,  # SQL92: the broker has not got (or lost) our filter
        ResponseCode.FILTER_DATA_NOT_LATEST,
    }
)
"""Pull answers meaning the broker does not (yet) know this consumer's group, subscription or
SQL92 filter: a heartbeat is sent at once."""

UNREACHABLE_BACKOFF_S = 5.0
"""Seconds a broker address whose connect failed is skipped by pulls (when its group has another node)."""


class PullKernelFields(TypedDict):
    """The keyword arguments of :meth:`PullAPIWrapper.pull_kernel_impl` /
    :meth:`PullAPIWrapper.build_pull_request` (``pullKernelImpl``'s parameters)."""

    sub_expression: str | None
    expression_type: str | None
    sub_version: int
    offset: int
    max_nums: int
    sys_flag: int
    commit_offset: int
    broker_suspend_max_time_millis: int
    suggest_which_broker_id: int
    """The node the queue's last answer suggested (0: the master; the kernel state keeps it)."""


class BrokerTable(Protocol):
    """What the wrapper needs of the client instance (``MQClientInstance``)."""

    @property
    def api(self) -> ClientAPI: ...

    @property
    def broker_addr_table(self) -> dict[str, dict[int, str]]: ...

    async def update_topic_route_info_from_name_server(self, topic: str | None = None) -> bool:
        """Refresh ``topic``'s route (broker addresses); True when it was fetched."""
        ...

    def heartbeat_soon(self) -> None:
        """Re-send this client's heartbeat to every broker soon (rate-limited by the instance)."""
        ...


def process_pull_result(
    mq: MessageQueue, result: PullResult, subscription: SubscriptionData | None
) -> PullResult:
    """Decode a FOUND body into ``result.msg_found_list`` (in place) and return ``result``.

    Messages whose tag is not in the subscription are dropped (the broker filters by tag hash
    only); the kept ones get the broker name and ``MIN_OFFSET`` / ``MAX_OFFSET`` properties.
    Mirrors the decoding half of ``PullAPIWrapper.processPullResult``.
    """
    if result.pull_status is PullStatus.FOUND and result.body:
        # the offsets as properties of each message (their text only: parsed at the first read)
        offsets = f"MIN_OFFSET\x01{result.min_offset}\x02MAX_OFFSET\x01{result.max_offset}"
        msgs = decode_messages(result.body, broker_name=mq.broker_name, extra_properties=offsets)
        if subscription is None or subscription.class_filter_mode or not subscription.tags_set:
            result.msg_found_list = msgs
        else:
            result.msg_found_list = [msg for msg in msgs if is_tag_matched(subscription, msg.tags)]
    result.body = b""
    return result


async def pull_messages(
    api: ClientAPI,
    addr: str,
    mq: MessageQueue,
    offset: int,
    max_nums: int,
    *,
    consumer_group: str,
    expression: str = "*",
    expression_type: str = "TAG",
    timeout: float = 10.0,
    suspend_timeout_millis: int = 0,
    decode: bool = False,
    subscription: SubscriptionData | None = None,
) -> PullResult:
    """One PULL_MESSAGE of ``mq`` from ``addr`` without a client instance (no offset commit, no
    long polling unless ``suspend_timeout_millis``). The body stays raw unless ``decode`` (then
    :func:`process_pull_result` with ``subscription``).

    Args:
        api: a :class:`ClientAPI` (its remoting client must run on the current loop).
        addr: broker address.
        mq: the queue.
        offset: first queue offset wanted.
        max_nums: at most this many messages.
        consumer_group: the group named in the request (statistics, ACL).
        expression / expression_type: subscription sent with the pull (``"*"``, ``TAG``).
        timeout: seconds for the request.

    Raises:
        BrokerError: the broker refused. RemotingError: transport failure.
    """
    result = await api.pull_message(
        addr,
        consumer_group=consumer_group,
        mq=mq,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=PullSysFlag.build_sys_flag(False, suspend_timeout_millis > 0, True, False),
        commit_offset=0,
        suspend_timeout_millis=suspend_timeout_millis,
        subscription=expression,
        sub_version=0,
        expression_type=expression_type,
        timeout=timeout,
    )
    return process_pull_result(mq, result, subscription) if decode else result


class PullAPIWrapper:
    """Broker choice + PULL_MESSAGE + result processing for one consumer group. Mirrors ``PullAPIWrapper``.

    Args:
        instance: the client instance (broker address table, ClientAPI, route refresh).
        consumer_group: the group.
        clock: seconds, monotonic (for the unreachable-address backoff; injectable for tests).
    """

    def __init__(
        self, instance: BrokerTable, consumer_group: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.clock = clock
        self.connect_broker_by_user = False
        self.default_broker_id = MASTER_ID
        self._unreachable: dict[str, float] = {}

    # -- which node ---------------------------------------------------------------------------

    def mark_unreachable(self, addr: str) -> None:
        """Skip ``addr`` for :data:`UNREACHABLE_BACKOFF_S` seconds (its connect failed)."""
        self._unreachable[addr] = self.clock() + UNREACHABLE_BACKOFF_S

    def is_unreachable(self, addr: str) -> bool:
        """True while ``addr`` is being skipped after a failed connect."""
        until = self._unreachable.get(addr)
        if until is None:
            return False
        if self.clock() >= until:
            self._unreachable.pop(addr, None)  # pop: the loop and a blocking committer may both look
            return False
        return True

    def find_broker(self, mq: MessageQueue, suggested: int = MASTER_ID) -> FindBrokerResult | None:
        """The node of ``mq``'s broker group to pull from (see the module docstring), or None:
        ``suggested`` (a broker id, 0 the master), or ``default_broker_id`` when
        ``connect_broker_by_user`` (``recalculatePullFromWhichNode``)."""
        addrs = self.instance.broker_addr_table.get(mq.broker_name)
        node = self.default_broker_id if self.connect_broker_by_user else suggested
        found = find_broker_in_subscribe(addrs, node)
        if found is None or not self._unreachable or not self.is_unreachable(found.broker_addr):
            return found
        assert addrs is not None
        for broker_id in sorted(addrs):
            addr = addrs[broker_id]
            if addr and not self.is_unreachable(addr):
                return FindBrokerResult(addr, broker_id != MASTER_ID, broker_id)
        return found

    # -- pulling -----------------------------------------------------------------------------

    async def pull_kernel_impl(
        self, mq: MessageQueue, *, timeout: float, **fields: Unpack[PullKernelFields]
    ) -> PullResult:
        """PULL_MESSAGE of ``mq`` from the chosen node of its broker group (:meth:`build_pull_request`;
        ``timeout`` in seconds). Mirrors ``pullKernelImpl``.

        The route is refreshed once when the group has no known address.

        Raises:
            ClientError: the broker group has no known address.
            RemotingConnectError: the connect failed (the address is then avoided for a while).
            BrokerError / RemotingError: from the request.
        """
        built = self.build_pull_request(mq, **fields)
        if built is None:
            await self.instance.update_topic_route_info_from_name_server(mq.topic)
            built = self.build_pull_request(mq, **fields)
        if built is None:
            raise ClientError(f"the broker[{mq.broker_name}] not exist")
        found, request = built
        try:
            return await self.instance.api.invoke_pull_message(
                found.broker_addr, request, fields["offset"], timeout
            )
        except BrokerError as exc:
            if exc.code in _GROUP_UNKNOWN_CODES:  # a restarted broker forgot us: re-register now
                self.instance.heartbeat_soon()
            raise
        except RemotingConnectError:
            addrs = self.instance.broker_addr_table.get(mq.broker_name) or {}
            if len(addrs) > 1:
                log.warning(
                    "pull of %s: %s (broker id %d) unreachable; pulling from another node of %s for %gs",
                    mq,
                    found.broker_addr,
                    found.broker_id,
                    mq.broker_name,
                    UNREACHABLE_BACKOFF_S,
                )
                self.mark_unreachable(found.broker_addr)
            raise

    def build_pull_request(
        self, mq: MessageQueue, **fields: Unpack[PullKernelFields]
    ) -> tuple[FindBrokerResult, RemotingCommand] | None:
        """The node to pull ``mq`` from and the PULL_MESSAGE request for it, or None when the broker
        group has no known address. When the node is a slave the commit-offset flag is cleared (a
        slave does not take offset commits). Any thread (a push consumer's queue lane writes the
        request itself)."""
        found = self.find_broker(mq, fields["suggest_which_broker_id"])
        if found is None:
            return None
        sys_flag = fields["sys_flag"]
        if found.slave:
            sys_flag &= ~PullSysFlag.FLAG_COMMIT_OFFSET
        request = self.instance.api.build_pull_message_request(
            consumer_group=self.consumer_group,
            mq=mq,
            queue_offset=fields["offset"],
            max_msg_nums=fields["max_nums"],
            sys_flag=sys_flag,
            commit_offset=fields["commit_offset"],
            suspend_timeout_millis=fields["broker_suspend_max_time_millis"],
            subscription=fields["sub_expression"],
            sub_version=fields["sub_version"],
            expression_type=fields["expression_type"],
        )
        return found, request
