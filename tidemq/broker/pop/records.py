"""Records of the revive log ``rmq_sys_REVIVE_LOG_<cluster>``: what makes POP's in-flight state
crash-safe. Pure code (JSON bodies; the tag says the kind).

=======  ==================  =============================================================
tag      class               written when
=======  ==================  =============================================================
``ck``   :class:`CheckPoint`  a pop took messages from a queue (RocketMQ's ``PopCheckPoint``:
                              ``so pt it bm n q t c ro d bn``; tidemq adds ``rq`` the revive
                              queue and ``nb`` the queue offset the pop advanced the group to)
``ack``  :class:`AckRecord`   an ack (``AckMsg``: ``ao so c t q pt bn``; a batch ack of one
                              check-point's offsets writes ``aol``, tag ``bAck`` as RocketMQ)
``rv``   :class:`AckRecord`   the revive re-put a check-point's un-acked messages (tidemq): the
                              check-point is finished, a later scan skips it
``ock``  :class:`OrderCheckPoint`  an order (FIFO) pop took a batch from a queue (tidemq; RocketMQ
                              keeps this in ``ConsumerOrderInfoManager``'s file): offsets, attempt
                              counts, acked offsets, invisible window
``oack`` :class:`OrderAck`    an order ack, with the offset the group commits after it (tidemq)
=======  ==================  =============================================================

Check-points are keyed by ``(group, topic, queue_id, start_offset, pop_time)``; an ack names its
check-point by the same fields (they are all in the receipt handle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

TAG_CK = "ck"
TAG_ACK = "ack"
TAG_BATCH_ACK = "bAck"
TAG_REVIVED = "rv"
TAG_ORDER_CK = "ock"
TAG_ORDER_ACK = "oack"

CkKey = tuple[str, str, int, int, int]
"""``(group, topic, queue_id, start_offset, pop_time)``: a check-point's identity."""


@dataclass(slots=True)
class CheckPoint:
    """A non-order pop of one queue. Mirrors ``PopCheckPoint``.

    Attributes:
        start_offset: the queue offset the pop read from (``so``; the handle's ``ckQueueOffset``).
        pop_time / invisible_time: ms; the messages revive at ``pop_time + invisible_time``.
        queue_id / topic / group: where the messages are (``topic`` is the retry topic for a
            pop of retried messages).
        diffs: each popped message's queue offset minus ``start_offset`` (``d``), ascending.
        revive_qid: the revive queue the check-point is in.
        next_offset: the group's queue offset after the pop (``nb``).
        bitmap: acked messages, bit i = ``diffs[i]`` (``bm``).
        broker_name: ``bn``.
    """

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str
    group: str
    diffs: list[int]
    revive_qid: int
    next_offset: int
    bitmap: int = 0
    broker_name: str = ""

    @property
    def key(self) -> CkKey:
        """``(group, topic, queue_id, start_offset, pop_time)``: what names a check-point and its acks."""
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_time(self) -> int:
        """When the un-acked messages come back (ms since the epoch): ``pop_time + invisible_time``."""
        return self.pop_time + self.invisible_time

    @property
    def num(self) -> int:
        """How many messages the check-point holds."""
        return len(self.diffs)

    def all_acked(self) -> bool:
        """Whether every message of the check-point is acked (its bitmap full)."""
        return self.bitmap == (1 << len(self.diffs)) - 1

    def index_of(self, queue_offset: int) -> int:
        """Position of ``queue_offset`` in the check-point, -1 when it is not one of its messages."""
        diff = queue_offset - self.start_offset
        try:
            return self.diffs.index(diff)
        except ValueError:
            return -1

    def encode(self) -> bytes:
        """The revive-log body (JSON with ``PopCheckPoint``'s short keys:
        ``so pt it bm n q t c ro d bn rq nb``)."""
        return orjson.dumps(
            {
                "so": self.start_offset,
                "pt": self.pop_time,
                "it": self.invisible_time,
                "bm": self.bitmap,
                "n": len(self.diffs),
                "q": self.queue_id,
                "t": self.topic,
                "c": self.group,
                "ro": 0,
                "d": self.diffs,
                "bn": self.broker_name,
                "rq": self.revive_qid,
                "nb": self.next_offset,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> CheckPoint:
        """Raises ValueError / KeyError / TypeError for a malformed body."""
        o = orjson.loads(body)
        diffs = [int(x) for x in o.get("d") or list(range(int(o["n"])))]
        return cls(
            start_offset=int(o["so"]),
            pop_time=int(o["pt"]),
            invisible_time=int(o["it"]),
            queue_id=int(o["q"]),
            topic=str(o["t"]),
            group=str(o["c"]),
            diffs=diffs,
            revive_qid=int(o.get("rq", 0)),
            next_offset=int(o.get("nb", int(o["so"]) + (diffs[-1] + 1 if diffs else 0))),
            bitmap=int(o.get("bm", 0)),
            broker_name=str(o.get("bn", "")),
        )


@dataclass(slots=True)
class AckRecord:
    """An ack of messages of one check-point (``AckMsg`` / ``BatchAckMsg``), or (tag ``rv``) the
    mark that the check-point was revived. ``offsets`` are queue offsets (``ao`` / ``aol``)."""

    group: str
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    offsets: list[int] = field(default_factory=list)
    broker_name: str = ""

    @property
    def key(self) -> CkKey:
        """The :attr:`CheckPoint.key` of the check-point this ack belongs to."""
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    def encode(self) -> bytes:
        """The revive-log body (JSON, ``AckMsg`` / ``BatchAckMsg`` keys: ``ao`` for one offset, ``aol`` for
        several)."""
        obj: dict[str, Any] = {
            "so": self.start_offset,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time,
            "bn": self.broker_name,
        }
        if len(self.offsets) == 1:
            obj["ao"] = self.offsets[0]
        else:
            obj["aol"] = self.offsets
        return orjson.dumps(obj)

    @classmethod
    def decode(cls, body: bytes) -> AckRecord:
        """The record of a revive-log body written by :meth:`encode`.

        Raises:
            orjson.JSONDecodeError, KeyError, ValueError, TypeError: a malformed body.
        """
        o = orjson.loads(body)
        offsets = [int(x) for x in o["aol"]] if "aol" in o else ([int(o["ao"])] if "ao" in o else [])
        return cls(
            str(o["c"]),
            str(o["t"]),
            int(o["q"]),
            int(o["so"]),
            int(o["pt"]),
            offsets,
            str(o.get("bn", "")),
        )


@dataclass(slots=True)
class OrderCheckPoint:
    """The batch in flight on one queue for an order pop (one batch per queue at a time).

    Attributes:
        offsets: the popped queue offsets, ascending.
        counts: each offset's earlier deliveries (0 on the first), the handle's attempt - 1.
        acked: offsets acked already (an order ack may come before an earlier one's); may hold
            offsets past ``next_offset`` too, acked in an earlier, longer batch of the queue (a
            re-pop that asked for fewer messages), so they are never delivered again.
        next_offset: the queue offset after the batch (the group commits it once all are acked).
        pop_time / invisible_time: ms; un-acked offsets are popped again, in order, at
            ``pop_time + invisible_time``.
        attempt_id: the pop's ``attemptId`` (None: none given); a pop with the same id gets the
            batch again at once rather than waiting for the invisible time (``OrderInfo.attemptId``).
    """

    group: str
    topic: str
    queue_id: int
    offsets: list[int]
    counts: list[int]
    next_offset: int
    pop_time: int
    invisible_time: int
    acked: list[int] = field(default_factory=list)
    attempt_id: str | None = None

    @property
    def visible_at(self) -> int:
        """When the batch's un-acked messages may be popped again (ms since the epoch)."""
        return self.pop_time + self.invisible_time

    def commit_offset(self) -> int:
        """The offset the group may commit: the first un-acked offset, else ``next_offset``."""
        done = set(self.acked)
        for off in self.offsets:
            if off not in done:
                return off
        return self.next_offset

    def unacked(self) -> list[int]:
        """The batch's offsets not acked yet, ascending."""
        done = set(self.acked)
        return [o for o in self.offsets if o not in done]

    def acked_ahead(self) -> list[int]:
        """Acked offsets past the batch (from an earlier, longer batch), ascending."""
        return sorted(o for o in self.acked if o >= self.next_offset)

    def is_live(self, committed: int) -> bool:
        """Whether the queue still needs this record with the group's offset at ``committed``:
        an un-acked offset or an acked-ahead one at or past it."""
        return any(o >= committed for o in self.unacked()) or any(o >= committed for o in self.acked_ahead())

    def count_of(self, offset: int) -> int:
        """How many times ``offset`` was delivered before this batch (0 when it is not in the batch)."""
        try:
            return self.counts[self.offsets.index(offset)]
        except ValueError:
            return 0

    def encode(self) -> bytes:
        """The revive-log body (JSON, short keys ``c t q d cnt nb pt it ak``, and ``at`` with an
        attempt id)."""
        body: dict[str, object] = {
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "d": self.offsets,
            "cnt": self.counts,
            "nb": self.next_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "ak": self.acked,
        }
        if self.attempt_id is not None:
            body["at"] = self.attempt_id
        return orjson.dumps(body)

    @classmethod
    def decode(cls, body: bytes) -> OrderCheckPoint:
        """The record of a revive-log body written by :meth:`encode`.

        Raises:
            orjson.JSONDecodeError, KeyError, ValueError, TypeError: a malformed body.
        """
        o = orjson.loads(body)
        return cls(
            str(o["c"]),
            str(o["t"]),
            int(o["q"]),
            [int(x) for x in o["d"]],
            [int(x) for x in o["cnt"]],
            int(o["nb"]),
            int(o["pt"]),
            int(o["it"]),
            [int(x) for x in o.get("ak") or []],
            None if o.get("at") is None else str(o["at"]),
        )


@dataclass(slots=True)
class OrderAck:
    """An order ack of ``offset``; ``pop_time`` names the batch; ``commit`` is the group's offset
    after it."""

    group: str
    topic: str
    queue_id: int
    offset: int
    pop_time: int
    commit: int

    def encode(self) -> bytes:
        """The revive-log body (JSON, short keys ``c t q o pt co``)."""
        return orjson.dumps(
            {
                "c": self.group,
                "t": self.topic,
                "q": self.queue_id,
                "o": self.offset,
                "pt": self.pop_time,
                "co": self.commit,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> OrderAck:
        """The record of a revive-log body written by :meth:`encode`.

        Raises:
            orjson.JSONDecodeError, KeyError, ValueError, TypeError: a malformed body.
        """
        o = orjson.loads(body)
        return cls(str(o["c"]), str(o["t"]), int(o["q"]), int(o["o"]), int(o["pt"]), int(o["co"]))
