"""The producer's hand-written SEND_MESSAGE_V2 ext-fields and batch bodies equal the generic codecs' bytes."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.api import ClientAPI, send_v2_ext_fields
from tidemq.client.producer.producer import AsyncProducer
from tidemq.errors import ClientError, ProtocolError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand, encode_command
from tidemq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from tidemq.protocol.message import Message, MessageQueue
from tidemq.protocol.message_codec import encode_batch_body
from tidemq.remoting.client import RemotingClient

_INT32 = st.integers(-(2**31), 2**31 - 1)


@given(
    group=st.text(min_size=1, max_size=20),
    topic=st.text(min_size=1, max_size=20),
    queue_id=_INT32,
    sys_flag=_INT32,
    born=st.integers(0, 2**62),
    flag=_INT32,
    properties=st.none() | st.text(max_size=40),
    reconsume=st.none() | _INT32,
    unit_mode=st.booleans(),
    batch=st.booleans(),
    max_reconsume=st.none() | _INT32,
    bname=st.none() | st.text(min_size=1, max_size=10),
)
def test_send_v2_ext_fields_match_the_header_codec(
    group: str,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born: int,
    flag: int,
    properties: str | None,
    reconsume: int | None,
    unit_mode: bool,
    batch: bool,
    max_reconsume: int | None,
    bname: str | None,
) -> None:
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=born,
        flag=flag,
        properties=properties,
        reconsume_times=reconsume,
        unit_mode=unit_mode,
        batch=batch,
        max_reconsume_times=max_reconsume,
        broker_name=bname,
    )
    fast = send_v2_ext_fields(header)
    slow = header.to_v2_ext_fields()
    assert fast == slow
    assert list(fast) == list(slow)  # same key order: the JSON header bytes are unchanged


def test_build_send_request_code_language_and_bytes() -> None:
    api = ClientAPI(RemotingClient(), language="PYTHON")
    header = SendMessageRequestHeader(
        producer_group="pg",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp=1,
        flag=0,
        properties="UNIQ_KEY\x01AB",
        reconsume_times=0,
        batch=True,
    )
    req = api.build_send_request(header, b"body")
    assert req.code == RequestCode.SEND_BATCH_MESSAGE
    assert req.language == "PYTHON" and req.flag == 0 and req.opaque > 0
    assert req.body == b"body"
    expected = (
        b'{"code":320,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1",'
        b'"h":"0","i":"UNIQ_KEY\\u0001AB","j":"0","k":"false","m":"true"},"flag":0,"language":"PYTHON",'
    )
    assert expected in encode_command(req)


def _batch_strategy() -> st.SearchStrategy[list[Message]]:
    text = st.text(
        alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8
    )
    msg = st.builds(
        lambda body, flag, props, tags: Message("BatchT", body, tags=tags, flag=flag, properties=props),
        st.binary(min_size=1, max_size=64),
        _INT32,
        st.dictionaries(text.filter(bool), text, max_size=3),
        st.none() | text.filter(bool),
    )
    return st.lists(msg, min_size=1, max_size=8)


@given(_batch_strategy())
def test_prepare_batch_body_is_encode_batch_body(msgs: list[Message]) -> None:
    """The producer's one-pass batch encoding gives the protocol codec's bytes, and UNIQ_KEYs."""
    producer = AsyncProducer(producer_group="pg")
    carrier, body, uniq = producer.prepare_batch(msgs)
    assert body == encode_batch_body(msgs)  # msgs now carry their UNIQ_KEYs
    assert carrier.topic == "BatchT" and carrier.body == body
    assert uniq == ",".join(str(m.unique_key) for m in msgs)
    assert all(m.unique_key for m in msgs)


def test_prepare_batch_keeps_given_unique_keys_and_makes_the_others() -> None:
    """A message that has a UNIQ_KEY keeps it; the others get new, distinct ones, in order."""
    msgs = [
        Message("BatchT", b"a"),
        Message("BatchT", b"b", properties={"UNIQ_KEY": "MINE"}),
        Message("BatchT", b"c"),
    ]
    _, body, uniq = AsyncProducer(producer_group="pg").prepare_batch(msgs)
    ids = uniq.split(",")
    assert ids[1] == "MINE" and len({ids[0], ids[2]}) == 2 and all(len(i) == 32 for i in (ids[0], ids[2]))
    assert [m.unique_key for m in msgs] == ids
    assert body == encode_batch_body(msgs)


def test_prepare_batch_errors() -> None:
    producer = AsyncProducer(producer_group="pg")
    with pytest.raises(ClientError, match="at least one"):
        producer.prepare_batch([])
    with pytest.raises(ClientError, match="one topic"):
        producer.prepare_batch([Message("A", b"x"), Message("B", b"x")])
    with pytest.raises(ClientError, match="delayed"):
        producer.prepare_batch([Message("A", b"x", delay_time_level=2)])
    with pytest.raises(ClientError, match="retry-topic"):
        producer.prepare_batch([Message("%RETRY%g", b"x")])
    with pytest.raises(ClientError, match="empty"):
        producer.prepare_batch([Message("A", b"")])
    with pytest.raises(ClientError, match="max_message_size"):
        AsyncProducer(producer_group="pg", max_message_size=10).prepare_batch([Message("A", b"x" * 8)] * 2)
    with pytest.raises(ProtocolError):
        producer.prepare_batch([Message("A", b"x", properties={"k": "v" * 40000})])
    with pytest.raises(ClientError, match=r"illegal|topic"):
        producer.prepare_batch([Message("bad topic", b"x")])


@given(
    offset=st.integers(0, 2**62),
    sys_flag=st.integers(0, 31),
    commit=st.integers(0, 2**62),
    subscription=st.none() | st.text(max_size=10),
    expression_type=st.none() | st.sampled_from(["TAG", "SQL92"]),
)
def test_pull_request_ext_fields_match_the_header_codec(
    offset: int, sys_flag: int, commit: int, subscription: str | None, expression_type: str | None
) -> None:
    """ClientAPI.pull_message writes PullMessageRequestHeader's ext-fields by hand: same keys, order, values."""
    api = ClientAPI(RemotingClient(), language="PYTHON")
    sent: list[RemotingCommand] = []

    async def fake_invoke(addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        sent.append(request)
        return RemotingCommand.create_response(
            ResponseCode.PULL_NOT_FOUND, ext_fields={"nextBeginOffset": "5"}
        )

    api.invoke = fake_invoke  # type: ignore[method-assign]
    mq = MessageQueue("T", "broker-a", 3)
    asyncio.run(
        api.pull_message(
            "addr",
            consumer_group="cg",
            mq=mq,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=sys_flag,
            commit_offset=commit,
            suspend_timeout_millis=15000,
            subscription=subscription,
            sub_version=7,
            expression_type=expression_type,
            timeout=1.0,
        )
    )
    expected = PullMessageRequestHeader(
        consumer_group="cg",
        topic="T",
        queue_id=3,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=sys_flag,
        commit_offset=commit,
        suspend_timeout_millis=15000,
        subscription=subscription,
        sub_version=7,
        expression_type=expression_type,
    ).to_ext_fields()
    (request,) = sent
    assert request.code == RequestCode.PULL_MESSAGE and request.language == "PYTHON"
    assert list(request.ext_fields.items()) == list(expected.items())
