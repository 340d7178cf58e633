"""Pending timer cancellations (RocketMQ 5's ``TIMER_DEL_UNIQKEY`` delete list, kept durable).

A cancellation is a message in ``rmq_sys_wheel_timer`` carrying ``TIMER_DEL_UNIQKEY`` =
``realTopic+uniqKey`` (:func:`tidemq.protocol.recall.delete_key`) and, normally, the delivery time of
the message it cancels; the dispatcher flags its consume-queue tags code with
:data:`~tidemq.protocol.topic.TIMER_CANCEL_FLAG` and the timer log keeps that flag in the record's
``deliver_ms`` (a *marker* record). :class:`TimerCancels` is the set of keys of the markers not yet
due: a timer message whose ``REAL_TOPIC+UNIQ_KEY`` is in it is marked CANCELLED instead of
delivered (or rolled); a marker leaves the set when its own slot comes.

Unlike RocketMQ (which matches a marker only against the messages of its own wheel slot), the set
spans slots: a message due before its marker is cancelled too. The set is small (one entry per
pending marker) and durable: it is in the checkpoint, a wheel rebuild reads it back from the
PENDING marker records of the timer log, and a load notes the markers stored but not yet enqueued
(the timer consume queue's tail) before anything is delivered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tidemq.protocol.message import MessageConst
from tidemq.protocol.recall import delete_key
from tidemq.protocol.topic import TIMER_CANCEL_FLAG

if TYPE_CHECKING:
    from tidemq.protocol.message import MessageExt

__all__ = ["TimerCancels", "due_of", "is_marker"]

_DUE_MASK = ~TIMER_CANCEL_FLAG


def is_marker(deliver_field: int) -> bool:
    """Whether a record's ``deliver_ms`` field (or a timer consume-queue tags code) is a cancellation's."""
    return bool(deliver_field & TIMER_CANCEL_FLAG)


def due_of(deliver_field: int) -> int:
    """The due time (epoch ms) in a record's ``deliver_ms`` field, without the cancellation flag."""
    return deliver_field & _DUE_MASK


class TimerCancels:
    """Keys (``realTopic+uniqKey``) of pending cancellations -> the marker's due time (ms).

    Not thread-safe: owned by the timer store (its event loop).
    """

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def add(self, key: str, due_ms: int) -> None:
        """A cancellation of ``key`` whose marker is due at ``due_ms`` (the later one wins)."""
        if due_ms > self._keys.get(key, -1):
            self._keys[key] = due_ms

    def add_marker(self, marker: MessageExt, due_ms: int) -> str | None:
        """:meth:`add` the key a marker message carries; returns it (None: the property is empty)."""
        key = marker.properties.get(MessageConst.PROPERTY_TIMER_DEL_UNIQKEY)
        if key:
            self.add(key, due_ms)
        return key or None

    def marker_done(self, marker: MessageExt, due_ms: int) -> None:
        """The marker's own time came: its key leaves the set (unless a later marker holds it)."""
        key = marker.properties.get(MessageConst.PROPERTY_TIMER_DEL_UNIQKEY)
        if key and self._keys.get(key, due_ms + 1) <= due_ms:
            del self._keys[key]

    def cancels(self, msg: MessageExt) -> bool:
        """Whether the timer message ``msg`` (in ``rmq_sys_wheel_timer``, with ``REAL_TOPIC``) is cancelled."""
        if not self._keys:
            return False
        props = msg.properties
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
        return uniq is not None and topic is not None and delete_key(topic, uniq) in self._keys

    def clear(self) -> None:
        """Forget every key (a rebuild reads them again from the log)."""
        self._keys.clear()

    def snapshot(self) -> dict[str, int]:
        """A copy for the checkpoint (``timercheck.json`` ``cancels``)."""
        return dict(self._keys)

    def restore(self, data: object) -> None:
        """Load a checkpoint's ``cancels`` (entries that are not ``str -> int`` are ignored)."""
        if isinstance(data, Mapping):
            for key, due in data.items():
                if isinstance(key, str) and isinstance(due, int):
                    self.add(key, due)
