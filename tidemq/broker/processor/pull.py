"""PULL_MESSAGE (11), with long polling. Mirrors RocketMQ's ``PullMessageProcessor`` (protocol.md §3.4).

Checks, in RocketMQ's order: broker readable (NO_PERMISSION), group config (auto-created unless
disabled: SUBSCRIPTION_GROUP_NOT_EXIST), group consume enabled (NO_PERMISSION), topic exists
(TOPIC_NOT_EXIST) and readable (NO_PERMISSION), ``0 <= queueId < readQueueNums`` (SYSTEM_ERROR); the
subscription comes from the request (FLAG_SUBSCRIPTION; SUBSCRIPTION_PARSE_FAILED) or from the group
registered by heartbeat (SUBSCRIPTION_NOT_EXIST / NO_PERMISSION for broadcast / SUBSCRIPTION_NOT_LATEST).

Store status -> response code (the store computes ``nextBeginOffset``; the remark is the status name):

==========================================  =========================  ===========================
status                                      code                       note
==========================================  =========================  ===========================
FOUND                                       SUCCESS (0)                body = stored records
NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING    PULL_RETRY_IMMEDIATELY     tag filter / deleted data
NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE PULL_OFFSET_MOVED (21)     PULL_NOT_FOUND if offset 0
OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY     PULL_OFFSET_MOVED
OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL      PULL_NOT_FOUND (19)        held when FLAG_SUSPEND
==========================================  =========================  ===========================

All four response header fields (``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset``,
``maxOffset``) are always present. On first processing with FLAG_COMMIT_OFFSET the piggy-backed
``commitOffset`` is stored whatever the pull's outcome; a re-executed held request neither suspends
nor commits.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tidemq.broker.longpolling import HeldPullRequest
from tidemq.broker.pull_suggest import pull_advice
from tidemq.protocol.body import EXPRESSION_TYPE_TAG, SubscriptionData
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.filter import SUB_ALL, build_subscription_data
from tidemq.protocol.headers import HeaderError, PullMessageRequestHeader, PullSysFlag, pull_response_fields
from tidemq.store.dispatcher import PutRecords, PutRun
from tidemq.store.results import GetMessageResult, GetMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.remoting import Channel


log = logging.getLogger(__name__)

FAQ = " See http://rocketmq.apache.org/docs/faq/ for further details."

_STATUS_CODE: dict[GetMessageStatus, int] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_response_code(status: GetMessageStatus, request_offset: int) -> int:
    """The response code for a store status (protocol.md §3.4 table)."""
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _STATUS_CODE.get(status, ResponseCode.SYSTEM_ERROR)


def _name(value: Any) -> str:
    return str(getattr(value, "value", getattr(value, "name", value)))


def tag_codes_of(subscription: SubscriptionData) -> frozenset[int] | None:
    """Tag hash codes a subscription accepts; None = every message (``*`` or not a TAG expression)."""
    if (
        subscription.class_filter_mode
        or (subscription.expression_type or EXPRESSION_TYPE_TAG) != EXPRESSION_TYPE_TAG
    ):
        return None
    if not subscription.sub_string or subscription.sub_string.strip() == SUB_ALL:
        return None
    return frozenset(subscription.code_set)


class PullMessageProcessor:
    """Serves PULL_MESSAGE. Mirrors RocketMQ's ``PullMessageProcessor``.

    Args:
        broker: the owning broker (config, managers, store, consumer manager, hold service).
    """

    CODES = (RequestCode.PULL_MESSAGE,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """First processing: may hold the request (returns None) and commits the piggy-backed offset."""
        return self.process(channel, request, broker_allow_suspend=True)

    def execute_request_when_wakeup(self, held: HeldPullRequest) -> RemotingCommand | None:
        """Re-run a held request (no suspend, no commit) and return its answer, which the hold
        service writes. Mirrors ``executeRequestWhenWakeup``."""
        return self.process(held.channel, held.request, broker_allow_suspend=False, header=held.header)

    def answer_from_put(self, held: HeldPullRequest, run: PutRun, put: PutRecords) -> RemotingCommand | None:
        """The answer to ``held``, waiting at exactly the first queue offset of ``run``, made from
        the put's records (``MessageStore.get_message_from_put``) after the same checks as a
        wake-up; None when the store cannot answer so or a check fails (the wake-up after the
        dispatch then answers, with the error if any)."""
        header = held.header
        if header is None:
            return None
        checked = self.check_and_subscription(header)
        if isinstance(checked, RemotingCommand):
            return None
        filters = self.broker.consumer_filter_manager
        if filters.record_filter_for(header, checked) is not None:  # SQL92 (consumer_filter.py)
            filters.hold_past_unmatched(held, header, checked, run)
            return None  # the wake-up after the dispatch filters
        codes = tag_codes_of(checked)  # the subscription as of now, as a wake-up would read it
        result = self.broker.store.get_message_from_put(put, run, header.max_msg_nums, codes)
        if result is None:
            return None
        return self._answer(held.channel, held.request, header, codes, result, False)

    # -- decision logic ------------------------------------------------------------------------

    def check_and_subscription(self, header: PullMessageRequestHeader) -> RemotingCommand | SubscriptionData:
        """Permission, group, topic, queue and subscription checks; the subscription or an error."""
        broker = self.broker
        if not broker.config.is_readable:
            return _error(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.addr}] pulling message is forbidden"
            )
        group = header.consumer_group
        sgc = broker.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return _error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist,{FAQ}",
            )
        if not sgc.consume_enable:
            return _error(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic = header.topic
        tc = broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return _error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ}")
        if not tc.perm & 4:
            return _error(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if header.queue_id < 0 or header.queue_id >= tc.read_queue_nums:
            return _error(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{group}]",
            )
        sub = self._subscription(header, sgc.consume_broadcast_enable)
        if isinstance(sub, RemotingCommand):
            return sub
        if (sub.expression_type or EXPRESSION_TYPE_TAG) != EXPRESSION_TYPE_TAG:  # SQL92 (consumer_filter.py)
            has_sub = PullSysFlag.has_subscription_flag(header.sys_flag)
            problem = broker.consumer_filter_manager.check_pull(header, sub, from_request=has_sub)
            if problem is not None:
                return _error(*problem)
        return sub

    def _subscription(
        self, header: PullMessageRequestHeader, broadcast_enable: bool
    ) -> RemotingCommand | SubscriptionData:
        """The subscription the pull reads with: the request's own (FLAG_SUBSCRIPTION), else the one
        its consumer registered by heartbeat (not older than the request's ``sub_version``; a
        BROADCASTING group only when ``broadcast_enable``); or the error response."""
        topic, group = header.topic, header.consumer_group
        if PullSysFlag.has_subscription_flag(header.sys_flag):
            try:
                return build_subscription_data(
                    topic,
                    header.subscription,
                    expression_type=header.expression_type or EXPRESSION_TYPE_TAG,
                    sub_version=header.sub_version,
                )
            except Exception as exc:
                return _error(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
                )
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return _error(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ}")
        if not broadcast_enable and _name(info.message_model) == "BROADCASTING":
            return _error(
                ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
            )
        found = info.find_subscription_data(topic)
        if found is None:
            return _error(ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ}")
        if int(found.sub_version) < header.sub_version:
            return _error(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest: {found.sub_version} < {header.sub_version}",
            )
        return found

    def process(
        self,
        channel: Channel,
        request: RemotingCommand,
        *,
        broker_allow_suspend: bool,
        header: PullMessageRequestHeader | None = None,
    ) -> RemotingCommand | None:
        """The whole pull (``processRequest(channel, request, brokerAllowSuspend)``); ``header`` is
        the request's, parsed already (a held request's), or None to parse it.

        Returns the response, or None when the request was parked for long polling.
        """
        if header is None:
            try:
                header = PullMessageRequestHeader.from_command(request)
            except HeaderError as exc:
                return _error(ResponseCode.SYSTEM_ERROR, f"bad pull request header: {exc}")
        checked = self.check_and_subscription(header)
        if isinstance(checked, RemotingCommand):
            response: RemotingCommand | None = checked
        else:
            response = self._read(channel, request, header, checked, broker_allow_suspend)
        if (
            broker_allow_suspend
            and PullSysFlag.has_commit_offset_flag(header.sys_flag)
            and not self.broker.config.is_slave  # a slave takes no offset commits from pulls
        ):
            self.broker.consumer_offset_manager.commit_offset(
                channel.remote_addr,
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.commit_offset,
            )
        return response

    def _read(
        self,
        channel: Channel,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        sub: SubscriptionData,
        broker_allow_suspend: bool,
    ) -> RemotingCommand | None:
        codes = tag_codes_of(sub)
        result: GetMessageResult = self.broker.store.get_message(
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.queue_offset,
            header.max_msg_nums,
            set(codes) if codes is not None else None,
            self.broker.consumer_filter_manager.record_filter_for(header, sub),  # SQL92, else None
        )
        return self._answer(channel, request, header, codes, result, broker_allow_suspend)

    def _answer(
        self,
        channel: Channel,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        result: GetMessageResult,
        broker_allow_suspend: bool,
    ) -> RemotingCommand | None:
        """The response for ``result`` (None: parked for long polling)."""
        code, next_begin, suggest = pull_advice(  # slave / suggestWhichBrokerId rules (HA)
            self.broker,
            header.consumer_group,
            header.queue_offset,
            result,
            pull_response_code(result.status, header.queue_offset),
        )
        if code == ResponseCode.SUCCESS:
            # statistics: one O(1) call per request
            self.broker.broker_stats.inc_get(
                header.consumer_group, header.topic, result.message_count, result.buffer_total_size
            )
            body = result.body()
            fields = pull_response_fields(suggest, next_begin, result.min_offset, result.max_offset)
            return RemotingCommand.create_response(code, result.status.value, fields, body)
        if (
            code == ResponseCode.PULL_NOT_FOUND
            and broker_allow_suspend
            and PullSysFlag.has_suspend_flag(header.sys_flag)
        ):
            self._suspend(channel, request, header, codes)
            return None
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.info(
                "the request offset %d moved for %s@%s queue %d: %s, next %d (min %d, max %d)",
                header.queue_offset,
                header.topic,
                header.consumer_group,
                header.queue_id,
                result.status.value,
                result.next_begin_offset,
                result.min_offset,
                result.max_offset,
            )
        fields = pull_response_fields(suggest, next_begin, result.min_offset, result.max_offset)
        return RemotingCommand.create_response(code, result.status.value, fields)

    def _suspend(
        self,
        channel: Channel,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
    ) -> None:
        """Park the pull (nothing found yet) in the hold service: for the request's suspend time
        (at most ``max_suspend_ms``) with long polling, else ``short_polling_time_mills``."""
        cfg = self.broker.config
        if cfg.long_polling_enable:
            hold_ms = min(max(header.suspend_timeout_millis, 0), cfg.max_suspend_ms)
        else:
            hold_ms = cfg.short_polling_time_mills
        held = HeldPullRequest(
            channel=channel,
            request=request,
            topic=header.topic,
            queue_id=header.queue_id,
            pull_from_this_offset=header.queue_offset,
            tag_codes=codes,
            timeout_s=hold_ms / 1000.0,
            header=header,
        )
        self.broker.pull_request_hold_service.suspend_pull_request(header.topic, header.queue_id, held)


def _error(code: int, remark: str) -> RemotingCommand:
    """An error response: the four pull header fields are present (zeros) for every status."""
    return RemotingCommand.create_response(code, remark, pull_response_fields(0, 0, 0, 0))
