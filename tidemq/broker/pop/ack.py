"""Acks and invisible-time changes of popped messages: the ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME half of :class:`~tidemq.broker.pop.service.PopService` (which documents
them). Mirrors RocketMQ 5's ``AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor``: an ack is an
``ack`` record in the revive log (an order ack goes to :mod:`tidemq.broker.pop.order`); a change
writes a new check-point for the message, then acks the old one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemq.broker.pop.extra_info import (
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfo,
    ExtraInfoError,
    build_extra_info,
    parse_extra_info,
    real_topic,
)
from tidemq.broker.pop.records import TAG_ACK, TAG_BATCH_ACK, TAG_CK, AckRecord, CheckPoint
from tidemq.broker.pop.result import PopError
from tidemq.clock import now_ms
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from tidemq.broker.pop.service import PopService


class PopAcks:
    """Acks and invisible-time changes for one :class:`PopService`."""

    def __init__(self, service: PopService) -> None:
        self.service = service

    def parse(self, group: str, topic: str, extra_info: str, offset: int | None) -> tuple[ExtraInfo, str]:
        """The parsed handle and the topic its queue and offset are in, after checking that the
        offset lies in that queue. ``topic`` may be that topic already (a pop retry topic, as
        RocketMQ 5's clients and proxy send it: ``ExtraInfoUtil.getRealTopic``) or the popped topic
        (the retry topic then comes from the handle's retry flag).

        Raises:
            PopError: SYSTEM_BUSY, NO_PERMISSION (a slave), INVALID_PARAMETER, TOPIC_NOT_EXIST, NO_MESSAGE.
        """
        self.service.check_started()
        broker = self.service.broker
        if broker.config.is_slave:  # the revive log is the master's: a slave only copies it
            raise PopError(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.addr}] is a slave, ack on the master"
            )
        try:
            info = parse_extra_info(extra_info, offset)
        except ExtraInfoError as exc:
            raise PopError(ResponseCode.INVALID_PARAMETER, str(exc)) from exc
        try:  # RocketMQ's clients and proxy name the real topic; tidemq's older calls the popped one
            ck_topic = (
                topic if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else real_topic(topic, group, info.retry)
            )
        except ExtraInfoError as exc:
            raise PopError(ResponseCode.INVALID_PARAMETER, str(exc)) from exc
        if self.service.broker.topic_config_manager.select_topic_config(ck_topic) is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{ck_topic}] not exist")
        store = self.service.broker.store
        low = store.get_min_offset_in_queue(ck_topic, info.queue_id)
        high = store.get_max_offset_in_queue(ck_topic, info.queue_id)
        if not low <= info.queue_offset < high:
            raise PopError(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{ck_topic}@{info.queue_id}, commit:{info.queue_offset}, store:{low},{high}",
            )
        return info, ck_topic

    def ack(self, group: str, topic: str, extra_info: str, offset: int | None = None) -> None:
        """See :meth:`PopService.ack`."""
        info, ck_topic = self.parse(group, topic, extra_info, offset)
        if info.is_order:
            self.service.order.ack(group, ck_topic, info)
        else:
            self._put_ack(group, ck_topic, info)
        self.service.stats.on_ack(group, self.service.revive.pop_topic_of(group, topic), 1)

    def _put_ack(self, group: str, ck_topic: str, info: ExtraInfo) -> None:
        """Write the ack of the one message ``info`` names to its check-point's revive queue.

        Raises:
            PopError: SYSTEM_ERROR when the store refuses the put.
        """
        record = AckRecord(
            group,
            ck_topic,
            info.queue_id,
            info.ck_queue_offset,
            info.pop_time,
            [info.queue_offset],
            info.broker_name,
        )
        self.service.put_revive_record(info.revive_qid, TAG_ACK, record.encode())

    def batch_ack(
        self,
        group: str,
        topic: str,
        retry: str,
        queue_id: int,
        start_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        offsets: list[int],
    ) -> None:
        """See :meth:`PopService.batch_ack`."""
        for off in offsets:
            extra = f"{start_offset} {pop_time} {invisible_time} {revive_qid} {retry} {self.service.broker.config.broker_name} {queue_id} {off}"
            info, ck_topic = self.parse(group, topic, extra, None)
            if info.is_order:
                self.service.order.ack(group, ck_topic, info)
        if revive_qid != POP_ORDER_REVIVE_QUEUE and offsets:
            ck_topic = real_topic(topic, group, retry)
            record = AckRecord(
                group,
                ck_topic,
                queue_id,
                start_offset,
                pop_time,
                sorted(offsets),
                self.service.broker.config.broker_name,
            )
            self.service.put_revive_record(
                revive_qid, TAG_BATCH_ACK if len(offsets) > 1 else TAG_ACK, record.encode()
            )
        self.service.stats.on_ack(group, topic, len(offsets))

    def change_invisible_time(
        self, group: str, topic: str, extra_info: str, invisible_ms: int, offset: int | None = None
    ) -> str:
        """See :meth:`PopService.change_invisible_time`."""
        if invisible_ms <= 0:
            raise PopError(
                ResponseCode.INVALID_PARAMETER, f"invisible time must be > 0 ms, got {invisible_ms}"
            )
        info, ck_topic = self.parse(group, topic, extra_info, offset)
        now = now_ms()
        if info.visible_at <= now:
            raise PopError(ResponseCode.NO_MESSAGE, "receipt handle is expired", expired=True)
        if info.is_order:
            return self.service.order.change_invisible_time(group, ck_topic, info, now, invisible_ms)
        revive_qid = self.service.next_revive_queue_id()
        now = max(now, info.pop_time + 1)  # the new check-point's key differs from the old one's
        ck = CheckPoint(
            info.queue_offset,
            now,
            invisible_ms,
            info.queue_id,
            ck_topic,
            group,
            [0],
            revive_qid,
            info.queue_offset + 1,
            broker_name=info.broker_name,
        )
        self.service.put_revive_record(revive_qid, TAG_CK, ck.encode())
        self.service.revive.note_check_point(ck)
        self._put_ack(group, ck_topic, info)
        return build_extra_info(
            info.queue_offset,
            now,
            invisible_ms,
            revive_qid,
            ck_topic,
            info.broker_name,
            info.queue_id,
            info.queue_offset,
        )
