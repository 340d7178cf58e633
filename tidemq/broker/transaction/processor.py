"""END_TRANSACTION (37) and the half-message branch of SEND_MESSAGE.

Mirrors RocketMQ 4.9's ``EndTransactionProcessor`` and the ``TRAN_MSG`` branch of
``SendMessageProcessor`` (transactions.md §1.2, §1.3).

END_TRANSACTION, in order:

1. a slave answers SLAVE_NOT_AVAILABLE;
2. ``commitOrRollback`` 0 (UNKNOW): no answer, nothing changes; a value other than 0, 8, 12 is
   SYSTEM_ERROR;
3. the half record at ``commitLogOffset`` must exist on the half topic and match ``producerGroup``
   (``PGROUP``), ``tranStateTableOffset`` and ``commitLogOffset``, else SYSTEM_ERROR with Java's
   remark;
4. with ACL, the caller needs PUB on the real topic;
5. commit puts the real message and the op record, rollback the op record
   (:meth:`TransactionalMessageService.end`); an END for a transaction no longer pending writes
   nothing and answers from its recorded fate (:meth:`TransactionalMessageService.late_end`):
   a COMMIT of a committed one SUCCESS (idempotent, across restarts too), of a rolled-back or
   discarded one SYSTEM_ERROR ``Find prepared transaction message failed: ...`` (RocketMQ's remark
   for a half it cannot find, then what happened); a ROLLBACK SUCCESS.

Header values may be JSON strings (C++ 2.x sends ``"272"``, ``fromTransactionCheck:"1"``) or
numbers: :class:`EndTransactionRequestHeader` takes both. The answer follows the request's oneway
flag (C++ 2.x sends flag 0 and drops the reply; Java sets the oneway bit and gets none).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

from tidemq.broker.transaction.bridge import half_batch
from tidemq.errors import ProtocolError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import EndTransactionRequestHeader, HeaderError, SendMessageRequestHeader
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import MessageSysFlag

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker
    from tidemq.broker.processor.send import SendMessageProcessor
    from tidemq.remoting import Channel

__all__ = ["EndTransactionProcessor", "send_half_message"]

log = logging.getLogger(__name__)

_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_UNKNOW = MessageSysFlag.TRANSACTION_NOT_TYPE


def _answer(request: RemotingCommand, code: int, remark: str | None = None) -> RemotingCommand | None:
    if request.is_oneway:
        if code != ResponseCode.SUCCESS:
            log.info("END_TRANSACTION refused (oneway, no answer): %d %s", code, remark)
        return None
    return RemotingCommand.create_response(code, remark)


class EndTransactionProcessor:
    """END_TRANSACTION (37). Mirrors ``EndTransactionProcessor``.

    Args:
        broker: the owning broker; its ``transaction_service`` does the work.
    """

    CODES: ClassVar[tuple[int, ...]] = (RequestCode.END_TRANSACTION,)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Decide one transaction; the response (None for oneway requests and UNKNOW)."""
        broker = self.broker
        if broker.config.is_slave:
            return _answer(request, ResponseCode.SLAVE_NOT_AVAILABLE, "Slave broker can not end transaction")
        try:
            header = EndTransactionRequestHeader.from_command(request)
        except HeaderError as exc:
            return _answer(request, ResponseCode.SYSTEM_ERROR, f"bad END_TRANSACTION header: {exc}")
        kind = header.commit_or_rollback
        if kind == _UNKNOW:
            return None
        if kind not in (_COMMIT, _ROLLBACK):
            return _answer(
                request, ResponseCode.SYSTEM_ERROR, f"commitOrRollback must be 0, 8 or 12, got {kind}"
            )
        service = broker.transaction_service
        if service is None:
            return _answer(request, ResponseCode.SYSTEM_ERROR, "transactions are not available")
        half = service.find_half(
            header.commit_log_offset, header.tran_state_table_offset, header.producer_group
        )
        if isinstance(half, str):
            log.info(
                "END_TRANSACTION from %s refused: %s (commitLogOffset %d, tranStateTableOffset %d, group %r)",
                channel.remote_addr,
                half,
                header.commit_log_offset,
                header.tran_state_table_offset,
                header.producer_group,
            )
            return _answer(request, ResponseCode.SYSTEM_ERROR, half)
        self._check_acl(channel, request, half.get_property(MessageConst.PROPERTY_REAL_TOPIC) or "")
        try:
            result = service.end(half, kind == _COMMIT)
        except ProtocolError as exc:  # a TIDEMQ_BATCH_BODY half whose body is not a batch body
            return _answer(request, ResponseCode.SYSTEM_ERROR, f"END_TRANSACTION refused: {exc}")
        if result is None:
            return _answer(request, ResponseCode.SUCCESS)
        if isinstance(result, str):  # a late COMMIT of a rolled-back or discarded transaction
            return _answer(request, ResponseCode.SYSTEM_ERROR, result)
        append = result.append_result
        if append is None or result.status.value != "PUT_OK":
            remark = f"END_TRANSACTION put failed: {result.status.value} {result.remark or ''}".strip()
            return _answer(request, ResponseCode.SYSTEM_ERROR, remark)
        if not request.is_oneway and not await broker.wait_for_flush(
            append.wrote_offset + append.wrote_bytes
        ):
            return _answer(request, ResponseCode.FLUSH_DISK_TIMEOUT)
        return _answer(request, ResponseCode.SUCCESS)

    def _check_acl(self, channel: Channel, request: RemotingCommand, topic: str) -> None:
        """With ACL on, PUB on the real topic is needed (raises ``AclError``: SYSTEM_ERROR)."""
        if not self.broker.config.acl_enable:
            return
        from tidemq.acl.common import Permission
        from tidemq.acl.plain import PlainAccessResource, PlainAccessValidator

        for hook in self.broker.remoting_server.rpc_hooks:
            if isinstance(hook, PlainAccessValidator):
                resource = PlainAccessResource.parse(request, channel.remote_addr)
                resource.add_resource_and_perm(topic, Permission.PUB)
                hook.validate(resource)


async def send_half_message(
    processor: SendMessageProcessor,
    remote_addr: str,
    header: SendMessageRequestHeader,
    body: bytes,
    queue_id: int,
    props: dict[str, str],
    text: str,
    wait: bool,
    ext: dict[str, str],
) -> RemotingCommand:
    """Store a half message (``TRAN_MSG=true``): ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with
    ``REAL_TOPIC`` / ``REAL_QID``; the answer carries the half record's offset msgId and half queue
    offset (what C++ 2.x decodes ``commitLogOffset`` from). NO_PERMISSION when
    ``reject_transaction_message`` is set."""
    broker = processor.broker
    service = broker.transaction_service
    if broker.config.reject_transaction_message or service is None:
        return RemotingCommand.create_response(
            ResponseCode.NO_PERMISSION,
            f"the broker[{broker.addr}] sending transaction message is forbidden",
            ext,
        )
    batch = half_batch(
        topic=header.topic,
        queue_id=queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=remote_addr,
        reconsume_times=header.reconsume_times or 0,
        flag=header.flag,
        body=body,
        properties_text=text,
    )
    problem = processor.size_error(len(body), len(batch.properties[0].encode()))
    if problem is not None:
        problem.ext_fields.update(ext)
        return problem
    result = service.put_half(batch, props.get(MessageConst.PROPERTY_PRODUCER_GROUP, ""), header.topic)
    return await processor.handle_put_result(result, queue_id, wait, ext)
