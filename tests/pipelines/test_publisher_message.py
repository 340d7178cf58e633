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


def test_encoded_flights_are_what_send_batch_sends() -> None:
    """encode_flights gives the bytes and ids prepare_batch gives for the same flights' messages
    carrying the same UNIQ_KEYs (the SEND_BATCH_MESSAGE body is unchanged on the wire)."""
    from tidemq.client.producer.producer import AsyncProducer
    from tidemq.pipelines.publisher import encode_flights
    from tidemq.protocol.message import MessageConst

    fms = [
        FlightMessage(id=i, carrier="UA", tag=tag, key=key, body=f'{{"id":{i}}}'.encode(), dep_delay=None)
        for i, (tag, key) in enumerate(
            (("EWR", "UA1545"), ("", "AA1"), ("JFK", ""), ("", ""), ("LGA", "B6 9"))
        )
    ]
    enc = encode_flights(fms)
    assert len(enc) == len(fms) == len(set(enc.uniq_ids))
    msgs = [flight_message("flights", fm) for fm in fms]
    for m, uid in zip(msgs, enc.uniq_ids, strict=True):
        m.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uid
    _, body, uniq = AsyncProducer(producer_group="pg").prepare_batch(msgs)
    assert b"".join(enc.records) == body
    assert ",".join(enc.uniq_ids) == uniq
