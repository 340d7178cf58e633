"""SEND_MESSAGE_V2 answered straight from its frame: the fast path of the usual single send.

:class:`FastSend` is the remoting dispatcher's fast path of request code 310
(:meth:`~tidemq.remoting.processor.RequestDispatcher.register_fast_path`): a connection whose read
is exactly one whole frame with a JSON header hands it the decoded header and the body before any
``RemotingCommand`` exists. It takes the send nearly every client makes (a plain message: no delay
level, timer or half-message property, not a retry topic, not a batch, to a known writable topic,
answered without waiting for a slave) through the same checks, put, statistics and answer
as :meth:`SendMessageProcessor.process_request
<tidemq.broker.processor.send.SendMessageProcessor.process_request>`, and answers with a ready frame:
the answer's JSON header is a template with the message id, queue id, queue offset and opaque
spliced in, not a ``RemotingCommand`` encoded per answer. Under SYNC_FLUSH the answer goes out when
the group commit's fsync covers the message (``GroupCommitService.add_waiter``, a callback, not a
task), as the general path's ``handle_put_result`` answers after ``wait_for_flush``.

Anything else (a header the general path would parse differently or refuse, a send it would refuse,
a feature path, SYNC_MASTER with ``WAIT``) gets None back *before any side effect*, and
the request takes the general path as if this had not run. A put that fails answers as the general
path does (its error response, encoded the usual way).

``tests/unit/broker/test_send_fast.py`` checks with Hypothesis that what this answers is answered,
stored and counted byte for byte as the general path does.
"""

from __future__ import annotations

import asyncio
import re
import struct
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from tidemq.broker.processor.send import NOT_PLAIN
from tidemq.errors import ProtocolError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand, encode_command
from tidemq.protocol.headers.send import V2_REQUIRED
from tidemq.protocol.message import MessageConst
from tidemq.protocol.message_codec import MAX_PROPERTIES_BYTES, MessageSysFlag
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX
from tidemq.remoting.processor import ANSWER_LATER
from tidemq.store.results import AppendMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from tidemq.broker.flush import GroupCommitService
    from tidemq.broker.processor.send import SendMessageProcessor
    from tidemq.remoting import Channel

_INT_MIN, _INT_MAX = -0x80000000, 0x7FFFFFFF
_PUT_OK = PutMessageStatus.PUT_OK
_MULTI_TAGS = MessageSysFlag.MULTI_TAGS_FLAG
_MARKS = ("\ue000M", "\ue000Q", "\ue000O")
_OPAQUE_MARK = 0x7FFFFFF1
_CLUSTER = MessageConst.PROPERTY_CLUSTER
_NOT_PLAIN_PAIR = NOT_PLAIN | {MessageConst.PROPERTY_WAIT_STORE_MSG_OK, _CLUSTER}
"""Names a properties text of one pair may not have to be stored as it came plus CLUSTER."""
_V2_FIELDS = re.compile(
    r"[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,18}"  # d, e, f, h: ints; g: a long
    r"\|[0-9]{0,9}\|(?:|false|true)\|[0-9]{0,9}\|(?:|false)"  # j, l: ints or empty; k, m: flags
).fullmatch
"""``d|e|f|h|g|j|k|l|m`` (absent: empty) as ``_from_v2_plain`` takes them, not a batch (m), with no
other ``|`` (no value here may hold one)."""
_LENGTHS = struct.Struct(">iI").pack
"""``(frame length after its first 4 bytes, header length)``: the frame's first 8 bytes."""


def answer_template(ext: dict[str, str]) -> str:
    """The JSON header of a SUCCESS send answer with ``ext`` (``MSG_REGION``, ``TRACE_ON``) as a
    ``%`` template of (msgId: str, queueId: int, queueOffset: int, opaque: int): exactly what
    :func:`~tidemq.protocol.command.encode_command` writes for the general path's answer."""
    fields = dict(ext)
    fields["msgId"], fields["queueId"], fields["queueOffset"] = _MARKS
    answer = RemotingCommand(
        ResponseCode.SUCCESS, flag=RPC_TYPE_RESPONSE, ext_fields=fields, opaque=_OPAQUE_MARK
    )
    text = orjson.dumps(answer.header_dict()).decode().replace("%", "%%")
    for mark, spec in zip(_MARKS, ("%s", "%d", "%d"), strict=True):
        text = text.replace(f'"{mark}"', f'"{spec}"')
    return text.replace(f'"opaque":{_OPAQUE_MARK}', '"opaque":%d')


class FastSend:
    """The fast path of SEND_MESSAGE_V2 for one :class:`SendMessageProcessor` (its broker, its
    checked topic names, its answer fields). Called as ``fast(channel, header, body)`` with the
    frame's decoded JSON header (a dict) and body; returns the answer frame (length prefix
    included), or None: take the general path (nothing was done).

    Args:
        processor: the broker's send processor.
    """

    def __init__(self, processor: SendMessageProcessor) -> None:
        self._processor = processor
        self._broker = processor.broker
        self._ext: dict[str, str] | None = None
        self._template = ""
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, channel: Channel, header: dict[str, Any], body: bytes) -> bytes | None:
        # what decode_json_header takes as it is (else: the general path)
        ext = header.get("extFields")
        opaque = header.get("opaque", 0)
        version = header.get("version", 0)
        flag = header.get("flag", 0)
        if (
            type(ext) is not dict
            or type(opaque) is not int
            or type(version) is not int
            or type(flag) is not int
            or flag  # a oneway send or a response
            or type(header.get("language", "")) is not str
            or not _INT_MIN <= opaque <= _INT_MAX
            or not _INT_MIN <= version <= _INT_MAX
        ):
            return None
        # what SendMessageRequestHeader._from_v2_plain takes: the fields it reads as numbers or
        # flags in one match (a join fails on a value that is not a str), the strings in one join
        get = ext.get
        text: str = get("i", "")  # absent: "" (_props takes None as ""); a null or not a str: the join fails
        try:
            a, topic, c, d, e, f, g, h = V2_REQUIRED(ext)
            if (
                _V2_FIELDS("|".join((d, e, f, h, g, get("j", ""), get("k", ""), get("l", ""), get("m", ""))))
                is None
            ):
                return None
            "".join((a, topic, c, text, get("n", "")))
        except (KeyError, TypeError):
            return None
        j = get("j")
        return self._send(
            channel, topic, int(e), int(f), int(g), int(h), text, int(j) if j else 0, opaque, body
        )

    def _send(
        self,
        channel: Channel,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_ts: int,
        flag: int,
        text: str,
        reconsume_times: int,
        opaque: int,
        body: bytes,
    ) -> bytes | None:
        """The send of a header :meth:`__call__` took: its answer, or None (nothing done). The checks
        of ``msg_check`` and ``send_message``'s plain path where they pass (queue ids here are digits:
        never negative), the put, and the answer (``born_ts`` in ms)."""
        processor, broker = self._processor, self._broker
        config = broker.config
        if topic not in processor.valid_topics or not config.is_writeable or config.is_slave:
            return None
        topic_config = broker.topic_config_manager.select_topic_config(topic)
        if topic_config is None or not topic_config.perm & 2 or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        if queue_id >= topic_config.write_queue_nums and queue_id >= topic_config.read_queue_nums:
            return None
        pair_end = text.find("\x01")
        if pair_end > 0 and "\x02" not in text and text[:pair_end] not in _NOT_PLAIN_PAIR:
            wait, stored = True, f"{text}\x02{_CLUSTER}\x01{config.broker_cluster_name}"  # _props of one pair
        else:
            props, wait, stored = processor.properties_of(text)
            if not NOT_PLAIN.isdisjoint(props):
                return None
        if wait and broker.ha is not None and broker.ha.is_sync_master:
            return None  # a slave to wait for: the general path
        if len(body) > broker.store_config.max_message_size or len(stored) * 4 > MAX_PROPERTIES_BYTES:
            return None  # maybe too large: the general path measures and answers
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= _MULTI_TAGS
        ext_fields = processor.response_ext()
        try:
            result = broker.store.put_message_single(
                topic, queue_id, sys_flag, born_ts, channel.remote_addr, reconsume_times, flag, body, stored
            )
        except ProtocolError as exc:
            return self._illegal(exc, ext_fields, opaque)
        append = result.append_result
        if append is not None:  # statistics: one O(1) call per request
            broker.broker_stats.inc_put(topic, 1, append.wrote_bytes)
        if append is None or result.status is not _PUT_OK:
            return self._encoded(processor.put_error(result, ext_fields), opaque)
        if wait and (gcs := broker.group_commit_service) is not None:  # SYNC_FLUSH
            return self._after_flush(channel, gcs, append, queue_id, opaque, ext_fields)
        if ext_fields is not self._ext:  # _answer's SUCCESS, inline
            self._template, self._ext = answer_template(ext_fields), ext_fields
        answer = (self._template % (append.msg_id, queue_id, append.logics_offset, opaque)).encode()
        return _LENGTHS(len(answer) + 4, len(answer)) + answer

    def _after_flush(
        self,
        channel: Channel,
        gcs: GroupCommitService,
        append: AppendMessageResult,
        queue_id: int,
        opaque: int,
        ext_fields: dict[str, str],
    ) -> bytes:
        """A SYNC_FLUSH send's answer once the commit log is fsynced past it (at once when it is):
        ANSWER_LATER, the answer written by :meth:`_flushed`."""
        # the broker's loop (this one): asyncio.get_running_loop() is a getpid() system call in 3.11
        flushed: asyncio.Future[bool] = self._broker.loop.create_future()
        timer = gcs.add_waiter(append.wrote_offset + append.wrote_bytes, flushed)
        if timer is None:  # flushed already, or shut down
            code = ResponseCode.SUCCESS if flushed.result() else ResponseCode.FLUSH_DISK_TIMEOUT
            return self._answer(code, append, queue_id, opaque, ext_fields)
        answer_later = partial(
            self._flushed, channel.answer_later(), timer, append, queue_id, opaque, ext_fields
        )
        flushed.add_done_callback(answer_later)
        return ANSWER_LATER

    def _answer(
        self, code: int, append: AppendMessageResult, queue_id: int, opaque: int, ext_fields: dict[str, str]
    ) -> bytes:
        """The answer frame to a stored send (``handle_put_result``'s): SUCCESS from the template."""
        if code != ResponseCode.SUCCESS:
            fields = ext_fields.copy()
            fields["msgId"] = append.msg_id
            fields["queueId"] = str(queue_id)
            fields["queueOffset"] = str(append.logics_offset)
            return self._encoded(RemotingCommand(code, flag=RPC_TYPE_RESPONSE, ext_fields=fields), opaque)
        if ext_fields is not self._ext:
            self._template, self._ext = answer_template(ext_fields), ext_fields
        answer = (self._template % (append.msg_id, queue_id, append.logics_offset, opaque)).encode()
        return _LENGTHS(len(answer) + 4, len(answer)) + answer

    def _flushed(
        self,
        write: Callable[[bytes], None],
        timer: asyncio.TimerHandle,
        append: AppendMessageResult,
        queue_id: int,
        opaque: int,
        ext_fields: dict[str, str],
        flushed: asyncio.Future[bool],
    ) -> None:
        """The fsync a SYNC_FLUSH send waited for is done (True) or timed out (False): its answer."""
        timer.cancel()
        ha = self._broker.ha
        if flushed.cancelled() or not flushed.result():
            write(self._answer(ResponseCode.FLUSH_DISK_TIMEOUT, append, queue_id, opaque, ext_fields))
        elif ha is not None and ha.is_sync_master:  # became SYNC_MASTER meanwhile: a slave too
            task = asyncio.get_running_loop().create_task(
                self._after_slave(write, append, queue_id, opaque, ext_fields)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            write(self._answer(ResponseCode.SUCCESS, append, queue_id, opaque, ext_fields))

    async def _after_slave(
        self,
        write: Callable[[bytes], None],
        append: AppendMessageResult,
        queue_id: int,
        opaque: int,
        ext_fields: dict[str, str],
    ) -> None:
        code = await self._broker.handle_ha(append.wrote_offset + append.wrote_bytes)
        write(self._answer(code, append, queue_id, opaque, ext_fields))

    def _illegal(self, exc: ProtocolError, ext_fields: dict[str, str], opaque: int) -> bytes:
        """The answer to a put that raised ``exc`` (as ``_send_plain`` answers it)."""
        illegal = RemotingCommand.create_response(
            ResponseCode.MESSAGE_ILLEGAL, f"the message is illegal: {exc}"
        )
        illegal.ext_fields.update(ext_fields)
        return self._encoded(illegal, opaque)

    @staticmethod
    def _encoded(response: RemotingCommand, opaque: int) -> bytes:
        """An answer made the general way, as the frame the channel would write for it."""
        response.opaque = opaque
        response.flag |= RPC_TYPE_RESPONSE
        return encode_command(response)
