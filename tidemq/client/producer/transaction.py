"""Transactional producers: a message and a local transaction (a database write...) as one unit.

Mirrors RocketMQ's ``TransactionMQProducer`` / ``TransactionListener`` / ``LocalTransactionState``
/ ``TransactionSendResult`` (transactions.md §1; docs/transactions.md).

How one transaction goes (:meth:`AsyncTransactionProducer.send_message_in_transaction`):

1. the message is sent as a *half message* (``TRAN_MSG=true``, ``PGROUP`` = the producer group):
   the broker stores it but no consumer sees it;
2. ``listener.execute_local_transaction(msg, arg)`` runs the local transaction and returns a
   :class:`LocalTransactionState`;
3. END_TRANSACTION (oneway) tells the broker: COMMIT_MESSAGE delivers the message,
   ROLLBACK_MESSAGE drops it, UNKNOW leaves it to the broker's check.

If the producer dies (or answers UNKNOW) the broker asks the producer group later
(CHECK_TRANSACTION_STATE): ``listener.check_local_transaction(msg)`` runs on the producer's check
thread pool and its answer is sent back with ``fromTransactionCheck=true``. So the check must look
at durable local state (e.g. "is the order row with this transaction id in the database?").

A listener that raises counts as UNKNOW (logged), never as COMMIT; a half send the broker stored
without the promised durability (FLUSH_DISK_TIMEOUT...) is rolled back without running the local
transaction, as Java does. A ``DELAY`` level is removed (RocketMQ 4.x does not delay transactional
messages). The same producer works against an Apache RocketMQ 4.9 broker (same wire).

Example (blocking)::

    class Orders(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            db.execute("INSERT INTO orders VALUES (?, ?)", (msg.transaction_id, arg)); db.commit()
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg):
            row = db.execute("SELECT 1 FROM orders WHERE id = ?", (msg.transaction_id,)).fetchone()
            return LocalTransactionState.COMMIT_MESSAGE if row else LocalTransactionState.ROLLBACK_MESSAGE

    producer = TransactionProducer(Orders(), namesrv_addr=addr, producer_group="orders")
    producer.start()
    result = producer.send_message_in_transaction(Message("Orders", b"order 42"), arg=42)
    print(result.local_transaction_state)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
from dataclasses import dataclass
from typing import Any

from tidemq.client.config import ProducerConfig
from tidemq.client.direct import DirectPool
from tidemq.client.facade import BlockingFacade
from tidemq.client.producer.producer import AsyncProducer, Producer
from tidemq.errors import ClientError
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from tidemq.protocol.message import Message, MessageConst, MessageExt, SendResult
from tidemq.protocol.message_codec import MessageSysFlag, decode_offset_msg_id

__all__ = [
    "AsyncTransactionProducer",
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]

log = logging.getLogger(__name__)

_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_PGROUP = MessageConst.PROPERTY_PRODUCER_GROUP
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
TRANSACTION_ID = "__transactionId__"
"""Property the Java client copies the transaction id into (client-local, never relied on here)."""


class LocalTransactionState(enum.Enum):
    """The outcome of a local transaction. Mirrors ``LocalTransactionState``."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION ``commitOrRollback`` value: 8, 12 or 0."""
        return _WIRE[self]


_WIRE = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE,
}


class TransactionListener:
    """What the application implements. Mirrors ``TransactionListener``.

    Both methods may be plain functions or (for :class:`AsyncTransactionProducer`) coroutine
    functions. Returning None or raising counts as UNKNOW.
    """

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Run the local transaction for ``msg`` (its half message is stored, not delivered).
        ``msg.properties["UNIQ_KEY"]`` (also :attr:`TransactionSendResult.transaction_id`) is the
        transaction id a later check sees: store it with the local transaction."""
        raise NotImplementedError

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        """The broker asks what became of the transaction of ``msg`` (after the producer answered
        UNKNOW or died before answering). Answer from durable local state; UNKNOW = ask again later."""
        raise NotImplementedError


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """A :class:`SendResult` of the half message plus the local transaction's outcome. Mirrors
    ``TransactionSendResult``; ``transaction_id`` is the message's ``UNIQ_KEY``."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def _state(value: Any, what: str) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    if value is not None:
        log.warning("%s returned %r, not a LocalTransactionState: treated as UNKNOW", what, value)
    return LocalTransactionState.UNKNOW


class AsyncTransactionProducer(AsyncProducer):
    """An asyncio transactional producer. Mirrors ``TransactionMQProducer``.

    Args:
        transaction_listener: the application's :class:`TransactionListener`.
        config: a :class:`ProducerConfig`; keyword ``overrides`` replace its fields.
        check_thread_pool_size: threads that run ``check_local_transaction`` (Java's
            ``checkThreadPoolMaxSize``, 1). Coroutine listeners run on the event loop instead.

    Plain (non-coroutine) ``execute_local_transaction`` runs in a worker thread so the loop stays
    free; the blocking :class:`TransactionProducer` runs it on the caller's thread.
    """

    def __init__(
        self,
        transaction_listener: TransactionListener,
        config: ProducerConfig | None = None,
        *,
        check_thread_pool_size: int = 1,
        **overrides: Any,
    ) -> None:
        super().__init__(config, **overrides)
        if transaction_listener is None:
            raise ClientError("a transaction_listener is required")
        self.transaction_listener = transaction_listener
        self.check_thread_pool_size = max(1, check_thread_pool_size)
        self._check_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._check_tasks: set[asyncio.Future[None]] = set()
        self._announced: set[str] = set()
        """Brokers this producer heartbeated to since a half message first went there."""

    async def start(self) -> None:
        """Start the producer and its check thread pool."""
        if self._check_executor is None:
            self._check_executor = concurrent.futures.ThreadPoolExecutor(
                self.check_thread_pool_size, thread_name_prefix=f"tidemq-tx-check-{self.group_name}"
            )
        await super().start()

    async def shutdown(self) -> None:
        """Unregister (no more checks come), then stop the check pool after its running checks."""
        await super().shutdown()
        executor, self._check_executor = self._check_executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, executor.shutdown)

    # -- one transaction -------------------------------------------------------------------------

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it. See the module doc.

        Raises:
            ClientError: invalid message, or the producer is not started.
            NoRouteError / BrokerError / RemotingTimeoutError: the half message was not stored (the
                local transaction did not run).
        """
        result = await self.send_half_message(msg)
        state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        if result.send_status == "SEND_OK":
            state, error = await self._execute(msg, arg)
        await self.end_transaction(result, state, error)
        return self.transaction_result(result, state)

    async def send_half_message(self, msg: Message) -> SendResult:
        """Step 1: the half message (``TRAN_MSG=true``, ``PGROUP``; ``DELAY`` removed). Errors as
        :meth:`send`."""
        prepare_half(msg, self.group_name)
        result = await self.send(msg)
        self.announce(result)
        return result

    def announced(self, broker_name: str) -> bool:
        """Whether :meth:`announce` has heartbeated for a half sent to ``broker_name`` already."""
        return broker_name in self._announced

    def announce(self, result: SendResult) -> None:
        """After the first half message to a broker, heartbeat at once (in the background) so the
        broker can check this producer group without waiting for the 30 s heartbeat timer."""
        name = result.message_queue.broker_name
        if name not in self._announced:
            self._announced.add(name)
            task = asyncio.ensure_future(self.instance.send_heartbeat_to_all_brokers())
            self._check_tasks.add(task)
            task.add_done_callback(self._check_tasks.discard)

    async def _execute(self, msg: Message, arg: Any) -> tuple[LocalTransactionState, BaseException | None]:
        method = self.transaction_listener.execute_local_transaction
        try:
            if inspect.iscoroutinefunction(method):
                value = await method(msg, arg)
            else:
                value = await asyncio.get_running_loop().run_in_executor(None, method, msg, arg)
        except Exception as exc:
            log.warning("execute_local_transaction of %s raised; UNKNOW: %r", msg.unique_key, exc)
            return LocalTransactionState.UNKNOW, exc
        return _state(value, "execute_local_transaction"), None

    async def end_transaction(
        self, result: SendResult, state: LocalTransactionState, error: BaseException | None = None
    ) -> None:
        """Step 3: END_TRANSACTION (oneway) for the half message of ``result``. A failure to send it
        is logged, not raised: the broker's check decides then. Mirrors ``endTransaction``."""
        try:
            addr = await self.broker_addr(result.message_queue)
            await self.instance.remoting.invoke_oneway(addr, self.end_request(result, state, error))
            if self.trace_hook is not None:  # message trace: the EndTransaction record
                msg = Message(result.message_queue.topic, b"")
                self.trace_hook.ended(msg, result.msg_id, addr, state.value, result.msg_id, False)
        except Exception as exc:
            log.warning(
                "END_TRANSACTION %s of %s not sent (%s); the broker will check",
                state.value,
                result.msg_id,
                exc,
            )

    def end_request(
        self, result: SendResult, state: LocalTransactionState, error: BaseException | None = None
    ) -> RemotingCommand:
        """The END_TRANSACTION (37, oneway) request for the half message of ``result``."""
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group_name,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=False,
            msg_id=result.msg_id,
            transaction_id=result.msg_id,
        )
        remark = f"executeLocalTransactionBranch exception: {error!r}" if error is not None else None
        return _oneway(header, remark)

    @staticmethod
    def transaction_result(result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
        """``result`` with the local transaction's outcome (``transaction_id`` = ``UNIQ_KEY``)."""
        return TransactionSendResult(
            send_status=result.send_status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue,
            queue_offset=result.queue_offset,
            region_id=result.region_id,
            trace_on=result.trace_on,
            transaction_id=result.msg_id,
            extra=result.extra,
            local_transaction_state=state,
        )

    # -- checks from the broker ------------------------------------------------------------------

    def check_transaction_state(
        self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """CHECK_TRANSACTION_STATE from the broker at ``addr`` (called on the loop by the client
        instance): ``check_local_transaction`` runs on the check pool (or the loop for a coroutine)
        and its answer goes back with ``fromTransactionCheck=true``. Mirrors ``checkTransactionState``."""
        task = asyncio.ensure_future(self._check(addr, msg, header))
        self._check_tasks.add(task)
        task.add_done_callback(self._check_tasks.discard)

    async def _check(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        method = self.transaction_listener.check_local_transaction
        try:
            if inspect.iscoroutinefunction(method):
                value = await method(msg)
            elif self._check_executor is not None:
                value = await asyncio.get_running_loop().run_in_executor(self._check_executor, method, msg)
            else:
                return  # shut down
            state = _state(value, "check_local_transaction")
            remark = None
        except Exception as exc:
            log.warning("check_local_transaction of %s raised; UNKNOW: %r", msg.msg_id, exc)
            state, remark = LocalTransactionState.UNKNOW, f"checkLocalTransactionState exception: {exc!r}"
        uniq = msg.get_property(_UNIQ_KEY) or header.msg_id
        end = EndTransactionRequestHeader(
            producer_group=self.group_name,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=True,
            msg_id=uniq,
            transaction_id=header.transaction_id,
        )
        try:
            await self.instance.remoting.invoke_oneway(addr, _oneway(end, remark))
        except Exception as exc:
            log.warning("answer to the check of %s not sent to %s: %s", msg.msg_id, addr, exc)
            return
        if self.trace_hook is not None:  # message trace: the EndTransaction record
            self.trace_hook.ended(msg, uniq, addr, state.value, header.transaction_id, True)


def _oneway(header: EndTransactionRequestHeader, remark: str | None) -> RemotingCommand:
    request = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True)
    request.remark = remark
    return request


def prepare_half(msg: Message, group: str) -> None:
    """Mark ``msg`` as a half message of producer group ``group`` (``TRAN_MSG``, ``PGROUP``; no ``DELAY``)."""
    msg.properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
    msg.properties[_TRAN_MSG] = "true"
    msg.properties[_PGROUP] = group


class TransactionProducer(Producer):
    """Blocking transactional producer. Mirrors ``TransactionMQProducer``; runs
    :class:`AsyncTransactionProducer` on the client's background loop.

    Args:
        transaction_listener: the application's :class:`TransactionListener`; its
            ``execute_local_transaction`` must be a plain function (``check_local_transaction`` may
            be a coroutine: it runs on the client's loop then).
        config / overrides / check_thread_pool_size: as :class:`AsyncTransactionProducer`.

    ``execute_local_transaction`` runs on the thread that calls
    :meth:`send_message_in_transaction` (a database connection made there can be used), checks on
    the check pool. Every :class:`Producer` method works too (plain sends).
    """

    _core: AsyncTransactionProducer  # type: ignore[assignment]

    def __init__(
        self,
        transaction_listener: TransactionListener,
        config: ProducerConfig | None = None,
        *,
        check_thread_pool_size: int = 1,
        **overrides: Any,
    ) -> None:
        if inspect.iscoroutinefunction(getattr(transaction_listener, "execute_local_transaction", None)):
            raise ClientError(
                "TransactionProducer runs execute_local_transaction on the calling thread: it must be a "
                "plain function (use AsyncTransactionProducer for a coroutine)"
            )
        core = AsyncTransactionProducer(
            transaction_listener, config, check_thread_pool_size=check_thread_pool_size, **overrides
        )
        BlockingFacade.__init__(self, core)  # Producer's own set-up, with this core
        signed = bool(core.config.access_key and core.config.secret_key)
        self._direct = DirectPool() if core.config.sync_send_direct and not signed else None

    @property
    def transaction_listener(self) -> TransactionListener:
        """The listener that runs local transactions and answers the broker's checks."""
        return self._core.transaction_listener

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """See :meth:`AsyncTransactionProducer.send_message_in_transaction`; the local transaction
        runs on this thread, and END_TRANSACTION (oneway) is written on this thread's connection to
        the broker (or handed to the loop without waiting when that connection is busy)."""
        core = self._core
        prepare_half(msg, core.group_name)
        result = self.send(msg)
        if not core.announced(result.message_queue.broker_name):
            self._call(core.announce, result)
        state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        if result.send_status == "SEND_OK":
            try:
                state = _state(
                    core.transaction_listener.execute_local_transaction(msg, arg), "execute_local_transaction"
                )
            except Exception as exc:
                log.warning("execute_local_transaction of %s raised; UNKNOW: %r", msg.unique_key, exc)
                state, error = LocalTransactionState.UNKNOW, exc
        if not self._end_direct(result, state, error):
            self._loop.submit(core.end_transaction(result, state, error))
        return core.transaction_result(result, state)

    def _end_direct(
        self, result: SendResult, state: LocalTransactionState, error: BaseException | None
    ) -> bool:
        """END_TRANSACTION on the direct connection the half message went over; False when there is
        none free, or message trace wants the loop's path (which records the end)."""
        core = self._core
        if self._direct is None or core.trace_hook is not None:
            return False
        addr = core.instance.find_broker_address_in_publish(result.message_queue.broker_name)
        conn = self._direct.try_acquire(addr) if addr is not None else None
        if conn is None:
            return False
        try:
            return conn.send_oneway(core.end_request(result, state, error), core.config.send_msg_timeout)
        finally:
            conn.lock.release()
