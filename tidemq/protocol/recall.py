"""Timer-message recall handles and delete keys (RocketMQ 5.3, pure code).

A send answer for a timer message carries ``recallHandle`` (``SendMessageProcessor.attachRecallHandle``):
RocketMQ's ``RecallMessageHandle.HandleV1``, the URL-safe base64 (with padding) of
``"v1 <realTopic> <brokerName> <timestamp> <uniqKey>"`` where ``timestamp`` is the message's
``TIMER_OUT_MS`` + 1 in ms. RECALL_MESSAGE (370) and the v5 ``RecallMessage`` RPC give it back.

A cancellation is a message carrying ``TIMER_DEL_UNIQKEY`` = :func:`delete_key` (``realTopic+uniqKey``,
``TimerMessageStore.buildDeleteKey``) and the same delivery time as the message it cancels.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

__all__ = ["RecallHandle", "RecallHandleError", "delete_key"]

VERSION_1 = "v1"


class RecallHandleError(ValueError):
    """A recall handle that does not decode (RocketMQ's ``DecoderException``, remark
    ``recall handle is invalid``)."""


def delete_key(real_topic: str, uniq_key: str) -> str:
    """``TIMER_DEL_UNIQKEY``'s value for the message ``uniq_key`` of ``real_topic``
    (``TimerMessageStore.buildDeleteKey``: ``topic + "+" + uniqKey``)."""
    return f"{real_topic}+{uniq_key}"


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """A decoded ``HandleV1``.

    Attributes:
        topic: the message's real topic.
        broker_name: the broker holding it.
        timestamp: the ``timestamp`` text (its ``TIMER_OUT_MS`` + 1, epoch ms, as RocketMQ writes it).
        message_id: its UNIQ_KEY.
    """

    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        """The handle text (``HandleV1.buildHandle``)."""
        raw = " ".join((VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii")

    @classmethod
    def for_timer(cls, real_topic: str, broker_name: str, timer_out_ms: int, uniq_key: str) -> RecallHandle:
        """The handle of a timer message due at ``timer_out_ms`` (the handle says + 1, as RocketMQ)."""
        return cls(real_topic, broker_name, str(timer_out_ms + 1), uniq_key)

    @property
    def timestamp_ms(self) -> int:
        """The timestamp as an int, -1 when it is not one (``NumberUtils.toLong(.., -1)``)."""
        text = self.timestamp
        return int(text) if text.isascii() and text.lstrip("-").isdigit() else -1

    @classmethod
    def decode(cls, handle: str | None) -> RecallHandle:
        """Parse a handle (``RecallMessageHandle.decodeHandle``).

        Raises:
            RecallHandleError: empty, not base64, not ``v1`` or fewer than five fields.
        """
        if not handle:
            raise RecallHandleError("recall handle is invalid")
        try:
            raw = base64.urlsafe_b64decode(
                handle + "=" * (-len(handle) % 4)
            ).decode()  # Java: padding optional
        except (binascii.Error, ValueError):
            raise RecallHandleError("recall handle is invalid") from None
        items = raw.split(" ")
        if items[0] != VERSION_1 or len(items) < 5:
            raise RecallHandleError("recall handle is invalid")
        return cls(items[1], items[2], items[3], items[4])
