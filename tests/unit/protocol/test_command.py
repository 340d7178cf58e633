"""RemotingCommand frame codec: round trips, split delivery, binary headers, bad input."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.errors import LocalProtocolError, RemotingCommandError
from tidemq.protocol.codes import LanguageCode, RequestCode, SerializeType
from tidemq.protocol.command import (
    FrameDecoder,
    RemotingCommand,
    encode_command,
    encode_command_rocketmq,
)

text = st.text(st.characters(codec="utf-8"), max_size=30)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from([lc.name for lc in LanguageCode]),
    version=st.integers(0, 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | text.filter(bool),
    ext_fields=st.dictionaries(text.filter(bool), text, max_size=6),
    body=st.binary(max_size=300),
)


def meaning(cmd: RemotingCommand) -> tuple[object, ...]:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.body)


@given(st.lists(commands, min_size=1, max_size=5))
def test_json_frames_round_trip_in_one_feed(cmds: list[RemotingCommand]) -> None:
    """Several frames fed at once come back whole, equal and in order."""
    data = b"".join(encode_command(c) for c in cmds)
    out = FrameDecoder().feed(data)
    assert [meaning(c) for c in out] == [meaning(c) for c in cmds]


@settings(max_examples=30)
@given(st.lists(commands, min_size=1, max_size=3))
def test_frames_fed_byte_by_byte(cmds: list[RemotingCommand]) -> None:
    """A frame split at every byte boundary still decodes."""
    data = b"".join(encode_command(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    assert [meaning(c) for c in out] == [meaning(c) for c in cmds]
    assert decoder.buffered == 0


@given(st.lists(commands, min_size=1, max_size=4), st.data())
def test_frames_fed_in_random_chunks(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    """Random chunking (as TCP delivers) never changes what is decoded."""
    raw = b"".join(encode_command(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    prev = 0
    for cut in [*cuts, len(raw)]:
        out += decoder.feed(raw[prev:cut])
        prev = cut
    assert [meaning(c) for c in out] == [meaning(c) for c in cmds]
    assert all(type(c.body) is bytes for c in out)  # whether decoded from the chunk or the buffer
    assert decoder.buffered == 0


@given(commands)
def test_rocketmq_binary_header_round_trip(cmd: RemotingCommand) -> None:
    """The ROCKETMQ binary header (type byte 1) decodes to the same command."""
    raw = encode_command_rocketmq(cmd)
    assert raw[4] == SerializeType.ROCKETMQ
    (out,) = FrameDecoder().feed(raw)
    assert meaning(out) == meaning(cmd)
    assert out.serialize_type == SerializeType.ROCKETMQ


def test_json_header_layout_and_type_byte() -> None:
    """We emit type byte 0, a correct length prefix and a JSON header C++ can read."""
    cmd = RemotingCommand.create_request(RequestCode.HEART_BEAT, {"a": "1"}, b"xyz")
    raw = encode_command(cmd)
    length, word = struct.unpack(">iI", raw[:8])
    assert length == len(raw) - 4
    assert word >> 24 == 0
    header = orjson.loads(raw[8 : 8 + word])
    assert header["code"] == 34 and header["extFields"] == {"a": "1"} and header["language"] == "JAVA"
    assert raw.endswith(b"xyz")


def test_cpp_style_header_is_normalised() -> None:
    """Trailing newline, numeric and boolean ext values, ordinal language are accepted."""
    header = (
        b'{"code":11,"extFields":{"queueId":3,"flag":true,"x":null,"f":4.0},'
        b'"flag":0,"language":1,"opaque":7,"remark":"","version":63}\n'
    )
    frame = struct.pack(">iI", 4 + len(header), len(header)) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.language == "CPP"
    assert cmd.ext_fields == {"queueId": "3", "flag": "true", "f": "4"}
    assert cmd.remark == ""


def test_response_helpers() -> None:
    """A response copies the opaque, sets the response bit; oneway requests are flagged."""
    req = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, oneway=True)
    assert req.is_oneway and not req.is_response and req.opaque != 0
    resp = RemotingCommand.create_response(0, "ok").response_to(req)
    assert resp.opaque == req.opaque and resp.is_response


def test_oversized_frame_rejected_and_decoder_poisoned() -> None:
    """A length prefix over the cap raises at once, and the decoder refuses further input."""
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(RemotingCommandError, match="frame length 2000"):
        decoder.feed(struct.pack(">i", 2000) + b"\x00" * 10)
    good = encode_command(RemotingCommand(code=1))
    with pytest.raises(RemotingCommandError):
        decoder.feed(good)


def test_encode_refuses_frame_over_cap() -> None:
    """Building a frame larger than the cap is a local error, not a silent truncation."""
    with pytest.raises(LocalProtocolError, match="exceeds"):
        encode_command(RemotingCommand(code=1, body=b"x" * 100), max_frame_size=50)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (struct.pack(">i", 2), "outside"),
        (struct.pack(">i", -5), "outside"),
        (struct.pack(">iI", 8, 100) + b"{}{}", "exceeds frame length"),
        (struct.pack(">iI", 7, 3) + b"{x}", "not valid JSON"),
        (struct.pack(">iI", 6, 2) + b"[]", "JSON object"),
        (struct.pack(">iI", 6, (5 << 24) | 2) + b"{}", "unknown serialize type"),
        (struct.pack(">iI", 13, 9) + b'{"a":"b"}', "'code'"),
        (struct.pack(">iI", 7, (1 << 24) | 3) + b"\x00\x01\x00", "ROCKETMQ"),
    ],
)
def test_garbage_rejected_with_clear_error(frame: bytes, message: str) -> None:
    """Malformed frames raise RemotingCommandError saying what is wrong."""
    decoder = FrameDecoder()
    with pytest.raises(RemotingCommandError, match=message):
        decoder.feed(frame)
    with pytest.raises(RemotingCommandError):
        decoder.feed(b"")


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=200))
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    """Arbitrary bytes either decode, wait for more, or raise RemotingCommandError; nothing else."""
    decoder = FrameDecoder(max_frame_size=4096)
    try:
        decoder.feed(data)
    except RemotingCommandError:
        pass


def test_rocketmq_header_with_negative_lengths_is_rejected() -> None:
    """Negative key/value lengths in a binary header raise instead of looping forever."""
    fixed = struct.pack(">hbhii", 1, 0, 1, 1, 0) + struct.pack(">i", 0)
    ext = b"\xff\xff\xff\xff\xfb" + b"\x00" * 5
    header = fixed + struct.pack(">i", len(ext)) + ext
    frame = struct.pack(">iI", 4 + len(header), (1 << 24) | len(header)) + header
    with pytest.raises(RemotingCommandError, match="length -1 is invalid"):
        FrameDecoder().feed(frame)


@pytest.mark.timeout(30)
@settings(max_examples=300)
@given(st.binary(max_size=120))
def test_random_rocketmq_headers_terminate(header: bytes) -> None:
    """Any bytes behind a ROCKETMQ type byte decode or raise RemotingCommandError, promptly."""
    frame = struct.pack(">iI", 4 + len(header), (1 << 24) | len(header)) + header
    try:
        FrameDecoder().feed(frame)
    except RemotingCommandError:
        pass
