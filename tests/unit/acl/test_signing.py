"""Request signing: the real C++ client's captured frames verify; our signer round-trips."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl import (
    AclClientRPCHook,
    AclSigner,
    SessionCredentials,
    calculate_signature,
    combine_request_content,
)
from tidemq.protocol.command import FrameDecoder, RemotingCommand, encode_command

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cpp_client"
#: the keys the fixture recorder gave the C++ client (found by recomputing the signatures)
ACCESS_KEY = "HarnessAccessKey"
SECRET_KEY = "HarnessSecretKey123"


def cpp_acl_frames() -> list[dict[str, Any]]:
    frames = []
    for path in sorted(FIXTURES.glob("*acl*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "frame" and rec["direction"] == "c2s":
                frames.append(rec)
    return frames


FRAMES = cpp_acl_frames()


def test_fixture_frames_exist_and_carry_numbers() -> None:
    assert len(FRAMES) >= 20
    # the C++ client sends some ext fields as JSON numbers: the verifier must stringify them
    assert any(isinstance(v, int) for f in FRAMES for v in f["header"]["extFields"].values()), (
        "expected numeric ext fields in the C++ frames"
    )


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f"{f['scenario']}-{f['seq']}-{f.get('code_name')}")
def test_cpp_frame_signature_verifies(frame: dict[str, Any]) -> None:
    """Each captured C++ request, decoded by our frame decoder, verifies with the harness secret."""
    [cmd] = FrameDecoder().feed(base64.b64decode(frame["raw_b64"]))
    assert cmd.ext_fields["AccessKey"] == ACCESS_KEY
    assert cmd.ext_fields["OnsChannel"] == "ALIYUN"
    assert AclSigner.verify_request(cmd.ext_fields, cmd.body, SECRET_KEY)
    assert not AclSigner.verify_request(cmd.ext_fields, cmd.body, "WrongSecretKey")
    # the raw JSON values (numbers, not strings) give the same content
    raw_ext = frame["header"]["extFields"]
    assert combine_request_content(raw_ext, cmd.body) == combine_request_content(cmd.ext_fields, cmd.body)
    assert calculate_signature(combine_request_content(raw_ext, cmd.body), SECRET_KEY) == raw_ext["Signature"]


def test_java_style_stringification() -> None:
    assert combine_request_content({"b": 4, "a": True, "c": "x", "Signature": "zz"}, b"!") == b"true4x!"
    assert combine_request_content({"a": False, "n": None}, None) == b"false"


def test_keys_sort_by_utf16_code_units_like_java_treemap() -> None:
    # U+FF5E sorts before U+1F600 by code point, after it by UTF-16 code unit (0xD83D): Java's order
    ext = {"\uff5e": "tilde", "\U0001f600": "emoji"}
    assert sorted(ext) == ["\uff5e", "\U0001f600"]
    assert combine_request_content(ext, b"") == b"emojitilde"


def test_known_vector() -> None:
    # HMAC-SHA1("key", "The quick brown fox jumps over the lazy dog") = de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9
    assert (
        calculate_signature("The quick brown fox jumps over the lazy dog", "key")
        == base64.b64encode(bytes.fromhex("de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9")).decode()
    )


def test_unique_key_query_verifies_both_ways() -> None:
    ext = {"topic": "T", "key": "K", "_UNIQUE_KEY_QUERY": "true", "AccessKey": "ak"}
    java_client = calculate_signature(combine_request_content(ext, b""), "secret")  # includes the flag
    stock_verifier = calculate_signature(
        combine_request_content(ext, b"", exclude=("Signature", "_UNIQUE_KEY_QUERY")), "secret"
    )
    for sig in (java_client, stock_verifier):
        assert AclSigner.verify_request({**ext, "Signature": sig}, b"", "secret")
    assert not AclSigner.verify_request({**ext, "Signature": "bogus"}, b"", "secret")
    assert not AclSigner.verify_request(ext, b"", "secret")  # no Signature at all


ext_dicts = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k not in ("Signature", "AccessKey", "SecurityToken")),
    st.text(max_size=12),
    max_size=6,
)


@given(ext=ext_dicts, body=st.binary(max_size=64), token=st.none() | st.text(min_size=1, max_size=8))
def test_client_hook_signs_what_the_verifier_checks(
    ext: dict[str, str], body: bytes, token: str | None
) -> None:
    """Property: a request signed by the hook verifies after encode/decode, and any tampering fails."""
    hook = AclClientRPCHook(SessionCredentials("AccessKey1", "SecretKey1", token))
    req = RemotingCommand.create_request(10, dict(ext), body)
    hook.do_before_request("127.0.0.1:1", req)
    hook.do_before_request("127.0.0.1:1", req)  # re-signing (a retry) is idempotent
    assert req.ext_fields["AccessKey"] == "AccessKey1"
    assert ("SecurityToken" in req.ext_fields) == (token is not None)
    [wire] = FrameDecoder().feed(encode_command(req))
    assert AclSigner.verify_request(wire.ext_fields, wire.body, "SecretKey1")
    assert not AclSigner.verify_request(wire.ext_fields, wire.body, "SecretKey2")
    assert not AclSigner.verify_request(wire.ext_fields, wire.body + b"x", "SecretKey1")
    tampered = dict(wire.ext_fields)
    tampered["AccessKey"] = "AccessKey2"
    assert not AclSigner.verify_request(tampered, wire.body, "SecretKey1")


def test_client_hook_leaves_unique_key_query_out_for_stock_java_brokers() -> None:
    hook = AclClientRPCHook(SessionCredentials("AccessKey1", "SecretKey1"))
    req = RemotingCommand.create_request(12, {"topic": "T", "key": "K", "_UNIQUE_KEY_QUERY": "true"}, b"")
    hook.sign(req)
    stock = combine_request_content(req.ext_fields, b"", exclude=("Signature", "_UNIQUE_KEY_QUERY"))
    assert req.ext_fields["Signature"] == calculate_signature(stock, "SecretKey1")
