"""Request processors, channel listeners, RPC hooks and the processor table.

Mirrors RocketMQ's ``NettyRequestProcessor``, ``ChannelEventListener``, ``RPCHook`` and the
request-dispatch half of ``NettyRemotingAbstract.processRequestCommand``.

Rules the dispatcher enforces (protocol.md §1.3):

* an unknown request code gets ``REQUEST_CODE_NOT_SUPPORTED`` with the remark
  ``" request type N not supported"`` (leading space, as Java writes it);
* a :class:`~tidemq.errors.ProtocolError` from a processor or hook gets ``SYSTEM_ERROR`` with the
  error text as remark; any other exception gets ``SYSTEM_ERROR`` with ``"<Type>: <text>"`` and a
  logged traceback;
* a oneway request (``flag & 2``) never gets a response, not even an error;
* a processor returning ``None`` answers later through ``channel.send_response`` (or never).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tidemq.errors import LocalProtocolError, ProtocolError, RemotingSendRequestError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RPC_ONEWAY, RemotingCommand, encode_command
from tidemq.remoting.log_limit import bad_request_log

if TYPE_CHECKING:
    from tidemq.remoting.channel import Channel

log = logging.getLogger(__name__)


@runtime_checkable
class RequestProcessor(Protocol):
    """Handles requests of the codes it is registered for. Mirrors ``NettyRequestProcessor``.

    ``process_request`` returns the response (the transport sets its opaque and response flag),
    or ``None`` to answer later via :meth:`Channel.send_response` (long polling) or not at all.
    """

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Handle one request received on ``channel``."""
        ...


class ChannelListener(Protocol):
    """Told when a connection opens or closes. Mirrors ``ChannelEventListener``.

    Methods may be plain functions or coroutines (a coroutine is run as a task). Exceptions
    are logged and otherwise ignored.
    """

    def on_channel_connect(self, channel: Channel) -> object:
        """``channel`` was just established."""
        ...

    def on_channel_close(self, channel: Channel) -> object:
        """``channel`` was closed (by either side); its pending requests have been failed."""
        ...


class RPCHook(Protocol):
    """Called around requests. Mirrors RocketMQ's ``RPCHook`` (used for ACL signing/checking).

    On a :class:`~tidemq.remoting.server.RemotingServer` hooks see *incoming* requests: an
    exception from ``do_before_request`` rejects the request with ``SYSTEM_ERROR`` and the
    exception text (how RocketMQ's broker ACL answers). On a
    :class:`~tidemq.remoting.client.RemotingClient` hooks see *outgoing* requests (e.g. to add
    ``AccessKey``/``Signature`` ext fields) and their responses.
    """

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        """Inspect or modify ``request`` before it is processed (server) or sent (client)."""
        ...

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        """Inspect ``response`` to ``request``."""
        ...


FastPath = Callable[["Channel", dict[str, Any], bytes], "bytes | None"]
"""``(channel, decoded JSON header, body) -> answer frame | ANSWER_LATER | None``: see
:meth:`RequestDispatcher.register_fast_path`."""
ANSWER_LATER = b""
"""What a fast path returns when it answers later, through ``channel.answer_later()``."""


def not_supported_response(code: int) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark ``" request type N not supported"``."""
    return RemotingCommand.create_response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported"
    )


_listener_tasks: set[asyncio.Task[None]] = set()


async def _await_listener(aw: Awaitable[object]) -> None:
    try:
        await aw
    except Exception:
        log.exception("channel listener failed")


def call_listener(result: object) -> None:
    """Run ``result`` as a task when a listener callback returned an awaitable."""
    if inspect.isawaitable(result):
        task = asyncio.ensure_future(_await_listener(result))
        _listener_tasks.add(task)
        task.add_done_callback(_listener_tasks.discard)


class RequestDispatcher:
    """The request-code -> processor table shared by server and client channels.

    Mirrors the ``processorTable`` / ``defaultRequestProcessor`` of ``NettyRemotingAbstract``.
    """

    def __init__(self) -> None:
        self.processors: dict[int, RequestProcessor] = {}
        self.default_processor: RequestProcessor | None = None
        self.rpc_hooks: list[RPCHook] = []
        self.fast_paths: dict[int, FastPath] = {}
        """Request code -> fast path (:meth:`register_fast_path`); used only while no RPC hook is set."""
        self.fast_prefixes: tuple[bytes, ...] = ()
        """How a JSON header of a code with a fast path starts, as every client writes it (fields in
        alphabetical order): the frames tried on a fast path (the others are not decoded twice)."""

    def register_fast_path(self, code: int, fast_path: FastPath) -> None:
        """Let ``fast_path`` answer requests with ``code`` straight from their frame.

        A channel whose read is exactly one whole frame with a JSON header calls
        ``fast_path(channel, header, body)`` with the header as decoded JSON (a dict, not checked yet)
        and the body, before any :class:`RemotingCommand` is made. It returns the whole answer frame
        (length prefix included) after doing the request's work (or :data:`ANSWER_LATER` after
        taking ``channel.answer_later()``, which it then calls once with the frame), or None *before
        doing anything*: then
        the request takes the general path (decode, processor, encode) as usual. It must answer
        exactly as the code's processor would (a deliberately unrolled twin, tested against it), and is
        not used while RPC hooks are registered (they see every request). An exception it raises is
        answered as a processor's (:meth:`fast_path_failed`).
        """
        self.fast_paths[int(code)] = fast_path
        self.fast_prefixes = tuple(b'{"code":%d,' % code for code in self.fast_paths)

    def fast_path_failed(self, channel: Channel, code: int, opaque: int, exc: Exception) -> bytes:
        """The answer frame to a request whose fast path raised ``exc``: SYSTEM_ERROR, logged, as
        :meth:`process` answers a processor that raised."""
        request = RemotingCommand(code, opaque=opaque)
        return encode_command(self._failed(channel, request, exc).response_to(request))

    def register_processor(self, code: int, processor: RequestProcessor) -> None:
        """Route requests with ``code`` to ``processor`` (replacing any previous one)."""
        self.processors[int(code)] = processor

    def register_default_processor(self, processor: RequestProcessor) -> None:
        """Route requests with no registered processor to ``processor``."""
        self.default_processor = processor

    async def process(self, channel: Channel, request: RemotingCommand) -> None:
        """Handle ``request`` and write its response on ``channel`` (unless oneway or deferred)."""
        processor = self.processors.get(request.code)
        if processor is None or self.rpc_hooks:
            response = await self.make_response(channel, request)
        else:  # the usual: make_response's steps without its coroutine (one per request fewer)
            try:
                response = await processor.process_request(channel, request)
            except Exception as exc:
                response = self._failed(channel, request, exc)
        if response is None or request.flag & RPC_ONEWAY:
            return
        try:
            # answered within the request's read: with that read's other answers, in one write; later
            # (a SYNC_FLUSH send resumed by its fsync): at once, not one loop turn after
            channel.respond_now(request, response)
        except RemotingSendRequestError:  # nothing written (asking is_active first costs every answer)
            log.debug("%s: channel closed before the response to code %d", channel.remote_addr, request.code)
        except LocalProtocolError as exc:
            bad_request_log.log(
                logging.ERROR,
                channel.remote_addr,
                "%s: cannot send the response to code %d: %s",
                channel.remote_addr,
                request.code,
                exc,
            )
            error = RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR, f"the response could not be encoded: {exc}"
            ).response_to(request)
            try:
                channel.write_command(error)
            except LocalProtocolError:  # not even an error fits (opaque checked on decode): drop the peer
                channel.close("unanswerable request")

    async def make_response(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Run the processor for ``request`` with the error mapping described in the module doc."""
        processor = self.processors.get(request.code, self.default_processor)
        if processor is None:
            log.debug("%s: request code %d not supported", channel.remote_addr, request.code)
            return not_supported_response(request.code)
        try:
            for hook in self.rpc_hooks:
                hook.do_before_request(channel.remote_addr, request)
            response = await processor.process_request(channel, request)
            if response is not None:
                for hook in self.rpc_hooks:
                    hook.do_after_response(channel.remote_addr, request, response)
        except Exception as exc:
            return self._failed(channel, request, exc)
        return response

    def _failed(self, channel: Channel, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        """The answer to a request whose processor (or hook) raised ``exc``, logged (rate limited):
        a ProtocolError's text, else the exception's type and text, as SYSTEM_ERROR."""
        if isinstance(exc, ProtocolError):
            bad_request_log.log(
                logging.INFO,
                channel.remote_addr,
                "%s: bad request code %d: %s",
                channel.remote_addr,
                request.code,
                exc,
            )
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, str(exc))
        bad_request_log.log(
            logging.ERROR,
            channel.remote_addr,
            "%s: processor for request code %d failed",
            channel.remote_addr,
            request.code,
            exc_info=True,  # called in the except block that caught exc
            kind=f"code {request.code} failures",
        )
        return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
