"""Transactional messages over gRPC: EndTransaction and orphaned-transaction checks on Telemetry.

Mirrors RocketMQ 5's ``EndTransactionActivity``, ``TransactionProcessor`` / ``TransactionDataManager``
and ``GrpcClientChannel.processCheckTransaction`` (rocketmq5.md §6):

* a TRANSACTION send goes to the broker as a half message (``TRAN_MSG``, ``PGROUP`` = the topic);
  its transaction id is the message id, and the proxy remembers where the half message is
  (broker, half queue offset, commit-log offset) for EndTransaction;
* each v5 producer is registered with the broker (HEART_BEAT, :mod:`tidemq.proxy.members`) as a
  producer of group = each topic it publishes, so the broker's CHECK_TRANSACTION_STATE for a half message of that topic reaches
  the proxy, which pushes ``RecoverOrphanedTransactionCommand{message, transaction_id}`` on the
  Telemetry stream of a producer publishing the topic; the client's checker answers with
  EndTransaction ``source: SOURCE_SERVER_CHECK``;
* EndTransaction of an id the proxy does not know (a restart, another proxy) answers
  INVALID_TRANSACTION_ID.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemq.errors import ProtocolError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from tidemq.protocol.message_codec import decode_message, decode_offset_msg_id
from tidemq.proxy import codes
from tidemq.proxy.convert import to_v5
from tidemq.proxy.names import resource_name
from tidemq.proxy.pb import s

if TYPE_CHECKING:
    from tidemq.proxy.backend import Backend
    from tidemq.proxy.context import RequestContext
    from tidemq.proxy.convert import SendItem
    from tidemq.proxy.producer import SentMessage
    from tidemq.proxy.service import MessagingService

log = logging.getLogger(__name__)

COMMIT, ROLLBACK = 1, 2  # TransactionResolution
SOURCE_SERVER_CHECK = 2  # TransactionSource
COMMIT_TYPE, ROLLBACK_TYPE = 8, 12  # MessageSysFlag.TRANSACTION_COMMIT_TYPE / _ROLLBACK_TYPE
MAX_PENDING = 100_000
"""Transactions remembered for EndTransaction (oldest forgotten first; a check re-teaches one)."""


@dataclass(slots=True, frozen=True)
class HalfMessage:
    """Where a half message is: what END_TRANSACTION names."""

    broker_name: str
    tran_state_table_offset: int
    commit_log_offset: int


class TransactionActivity:
    """EndTransaction and the checks for both backends.

    Args:
        backend: the broker(s).
        service: the servicer (its client registry finds the producers to check).
    """

    def __init__(self, backend: Backend, service: MessagingService) -> None:
        self.backend = backend
        self.service = service
        self.pending: OrderedDict[tuple[str, str], HalfMessage] = OrderedDict()

    def remember(self, topic: str, transaction_id: str, half: HalfMessage) -> None:
        """Keep ``half`` for the EndTransaction of ``(topic, transaction_id)``; the oldest beyond
        ``MAX_PENDING`` are forgotten."""
        self.pending[(topic, transaction_id)] = half
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)

    def on_sent(self, ctx: RequestContext, item: SendItem, sent: SentMessage) -> None:
        """After each accepted send: a half message's place is kept for EndTransaction."""
        if item.message_type != 4 or not sent.offset_msg_id:
            return
        try:
            _, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id)
        except ProtocolError:
            log.warning("transactional send answered a msgId that is no offset id: %s", sent.offset_msg_id)
            return
        self.remember(
            item.topic,
            sent.transaction_id,
            HalfMessage(sent.broker_name, sent.queue_offset, commit_log_offset),
        )

    async def end_transaction(self, request: Any, ctx: RequestContext) -> Any:
        """END_TRANSACTION to the broker holding the half message.

        Raises:
            ProxyError: INVALID_TRANSACTION_ID (empty or unknown id), BAD_REQUEST (no resolution),
                or the broker's refusal.
        """
        topic = resource_name(request.topic, ctx.namespace)
        if not request.transaction_id:
            raise codes.ProxyError(codes.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        if request.resolution not in (COMMIT, ROLLBACK):
            raise codes.ProxyError(codes.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        half = self.pending.get((topic, request.transaction_id))
        if half is None:
            raise codes.ProxyError(
                codes.INVALID_TRANSACTION_ID, f"cannot found transaction data for {request.transaction_id}"
            )
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=half.tran_state_table_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=COMMIT_TYPE if request.resolution == COMMIT else ROLLBACK_TYPE,
            from_transaction_check=request.source == SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        command = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        if self.service.auth is not None:  # the broker checks PUB on the topic itself
            self.service.auth.sign_as_caller(ctx.metadata, command)
        response = await self.backend.invoke(half.broker_name, command, 3.0, ctx.client_id, ctx.remote_addr)
        if response.code != ResponseCode.SUCCESS:
            raise codes.ProxyError(
                codes.code_of_remoting(response.code), response.remark or "end transaction failed"
            )
        self.pending.pop((topic, request.transaction_id), None)
        return s.EndTransactionResponse(status=codes.status())

    def on_check(self, broker_name: str, request: RemotingCommand) -> None:
        """A broker's CHECK_TRANSACTION_STATE: push the check to a producer of the message's topic."""
        if request.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        try:
            header = CheckTransactionStateRequestHeader.from_command(request)
            msg = decode_message(request.body or b"")[0]
        except (ProtocolError, ValueError, IndexError) as exc:
            log.warning("cannot read a transaction check from %s: %s", broker_name, exc)
            return
        transaction_id = header.transaction_id or header.msg_id or msg.msg_id
        self.remember(
            msg.topic,
            transaction_id,
            HalfMessage(broker_name, header.tran_state_table_offset, header.commit_log_offset),
        )
        producers = self.service.clients.producers_of(msg.topic)
        if not producers:
            log.debug("no v5 producer of %s to check transaction %s", msg.topic, transaction_id)
            return
        target = producers[int(time.monotonic_ns()) % len(producers)]
        command = s.RecoverOrphanedTransactionCommand(
            message=to_v5(msg, target.namespace), transaction_id=transaction_id
        )
        target.outbox.put_nowait(s.TelemetryCommand(recover_orphaned_transaction_command=command))
