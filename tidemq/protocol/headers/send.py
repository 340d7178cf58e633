"""Producer-path headers: SEND_MESSAGE (long names), SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
(one-letter names), transactions. Mirrors ``SendMessageRequestHeader(V2)``."""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers.base import CommandHeader, HeaderError, b, i32, i64, s

V2_FIELD_NAMES: Final[dict[str, str]] = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "bname": "n",
}
"""Long (SEND_MESSAGE) -> one-letter (SEND_MESSAGE_V2) wire names (``SendMessageRequestHeaderV2``)."""

V2_REQUIRED: Final = operator.itemgetter("a", "b", "c", "d", "e", "f", "g", "h")
"""The eight required one-letter fields of a SEND_MESSAGE_V2 header, in order (KeyError: one is missing)."""
_V2_PLAIN_PREFIX: Final = re.compile(r"[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,9}\|[0-9]{1,18}\|").match
"""``defaultTopicQueueNums|queueId|sysFlag|flag|bornTimestamp|`` as plain ASCII digits that fit their
ints (9 digits: below 2**31; 18: below 2**63), then the three str fields joined after them."""

SEND_REPLY_MESSAGE: Final = 324
SEND_REPLY_MESSAGE_V2: Final = 325
_V1_CODES: Final = frozenset({int(RequestCode.SEND_MESSAGE), SEND_REPLY_MESSAGE})
_V2_CODES: Final = frozenset(
    {int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE), SEND_REPLY_MESSAGE_V2}
)


@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) / SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) request header.

    Mirrors ``SendMessageRequestHeader`` (long names) and ``SendMessageRequestHeaderV2``
    (one-letter names, :data:`V2_FIELD_NAMES`). ``born_timestamp`` is ms; ``queue_id < 0`` asks
    the broker to pick a queue. A batch is flagged by ``batch`` (C++ sends batches as code 10
    or 310 with ``batch``), not by the code; code 320 implies ``batch=True``.
    """

    producer_group: str = s("producerGroup")
    topic: str = s("topic")
    default_topic: str = s("defaultTopic")
    default_topic_queue_nums: int = i32("defaultTopicQueueNums")
    queue_id: int = i32("queueId")
    sys_flag: int = i32("sysFlag")
    born_timestamp: int = i64("bornTimestamp")
    flag: int = i32("flag")
    properties: str | None = s("properties", required=False)
    reconsume_times: int | None = i32("reconsumeTimes", required=False)
    unit_mode: bool = b("unitMode", default=False)
    batch: bool = b("batch", default=False)
    max_reconsume_times: int | None = i32("maxReconsumeTimes", required=False)
    broker_name: str | None = s("bname", required=False)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        """Parse by code: 10/324 long names, 310/320/325 one-letter names.

        Raises:
            HeaderError: bad or missing field (named as received, e.g. ``'e' (queueId)``), or
                ``cmd.code`` is not a send code.
        """
        if cmd.code in _V1_CODES:
            return cls.from_ext_fields(cmd.ext_fields)
        if cmd.code in _V2_CODES:
            header = cls.from_v2_ext_fields(cmd.ext_fields)
            if cmd.code == RequestCode.SEND_BATCH_MESSAGE:
                header.batch = True
            return header
        raise HeaderError(
            cls.__name__, "code", str(cmd.code), f"request code {cmd.code} is not a send request"
        )

    @classmethod
    def from_v2_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        """Parse the one-letter (V2) form: what every send carries, read field by field when it is
        plainly formed (strings, unsigned digits, ``true``/``false``), else by the generic parser,
        which gives the same header or the error that names the bad field."""
        header = cls._from_v2_plain(ext)
        return header if header is not None else cls._from_ext(ext, V2_FIELD_NAMES)

    @classmethod
    def _from_v2_plain(cls, ext: Mapping[str, Any]) -> Self | None:
        # Written out without loops or generators: this runs for every send. The eight required
        # fields in one lookup (a missing one: the generic parser names it), the five numbers
        # checked by one match of their join (the join also fails on a value that is not a str)
        try:
            a, b_, c, d, e, f, g, h = V2_REQUIRED(ext)
            plain = _V2_PLAIN_PREFIX("|".join((d, e, f, h, g, a, b_, c)))
        except (KeyError, TypeError):
            return None
        if plain is None or type(a) is not str or type(b_) is not str or type(c) is not str:
            return None
        get = ext.get
        i, j, k, l_, m, n = get("i"), get("j"), get("k"), get("l"), get("m"), get("n")
        if not ((i is None or type(i) is str) and (n is None or type(n) is str)):
            return None
        reconsume_times = max_reconsume_times = None
        if j is not None and j != "":
            if not (type(j) is str and j.isascii() and j.isdigit() and len(j) < 10):
                return None
            reconsume_times = int(j)
        if l_ is not None and l_ != "":
            if not (type(l_) is str and l_.isascii() and l_.isdigit() and len(l_) < 10):
                return None
            max_reconsume_times = int(l_)
        if k is None or k == "" or k == "false":
            unit_mode = False
        elif k == "true":
            unit_mode = True
        else:
            return None
        if m is None or m == "" or m == "false":
            batch = False
        elif m == "true":
            batch = True
        else:
            return None
        # Every field set here (the test against the generic parser compares them all): the generated
        # __init__'s binding of 14 keyword arguments was a quarter of this parse.
        header = object.__new__(cls)
        header.producer_group = a
        header.topic = b_
        header.default_topic = c
        header.default_topic_queue_nums = int(d)
        header.queue_id = int(e)
        header.sys_flag = int(f)
        header.born_timestamp = int(g)
        header.flag = int(h)
        header.properties = i
        header.reconsume_times = reconsume_times
        header.unit_mode = unit_mode
        header.max_reconsume_times = max_reconsume_times
        header.batch = batch
        header.broker_name = n
        return header

    def to_v2_ext_fields(self) -> dict[str, str]:
        """The one-letter (V2) form, as Java / C++ >= 1.2.5 send it."""
        return {V2_FIELD_NAMES[k]: v for k, v in self.to_ext_fields().items()}


@dataclass(slots=True, kw_only=True)
class SendMessageResponseHeader(CommandHeader):
    """Send response header. Mirrors ``SendMessageResponseHeader``.

    ``msg_id`` is the offset msgId (comma-joined for a batch). ``msg_region`` and ``trace_on``
    are the ``MSG_REGION`` / ``TRACE_ON`` ext-fields Java brokers always add (the Java client
    needs extFields present after a send; C++ reads them only as strings).
    """

    msg_id: str = s("msgId")
    queue_id: int = i32("queueId")
    queue_offset: int = i64("queueOffset")
    transaction_id: str | None = s("transactionId", required=False)
    msg_region: str | None = s("MSG_REGION", required=False, default="DefaultRegion")
    trace_on: bool | None = b("TRACE_ON", default=True)


@dataclass(slots=True, kw_only=True)
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37, oneway). ``commit_or_rollback``: 0 unknown, 8 commit, 12 rollback."""

    producer_group: str = s("producerGroup")
    tran_state_table_offset: int = i64("tranStateTableOffset")
    commit_log_offset: int = i64("commitLogOffset")
    commit_or_rollback: int = i32("commitOrRollback")
    from_transaction_check: bool = b("fromTransactionCheck", default=False)
    msg_id: str | None = s("msgId", required=False)
    transaction_id: str | None = s("transactionId", required=False)


@dataclass(slots=True, kw_only=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39, broker -> producer, oneway). Body = the half message."""

    tran_state_table_offset: int = i64("tranStateTableOffset")
    commit_log_offset: int = i64("commitLogOffset")
    msg_id: str | None = s("msgId", required=False)
    transaction_id: str | None = s("transactionId", required=False)
    offset_msg_id: str | None = s("offsetMsgId", required=False)
