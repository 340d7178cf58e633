"""Every frame the real C++ client sent (tests/fixtures/cpp_client) decodes and re-encodes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tidemq.protocol import body as b
from tidemq.protocol import headers as h
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand, encode_command, ext_value_to_str
from tidemq.protocol.filter import tags_hash

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cpp_client"


def load_frames() -> list[dict[str, Any]]:
    frames = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "frame" and record.get("direction") == "c2s":
                frames.append(record)
    return frames


FRAMES = load_frames()


def decode_one(raw: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    cmds = decoder.feed(raw)
    assert len(cmds) == 1 and decoder.buffered == 0
    return cmds[0]


def meaning(cmd: RemotingCommand) -> tuple[object, ...]:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.body)


def test_fixtures_are_present() -> None:
    """The capture files exist and hold the client's requests."""
    assert len(FRAMES) > 100
    codes = {f["header"]["code"] for f in FRAMES}
    assert {10, 11, 14, 15, 34, 35, 36, 38, 41, 42, 105} <= codes


@pytest.mark.parametrize("record", FRAMES, ids=lambda r: f"{r['scenario']}-{r['seq']}")
def test_cpp_frame_decodes_and_round_trips(record: dict[str, Any]) -> None:
    """The frame decodes to what the capture says, its header/body parse, and re-encoding keeps it."""
    cmd = decode_one(base64.b64decode(record["raw_b64"]))
    header = record["header"]
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.language) == (
        header["code"],
        header["flag"],
        header["opaque"],
        header["language"],
    )
    expected_ext = {k: ext_value_to_str(v) for k, v in (header.get("extFields") or {}).items()}
    assert cmd.ext_fields == {k: v for k, v in expected_ext.items() if v is not None}
    assert cmd.body == bytes.fromhex(record.get("body_hex") or "")
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())

    check_typed(cmd)

    again = decode_one(encode_command(cmd))
    assert meaning(again) == meaning(cmd)


def check_typed(cmd: RemotingCommand) -> None:
    """Parse the typed header and body of a client request; assert what a broker relies on."""
    if cmd.is_response:
        if cmd.body:
            assert isinstance(b.fastjson_loads(cmd.body), dict)
        return
    header_cls = h.HEADER_BY_REQUEST_CODE.get(cmd.code)
    if header_cls is not None:
        header = header_cls.from_command(cmd)
        assert header.to_ext_fields()  # the typed header writes back
    if cmd.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        send = h.SendMessageRequestHeader.from_command(cmd)
        assert send.topic and send.producer_group and send.default_topic == "TBW102"
        assert send.born_timestamp > 0
    elif cmd.code == RequestCode.PULL_MESSAGE:
        pull = h.PullMessageRequestHeader.from_command(cmd)
        assert pull.max_msg_nums > 0 and pull.suspend_timeout_millis in (15000, 20000)
        if h.PullSysFlag.has_subscription_flag(pull.sys_flag):
            assert pull.subscription is not None
    elif cmd.code == RequestCode.HEART_BEAT:
        hb = b.HeartbeatData.decode(cmd.body)
        assert hb.client_id
        for consumer in hb.consumer_data_set:
            assert consumer.message_model in (b.MessageModel.CLUSTERING, b.MessageModel.BROADCASTING)
            for sub in consumer.subscription_data_set:
                assert sub.sub_version >= 0
                assert sub.code_set == {tags_hash(t) for t in sub.tags_set}
        assert b.HeartbeatData.decode(hb.encode()) == hb
    elif cmd.code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        lock = b.LockBatchRequestBody.decode(cmd.body)
        assert lock.mq_set and lock.consumer_group and lock.client_id


def frames_with(code: int) -> list[RemotingCommand]:
    return [
        decode_one(base64.b64decode(f["raw_b64"]))
        for f in FRAMES
        if f["header"]["code"] == code and not f["header"]["flag"] & 1
    ]


def test_cpp_batch_send_is_code_10_with_batch_1() -> None:
    """C++ 1.x sends batches as SEND_MESSAGE with batch "1"; the header says batch."""
    sends = [h.SendMessageRequestHeader.from_command(c) for c in frames_with(RequestCode.SEND_MESSAGE)]
    assert any(s.batch for s in sends)
    assert all(s.unit_mode is False for s in sends)


def test_cpp_heartbeat_enums_and_tags() -> None:
    """C++ heartbeats use ordinals and string subVersion; tag codes are recomputed, not [0,0]."""
    beats = [b.HeartbeatData.decode(c.body) for c in frames_with(RequestCode.HEART_BEAT)]
    subs = [s for hb in beats for cd in hb.consumer_data_set for s in cd.subscription_data_set]
    tagged = [s for s in subs if s.tags_set]
    assert tagged, "the tag-filter scenario subscribes to TagA || TagC"
    assert all(s.code_set == {tags_hash(t) for t in s.tags_set} for s in tagged)
    models = {cd.message_model for hb in beats for cd in hb.consumer_data_set}
    assert models == {b.MessageModel.CLUSTERING, b.MessageModel.BROADCASTING}


def test_cpp_unregister_has_empty_consumer_group() -> None:
    """UNREGISTER_CLIENT from a producer carries consumerGroup "" (not absent)."""
    headers = [
        h.UnregisterClientRequestHeader.from_command(c) for c in frames_with(RequestCode.UNREGISTER_CLIENT)
    ]
    assert any(x.producer_group and x.consumer_group == "" for x in headers)
