"""Typed headers: ext-field round trips, Java-style strings, tolerant parsing, clear errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.errors import ProtocolError
from tidemq.protocol import headers as h
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import HeaderError, SendMessageRequestHeader
from tidemq.protocol.headers.send import V2_FIELD_NAMES

ALL_HEADERS = sorted(
    {
        obj
        for obj in vars(h).values()
        if isinstance(obj, type) and issubclass(obj, h.CommandHeader) and obj is not h.CommandHeader
    },
    key=lambda c: c.__name__,
)


def strategy_for(cls: type[h.CommandHeader]) -> st.SearchStrategy[Any]:
    """A hypothesis strategy building any valid instance of ``cls``."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        kind, required = f.metadata["kind"], f.metadata["required"]
        base: st.SearchStrategy[Any] = {
            "str": st.text(max_size=20),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "bool": st.booleans(),
        }[kind]
        kwargs[f.name] = base if required else (st.none() | base)
    return st.builds(cls, **kwargs)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=25)
@given(data=st.data())
def test_every_header_round_trips(cls: type[h.CommandHeader], data: st.DataObject) -> None:
    """to_ext_fields then from_ext_fields gives the same header, with str values only."""
    header = data.draw(strategy_for(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    again = cls.from_ext_fields(ext)
    for f in dataclasses.fields(cls):
        before, after = getattr(header, f.name), getattr(again, f.name)
        if before is None:
            assert after == f.default or after is None
        elif f.metadata["kind"] != "str" and before == "":
            continue
        else:
            assert after == before, f.name


def pull_ext(**override: str) -> dict[str, str]:
    ext = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "3",
        "queueOffset": "100",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1795221803772",
        "AccessKey": "",
        "Signature": "xyz",
    }
    ext.update(override)
    return ext


def test_java_style_strings() -> None:
    """Numbers are decimal, booleans lower-case, None fields absent."""
    header = h.ConsumerSendMsgBackRequestHeader(offset=2**40, group="G", delay_level=-1, unit_mode=True)
    assert header.to_ext_fields() == {
        "offset": "1099511627776",
        "group": "G",
        "delayLevel": "-1",
        "unitMode": "true",
    }


def test_pull_header_parses_and_ignores_acl_fields() -> None:
    """A pull header as the C++ client sends it parses; AccessKey/Signature are ignored."""
    hdr = h.PullMessageRequestHeader.from_ext_fields(pull_ext())
    assert (hdr.queue_id, hdr.queue_offset, hdr.max_msg_nums) == (3, 100, 32)
    assert hdr.subscription is None and hdr.expression_type is None
    assert h.PullSysFlag.has_suspend_flag(hdr.sys_flag) and h.PullSysFlag.has_subscription_flag(hdr.sys_flag)
    assert not h.PullSysFlag.has_commit_offset_flag(hdr.sys_flag)


@pytest.mark.parametrize(
    ("override", "text"),
    [
        ({"queueId": "4.0"}, "field 'queueId' must be a 32-bit integer, got '4.0'"),
        ({"queueOffset": "abc"}, "field 'queueOffset' must be a 64-bit integer, got 'abc'"),
        ({"queueId": "2147483648"}, "'2147483648' is out of 32-bit range"),
        ({"queueId": ""}, "'queueId' must be a 32-bit integer"),
    ],
)
def test_unparsable_values_name_field_and_value(override: dict[str, str], text: str) -> None:
    """A bad value raises HeaderError naming the header, the field and the value."""
    with pytest.raises(h.HeaderError) as info:
        h.PullMessageRequestHeader.from_ext_fields(pull_ext(**override))
    assert text in str(info.value)
    assert str(info.value).startswith("PullMessageRequestHeader")
    assert isinstance(info.value, ProtocolError)


def test_missing_required_field() -> None:
    """A missing @CFNotNull field raises HeaderError with its wire name."""
    ext = pull_ext()
    del ext["topic"]
    with pytest.raises(h.HeaderError, match="missing required field 'topic'") as info:
        h.PullMessageRequestHeader.from_ext_fields(ext)
    assert info.value.field == "topic" and info.value.value is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("false", False), ("TRUE", True), ("1", True), ("0", False)],
)
def test_boolean_forms(raw: str, expected: bool) -> None:
    """Booleans accept Java's true/false (any case) and C++'s 1/0."""
    hdr = h.GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": raw})
    assert hdr.accept_standard_json_only is expected


def test_bad_boolean_and_empty_optional() -> None:
    """'yes' is rejected; an empty optional number counts as absent."""
    with pytest.raises(h.HeaderError, match="must be a boolean, got 'yes'"):
        h.GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "yes"})
    hdr = h.ConsumerSendMsgBackRequestHeader.from_ext_fields(
        {"offset": "1", "group": "G", "delayLevel": "0", "maxReconsumeTimes": ""}
    )
    assert hdr.max_reconsume_times is None


def test_numbers_as_json_values_are_accepted() -> None:
    """ext values that arrive as ints/bools (ali-ons) parse like their strings."""
    hdr = h.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": 2})
    assert hdr.queue_id == 2


def send_header() -> h.SendMessageRequestHeader:
    return h.SendMessageRequestHeader(
        producer_group="PG",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp=1795221783856,
        flag=0,
        properties="WAIT\x01true\x02",
        reconsume_times=0,
        max_reconsume_times=16,
    )


def test_send_header_v1_and_v2_forms() -> None:
    """The same header reads back from the long (code 10) and one-letter (code 310) forms."""
    header = send_header()
    v1 = RemotingCommand.create_request(RequestCode.SEND_MESSAGE, header.to_ext_fields())
    v2 = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields())
    assert h.SendMessageRequestHeader.from_command(v1) == header
    assert h.SendMessageRequestHeader.from_command(v2) == header
    assert header.to_v2_ext_fields()["b"] == "T" and header.to_v2_ext_fields()["l"] == "16"


def test_send_batch_code_implies_batch() -> None:
    """SEND_BATCH_MESSAGE (320) is a batch even if 'm' is absent; V2 'm=true' is a batch too."""
    ext = send_header().to_v2_ext_fields()
    del ext["m"]
    batch = RemotingCommand.create_request(RequestCode.SEND_BATCH_MESSAGE, ext)
    assert h.SendMessageRequestHeader.from_command(batch).batch
    ext["m"] = "true"
    v2 = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, ext)
    assert h.SendMessageRequestHeader.from_command(v2).batch


def test_v2_errors_name_the_letter_and_the_field() -> None:
    """A bad one-letter field is reported as e.g. 'e' (queueId)."""
    ext = send_header().to_v2_ext_fields()
    ext["e"] = "x"
    cmd = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, ext)
    with pytest.raises(h.HeaderError, match=r"field 'e' \(queueId\) must be a 32-bit integer, got 'x'"):
        h.SendMessageRequestHeader.from_command(cmd)


def test_send_header_refuses_other_codes() -> None:
    """from_command on a non-send request says so."""
    with pytest.raises(h.HeaderError, match="not a send request"):
        h.SendMessageRequestHeader.from_command(RemotingCommand.create_request(RequestCode.PULL_MESSAGE))


def test_send_response_header_carries_region_and_trace() -> None:
    """The send response always has MSG_REGION and TRACE_ON (Java NPEs without extFields)."""
    ext = h.SendMessageResponseHeader(msg_id="AB", queue_id=1, queue_offset=7).to_ext_fields()
    assert ext == {
        "msgId": "AB",
        "queueId": "1",
        "queueOffset": "7",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


def test_pull_response_header_all_fields_present() -> None:
    """suggestWhichBrokerId, nextBeginOffset, minOffset, maxOffset are always written."""
    ext = h.PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=5, min_offset=0, max_offset=9
    ).to_ext_fields()
    assert ext == {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "0", "maxOffset": "9"}


def test_reset_offset_is_force_wire_name() -> None:
    """ResetOffsetRequestHeader's flag travels as 'isForce' and is required."""
    hdr = h.ResetOffsetRequestHeader(topic="T", group="G", timestamp=-1, is_force=True)
    assert hdr.to_ext_fields()["isForce"] == "true"
    with pytest.raises(h.HeaderError, match="'isForce'"):
        h.ResetOffsetRequestHeader.from_ext_fields({"topic": "T", "group": "G", "timestamp": "-1"})


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_pull_sys_flag_build_and_has(
    commit: bool, suspend: bool, sub: bool, cls_filter: bool, lite: bool
) -> None:
    """build_sys_flag and the has_* helpers agree, and clearing commit keeps the rest."""
    flag = h.PullSysFlag.build_sys_flag(commit, suspend, sub, cls_filter, lite)
    assert h.PullSysFlag.has_commit_offset_flag(flag) is commit
    assert h.PullSysFlag.has_suspend_flag(flag) is suspend
    assert h.PullSysFlag.has_subscription_flag(flag) is sub
    assert h.PullSysFlag.has_class_filter_flag(flag) is cls_filter
    assert h.PullSysFlag.has_lite_pull_flag(flag) is lite
    cleared = h.PullSysFlag.clear_commit_offset_flag(flag)
    assert not h.PullSysFlag.has_commit_offset_flag(cleared)
    assert cleared | (flag & 1) == flag


def test_header_by_request_code_covers_the_client_requests() -> None:
    """Each request code a C++ client sends with a header has a header class."""
    for code in (10, 11, 14, 15, 30, 35, 36, 38, 105):
        assert code in h.HEADER_BY_REQUEST_CODE


_V2_VALUES = st.one_of(
    st.sampled_from(["", "0", "7", "-1", " 5", "true", "false", "TRUE", "2147483648", "1700000000123"]),
    st.from_regex(r"[0-9]{1,20}", fullmatch=True),
    st.text(max_size=6),
)


_V2_DIGITS = st.from_regex(r"[0-9]{1,9}", fullmatch=True)
_V2_MOSTLY_PLAIN = st.one_of(_V2_DIGITS, _V2_DIGITS, _V2_DIGITS, _V2_VALUES)


@settings(max_examples=300)
@given(
    st.one_of(
        st.fixed_dictionaries(
            {k: _V2_MOSTLY_PLAIN for k in "abcdefgh"}, optional={k: _V2_VALUES for k in "ijklmnz"}
        ),
        st.dictionaries(st.sampled_from("abcdefghijklmnz"), _V2_VALUES),
    )
)
def test_v2_send_header_plain_reading_matches_the_generic_parser(ext: dict[str, str]) -> None:
    """The field-by-field reading of a SEND_MESSAGE_V2 header gives what the generic parser gives,
    or steps aside (None) for it, which then parses the header or names the bad field."""
    plain = SendMessageRequestHeader._from_v2_plain(ext)
    try:
        generic = SendMessageRequestHeader._from_ext(ext, V2_FIELD_NAMES)
    except HeaderError:
        assert plain is None
        return
    assert plain is None or plain == generic
    assert SendMessageRequestHeader.from_v2_ext_fields(ext) == generic


@settings(max_examples=100)
@given(
    st.fixed_dictionaries(
        {k: st.one_of(_V2_DIGITS, st.integers(0, 9), st.none(), st.booleans()) for k in "abcdefgh"},
        optional={k: st.one_of(_V2_VALUES, st.integers(0, 9), st.none()) for k in "ijklmn"},
    )
)
def test_v2_send_header_plain_reading_steps_aside_for_values_that_are_not_str(ext: dict) -> None:
    """Values other than str (an in-process caller's dict) get the generic parser's answer."""
    plain = SendMessageRequestHeader._from_v2_plain(ext)
    try:
        generic = SendMessageRequestHeader._from_ext(ext, V2_FIELD_NAMES)
    except HeaderError:
        assert plain is None
        return
    assert plain is None or plain == generic


def test_v2_send_header_as_clients_send_it_is_read_plainly() -> None:
    """A header as the C++ and tidemq clients send it takes the field-by-field reading."""
    ext = {
        "a": "pg",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000123",
        "h": "0",
        "i": "UNIQ_KEY\x01abc\x02WAIT\x01true",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    header = SendMessageRequestHeader._from_v2_plain(ext)
    assert header == SendMessageRequestHeader._from_ext(ext, V2_FIELD_NAMES)
    assert header is not None and header.born_timestamp == 1700000000123 and header.queue_id == 3


_PULL_KEYS = (
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subVersion",
)
_PULL_DIGITS = st.from_regex(r"[0-9]{1,18}", fullmatch=True)
_PULL_MOSTLY_PLAIN = st.one_of(_PULL_DIGITS, _PULL_DIGITS, _PULL_DIGITS, _V2_VALUES)


@settings(max_examples=300)
@given(
    st.one_of(
        st.fixed_dictionaries(
            {k: _PULL_MOSTLY_PLAIN for k in _PULL_KEYS},
            optional={k: _V2_VALUES for k in ("subscription", "expressionType", "other")},
        ),
        st.dictionaries(st.sampled_from([*_PULL_KEYS, "subscription", "expressionType"]), _V2_VALUES),
    )
)
def test_pull_header_plain_reading_matches_the_generic_parser(ext: dict[str, str]) -> None:
    """The field-by-field reading of a PULL_MESSAGE header gives what the generic parser gives, or
    steps aside (None) for it, which then parses the header or names the bad field."""
    plain = h.PullMessageRequestHeader._from_plain(ext)
    try:
        generic = h.PullMessageRequestHeader._from_ext(ext, None)
    except HeaderError as exc:
        assert plain is None
        with pytest.raises(HeaderError) as info:
            h.PullMessageRequestHeader.from_ext_fields(ext)
        assert info.value.field == exc.field
        return
    assert plain is None or plain == generic
    assert h.PullMessageRequestHeader.from_ext_fields(ext) == generic


def test_pull_header_as_clients_send_it_is_read_plainly() -> None:
    """A pull as the C++ and tidemq clients send it takes the field-by-field reading."""
    ext = {
        "consumerGroup": "cg",
        "topic": "T",
        "queueId": "3",
        "queueOffset": "1234567",
        "maxMsgNums": "32",
        "sysFlag": "3",
        "commitOffset": "1234000",
        "suspendTimeoutMillis": "15000",
        "subscription": "*",
        "subVersion": "1700000000123",
        "expressionType": "TAG",
    }
    header = h.PullMessageRequestHeader._from_plain(ext)
    assert header == h.PullMessageRequestHeader._from_ext(ext, None)
    assert header is not None and header.queue_offset == 1234567 and header.max_msg_nums == 32


@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers())
def test_pull_response_fields_are_the_headers_ext_fields(a: int, b: int, c: int, d: int) -> None:
    fields = h.pull_response_fields(a, b, c, d)
    expect = h.PullMessageResponseHeader(
        suggest_which_broker_id=a, next_begin_offset=b, min_offset=c, max_offset=d
    ).to_ext_fields()
    assert fields == expect and list(fields) == list(expect)
