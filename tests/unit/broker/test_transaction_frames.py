"""The C++ 2.x client's transaction frames (tests/fixtures/cpp2_client) and the pure record builders."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tidemq.broker.transaction.bridge import (
    check_body,
    committed_batch,
    committed_message,
    copy_batch,
    half_properties_text,
    op_batch,
    op_message,
    origin_of,
    parse_op_body,
)
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import FrameDecoder, RemotingCommand
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from tidemq.protocol.message import MessageExt, string_to_properties
from tidemq.protocol.message_codec import decode_message

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "cpp2_client" / "cpp2_client-stub-transaction.jsonl"
)


def frames(code: int) -> list[tuple[dict[str, Any], RemotingCommand]]:
    out = []
    for line in FIXTURE.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") != "frame" or record["header"].get("code") != code:
            continue
        decoder = FrameDecoder()
        (cmd,) = decoder.feed(base64.b64decode(record["raw_b64"]))
        out.append((record, cmd))
    return out


def test_cpp2_end_transaction_frames_parse() -> None:
    """Every value a string, fromTransactionCheck "0"/"1", transactionId "" and flag 0 (not oneway)."""
    ends = [EndTransactionRequestHeader.from_command(cmd) for _, cmd in frames(RequestCode.END_TRANSACTION)]
    got = [
        (h.commit_log_offset, h.tran_state_table_offset, h.commit_or_rollback, h.from_transaction_check)
        for h in ends
    ]
    assert got == [(0, 0, 8, False), (272, 1, 12, False), (544, 2, 0, False), (816, 3, 8, True)]
    assert {h.producer_group for h in ends} == {"TxProducerGroup"}
    assert ends[0].transaction_id == "" and ends[3].transaction_id == "7F00000152AD121B148987447B900002"
    assert all(not cmd.is_oneway for _, cmd in frames(RequestCode.END_TRANSACTION))


def test_cpp2_half_sends_carry_tran_msg() -> None:
    """The three SEND_MESSAGE_V2 frames: sysFlag 4, TRAN_MSG=true, PGROUP, a mixed int/string header."""
    sends = frames(RequestCode.SEND_MESSAGE_V2)
    assert len(sends) == 3
    for _, cmd in sends:
        assert cmd.ext_fields["f"] in (4, "4")
        props = string_to_properties(str(cmd.ext_fields["i"]))
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "TxProducerGroup"


def test_check_header_is_sent_as_strings() -> None:
    """The broker's CHECK_TRANSACTION_STATE header: strings only (C++ 2.x reads nothing else)."""
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=3, commit_log_offset=816, msg_id="U", transaction_id="U", offset_msg_id="X"
    )
    fields = header.to_ext_fields()
    assert fields == {
        "tranStateTableOffset": "3",
        "commitLogOffset": "816",
        "msgId": "U",
        "transactionId": "U",
        "offsetMsgId": "X",
    }
    ((_, stub_check),) = frames(RequestCode.CHECK_TRANSACTION_STATE)
    parsed = CheckTransactionStateRequestHeader.from_command(stub_check)
    assert (parsed.commit_log_offset, parsed.tran_state_table_offset) == (816, 3)


def _half(queue_offset: int, props: dict[str, str]) -> MessageExt:
    return MessageExt(
        "RMQ_SYS_TRANS_HALF_TOPIC",
        b"body",
        properties=props,
        queue_offset=queue_offset,
        commit_log_offset=1000,
        sys_flag=0,
        born_timestamp=1,
        born_host="127.0.0.1:1",
        store_timestamp=2,
        store_host="127.0.0.1:2",
    )


def test_records_half_copy_op_commit() -> None:
    """Half text, copies (origin + check count), op bodies (4.9 and 5.x forms) and the committed message."""
    text = half_properties_text("TAGS\x01a\x02TRAN_MSG\x01true\x02", "T", 3)
    assert string_to_properties(text) == {"TAGS": "a", "TRAN_MSG": "true", "REAL_TOPIC": "T", "REAL_QID": "3"}
    half = _half(17, string_to_properties(text))
    assert origin_of(half) == 17
    copy = copy_batch(half, count_check=True)
    copy_props = string_to_properties(copy.properties[0])
    assert copy_props["TRAN_PREPARED_QUEUE_OFFSET"] == "17" and copy_props["TRANSACTION_CHECK_TIMES"] == "1"
    assert op_message(half, "127.0.0.1:1").body == b"17"
    later = _half(25, copy_props)
    assert origin_of(later) == 17 and op_message(later, "127.0.0.1:1").body == b"25,17"
    assert parse_op_body(b"17,18,") == [17, 18] and parse_op_body(b"x") == []
    real = committed_message(half)
    assert (real.topic, real.queue_id, real.sys_flag & 0xC, real.prepared_transaction_offset) == (
        "T",
        3,
        8,
        1000,
    )
    assert "TRAN_MSG" not in real.properties and "REAL_TOPIC" not in real.properties
    fast = committed_batch(half)  # the END's fast path builds the same record
    assert fast is not None
    assert (fast.topic, fast.queue_id, fast.sys_flag, fast.prepared_transaction_offset) == (
        real.topic,
        real.queue_id,
        real.sys_flag,
        real.prepared_transaction_offset,
    )
    assert string_to_properties(fast.properties[0]) == real.properties
    assert committed_batch(_half(17, {**half.properties, "DELAY": "3"})) is None  # scheduled: general put
    op = op_batch(later, "127.0.0.1:1", False)
    assert (op.topic, op.bodies) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", [b"25,17"])
    assert op.properties == ["TAGS\x01d\x02TIDEMQ_TX_END\x0112"]  # the decision, for late ENDs
    assert op_message(later, "127.0.0.1:1").properties["TIDEMQ_TX_END"] == "8"
    decoded, _ = decode_message(check_body(_half(25, copy_props)))
    assert (decoded.topic, decoded.queue_id, decoded.queue_offset) == ("T", 3, 25)
    assert decoded.properties["TRANSACTION_CHECK_TIMES"] == "1"


def test_transaction_options_and_broker_conf_keys(tmp_path: Path) -> None:
    """--transaction-* flags and broker.conf's camelCase keys (ms) set the three fields; a bad value
    is one ConfigError naming the flag."""

    from tidemq.broker.config import BrokerConfig, load_broker_conf
    from tidemq.broker.config_check import ConfigError
    from tidemq.broker.transaction.options import apply_transaction_options
    from tidemq.store.config import MessageStoreConfig

    conf = tmp_path / "broker.conf"
    conf.write_text("transactionCheckInterval=30000\ntransactionTimeOut=2000\ntransactionCheckMax=3\n")
    broker, _store = load_broker_conf(conf)
    assert (broker.transaction_check_interval, broker.transaction_time_out, broker.transaction_check_max) == (
        30000,
        2000,
        3,
    )
    cfg = BrokerConfig()
    apply_transaction_options(
        cfg, MessageStoreConfig(), {"transaction_check_max": "7", "transaction_time_out": None}
    )
    assert (cfg.transaction_check_max, cfg.transaction_time_out) == (7, 6000)
    with pytest.raises(ConfigError, match="--transaction-check-max"):
        apply_transaction_options(cfg, MessageStoreConfig(), {"transaction_check_max": "0"})


def test_blocking_producer_refuses_a_coroutine_local_transaction() -> None:
    """The blocking producer runs execute_local_transaction on the caller's thread: a coroutine is
    refused at once (it would never be awaited)."""
    from tidemq.client import TransactionListener, TransactionProducer
    from tidemq.errors import ClientError

    class Async(TransactionListener):
        async def execute_local_transaction(self, msg: Any, arg: Any) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(ClientError, match="AsyncTransactionProducer"):
        TransactionProducer(Async(), producer_group="g")
