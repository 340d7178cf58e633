"""The publisher's per-flight message equals the general constructor's (no broker needed)."""

from __future__ import annotations

from tidemq.pipelines.flights_data import FlightMessage
from tidemq.pipelines.publisher import flight_message
from tidemq.protocol.message import Message


def _slots(m: Message) -> dict[str, object]:
    names = {n for cls in type(m).__mro__ for n in getattr(cls, "__slots__", ())}
    return {n: getattr(m, n) for n in sorted(names)}  # an unset slot raises AttributeError


def test_flight_message_equals_the_general_constructor() -> None:
    for tag, key in (("EWR", "UA1545"), ("", "AA1"), ("JFK", "")):
        fm = FlightMessage(id=1, carrier="UA", tag=tag, key=key, body=b'{"id":1}', dep_delay=None)
        fast = flight_message("flights", fm)
        slow = Message("flights", fm.body, tags=fm.tag, keys=fm.key)
        assert type(fast) is Message
        assert _slots(fast) == _slots(slow)
        assert list(fast.properties) == list(slow.properties)  # same order on the wire
