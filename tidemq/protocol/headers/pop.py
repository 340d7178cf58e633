"""POP headers (RocketMQ 5, rocketmq5.md §8.2). Mirrors ``PopMessageRequestHeader``,
``PopMessageResponseHeader``, ``AckMessageRequestHeader``, ``ChangeInvisibleTimeRequestHeader`` and
``ChangeInvisibleTimeResponseHeader``; ``BatchAckMessageRequestBody`` / ``BatchAck`` are the JSON
body of BATCH_ACK_MESSAGE (200151).

Times are milliseconds: ``invisibleTime`` (how long popped messages stay invisible), ``pollTime``
(how long the broker may hold an empty pop), ``bornTime`` (the client's clock when it sent the pop),
``popTime`` (the broker's clock when it popped).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from tidemq.protocol.headers.base import CommandHeader, b, i32, i64, s

INIT_MODE_MIN = 0
"""``ConsumeInitMode.MIN``: a new group starts at the queue's first offset."""
INIT_MODE_MAX = 1
"""``ConsumeInitMode.MAX``: a new group starts at the queue's end (at 0 while the whole queue is
still in memory, as RocketMQ's ``initPopOffsetByCheckMsgInMem``)."""


@dataclass(slots=True, kw_only=True)
class PopMessageRequestHeader(CommandHeader):
    """POP_MESSAGE (200050) request. ``queue_id`` -1 = every queue of the topic; ``max_msg_nums``
    1..32; ``expression_type`` ``TAG`` (default) or ``SQL92``; ``order`` = FIFO pop."""

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")
    max_msg_nums: int = i32("maxMsgNums")
    invisible_time: int = i64("invisibleTime")
    poll_time: int = i64("pollTime")
    born_time: int = i64("bornTime")
    init_mode: int = i32("initMode")
    exp_type: str | None = s("expType", required=False)
    exp: str | None = s("exp", required=False)
    order: bool | None = b("order")
    attempt_id: str | None = s("attemptId", required=False)


@dataclass(slots=True, kw_only=True)
class PopMessageResponseHeader(CommandHeader):
    """POP_MESSAGE response. The three ``*_info`` strings are described in
    :mod:`tidemq.broker.pop.extra_info` (entries ``retryFlag queueId value`` joined with ``;``)."""

    pop_time: int = i64("popTime")
    invisible_time: int = i64("invisibleTime")
    revive_qid: int = i32("reviveQid")
    rest_num: int = i64("restNum")
    start_offset_info: str | None = s("startOffsetInfo", required=False)
    msg_offset_info: str | None = s("msgOffsetInfo", required=False)
    order_count_info: str | None = s("orderCountInfo", required=False)


@dataclass(slots=True, kw_only=True)
class AckMessageRequestHeader(CommandHeader):
    """ACK_MESSAGE (200051) request: ``extra_info`` is the message's ``POP_CK`` handle, ``offset``
    its queue offset, ``queue_id`` its queue (of the retry topic when the handle says retry)."""

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")
    extra_info: str = s("extraInfo")
    offset: int = i64("offset")


@dataclass(slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053) request: as the ack, plus the new ``invisible_time``
    (ms, counted from now)."""

    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i32("queueId")
    extra_info: str = s("extraInfo")
    offset: int = i64("offset")
    invisible_time: int = i64("invisibleTime")


@dataclass(slots=True, kw_only=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME response: the client builds the new handle from these."""

    pop_time: int = i64("popTime")
    invisible_time: int = i64("invisibleTime")
    revive_qid: int = i32("reviveQid")


MAX_BATCH_ACK_BITS = 1024
"""The longest ``bitSet`` a BATCH_ACK_MESSAGE entry may have (bits, i.e. offsets past ``startOffset``):
an entry acks messages of one pop (at most 32); a longer one is refused as malformed rather than
walked offset by offset on the broker's loop."""


@dataclass(slots=True)
class BatchAck:
    """One entry of a BATCH_ACK_MESSAGE body (``BatchAck``): the offsets ``start_offset + i`` for
    every bit ``i`` set in ``bit_set`` are acked. ``retry`` is the handle's retry flag ("0"/"1"/"2").
    On the wire ``bit_set`` is Java's ``BitSet.toByteArray()`` in base64 (little-endian bytes)."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bit_set: int

    def offsets(self) -> list[int]:
        """The acked queue offsets, ascending (linear in the bit set's length)."""
        start, digits = self.start_offset, bin(self.bit_set)[:1:-1]  # bit 0 first
        return [start + i for i, bit in enumerate(digits) if bit == "1"]

    def to_json(self) -> dict[str, Any]:
        raw = self.bit_set.to_bytes((self.bit_set.bit_length() + 7) // 8, "little")
        return {
            "c": self.consumer_group,
            "t": self.topic,
            "r": self.retry,
            "so": self.start_offset,
            "q": self.queue_id,
            "rq": self.revive_queue_id,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "b": base64.b64encode(raw).decode(),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BatchAck:
        """Parse one entry (short or long field names, as fastjson's ``alternateNames``).

        Raises:
            ValueError / KeyError / TypeError: a field is missing or malformed.
        """

        def get(short: str, long: str) -> Any:
            return obj[short] if short in obj else obj[long]

        bits = get("b", "bitSet")
        if isinstance(bits, str):
            number = int.from_bytes(base64.b64decode(bits), "little")
        elif isinstance(bits, list):  # a byte array written as numbers
            number = int.from_bytes(bytes(x & 0xFF for x in bits), "little")
        else:
            raise TypeError(f"bitSet must be base64 text, got {bits!r}")
        if number.bit_length() > MAX_BATCH_ACK_BITS:
            raise ValueError(
                f"bitSet covers {number.bit_length()} offsets, at most {MAX_BATCH_ACK_BITS} "
                "(one entry acks messages of one pop, which returns at most 32)"
            )
        return cls(
            consumer_group=str(get("c", "consumerGroup")),
            topic=str(get("t", "topic")),
            retry=str(get("r", "retry")),
            start_offset=int(get("so", "startOffset")),
            queue_id=int(get("q", "queueId")),
            revive_queue_id=int(get("rq", "reviveQueueId")),
            pop_time=int(get("pt", "popTime")),
            invisible_time=int(get("it", "invisibleTime")),
            bit_set=number,
        )


@dataclass(slots=True)
class BatchAckMessageRequestBody:
    """The BATCH_ACK_MESSAGE body: ``{"brokerName": ..., "acks": [BatchAck, ...]}``."""

    broker_name: str = ""
    acks: list[BatchAck] = field(default_factory=list)

    def encode(self) -> bytes:
        return orjson.dumps({"brokerName": self.broker_name, "acks": [a.to_json() for a in self.acks]})

    @classmethod
    def decode(cls, body: bytes) -> BatchAckMessageRequestBody:
        """Raises ValueError (or orjson.JSONDecodeError, a ValueError) for a malformed body."""
        obj = orjson.loads(body)
        if not isinstance(obj, dict) or not isinstance(obj.get("acks", []), list):
            raise ValueError("batch ack body must be an object with an 'acks' list")
        try:
            acks = [BatchAck.from_json(a) for a in obj.get("acks") or []]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed batch ack entry: {exc!r}") from exc
        return cls(str(obj.get("brokerName") or ""), acks)
