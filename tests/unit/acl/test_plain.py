"""plain_acl.yml loading, per-request resources and PlainPermissionManager.validate."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tidemq.acl import (
    AclClientRPCHook,
    AclConfigError,
    AclError,
    Permission,
    PlainAccessResource,
    PlainAccessValidator,
    PlainAclConfig,
    SessionCredentials,
)
from tidemq.protocol.body import ConsumerData, HeartbeatData, SubscriptionData
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand

ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: publisher
    secretKey: publisherSecret
    defaultTopicPerm: PUB
"""

CLIENT = "127.0.0.1:40000"


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YML)
    return path


@pytest.fixture
def validator(acl_file: Path) -> PlainAccessValidator:
    return PlainAccessValidator(acl_file, watch_interval=0)


def signed(
    code: int, ext: dict[str, str], body: bytes = b"", ak: str = "RocketMQ", sk: str = "12345678"
) -> RemotingCommand:
    req = RemotingCommand.create_request(code, ext, body)
    AclClientRPCHook(SessionCredentials(ak, sk)).sign(req)
    return req


def check(validator: PlainAccessValidator, req: RemotingCommand, addr: str = CLIENT) -> None:
    validator.do_before_request(addr, req)


def test_load_example_file(acl_file: Path) -> None:
    cfg = PlainAclConfig.load(acl_file)
    assert set(cfg.accounts) == {"RocketMQ", "rocketmq2", "publisher"}
    rocketmq = cfg.accounts["RocketMQ"]
    assert rocketmq.secret_key == "12345678"  # YAML integer read back as text
    assert rocketmq.default_topic_perm == Permission.DENY
    assert rocketmq.default_group_perm == Permission.SUB
    assert rocketmq.resource_perms == {
        "topicA": Permission.DENY,
        "topicB": Permission.PUB | Permission.SUB,
        "topicC": Permission.SUB,
        "%RETRY%groupA": Permission.DENY,
        "%RETRY%groupB": Permission.PUB | Permission.SUB,
    }
    assert cfg.accounts["rocketmq2"].admin
    assert cfg.accounts["rocketmq2"].resource_perms is None
    assert cfg.global_white_remote_addresses[0].match("10.10.103.9")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "accessKey 'short' is too short"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 123\n", "secretKey '123' is too short"),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    defaultTopicPerm: WRITE\n",
            "bad permission 'WRITE'",
        ),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    topicPerms: [topicA]\n",
            "not 'name=PERM'",
        ),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n",
            "pattern",
        ),
        (
            "accounts:\n  - {accessKey: longenough, secretKey: 12345678}\n  - {accessKey: longenough, secretKey: 87654321}\n",
            "listed twice",
        ),
        ("accounts: [\n", "not valid YAML"),
        ("- a\n- b\n", "top level must be a mapping"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    with pytest.raises(AclConfigError, match=message) as info:
        PlainAclConfig.load(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match="does not exist"):
        PlainAccessValidator(tmp_path / "nope.yml")


def test_empty_file_means_no_accounts(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text("")
    v = PlainAccessValidator(path, watch_interval=0)
    with pytest.raises(AclError, match="No acl config for RocketMQ"):
        check(v, signed(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": "0"}))


def test_permission_rules() -> None:
    assert Permission.check_permission(Permission.PUB, Permission.PUB | Permission.SUB)
    assert not Permission.check_permission(Permission.PUB, Permission.SUB)
    assert not Permission.check_permission(Permission.SUB, Permission.DENY | Permission.SUB)
    assert Permission.check_permission(Permission.ANY, Permission.SUB)
    assert not Permission.check_permission(Permission.ANY, Permission.DENY)
    assert Permission.parse_perm_from_string(" SUB | PUB ") == 12
    assert Permission.parse_perm_from_string(None) == Permission.DENY


def send_v2(topic: str, group: str = "pg") -> dict[str, str]:
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "i": ""}


def test_authentication_order(validator: PlainAccessValidator) -> None:
    good = signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), b"hello")
    check(validator, good)  # explicit PUB|SUB on topicB

    no_key = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), b"x")
    with pytest.raises(AclError, match="No accessKey is configured"):
        check(validator, no_key)
    empty_key = signed(
        RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), ak=""
    )  # the C++ client without credentials
    with pytest.raises(AclError, match="No accessKey is configured"):
        check(validator, empty_key)
    with pytest.raises(AclError, match="No acl config for Stranger1"):
        check(validator, signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), ak="Stranger1"))
    with pytest.raises(AclError, match="Check signature failed for accessKey=RocketMQ"):
        check(validator, signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), sk="wrong-secret"))
    tampered = signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicB"), b"hello")
    tampered.body = b"HELLO"
    with pytest.raises(AclError, match="Check signature failed"):
        check(validator, tampered)


def test_white_lists(validator: PlainAccessValidator) -> None:
    anonymous = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), b"x")
    check(validator, anonymous, "10.10.103.7:1234")  # global white list: no key needed
    bad_sig = signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), ak="rocketmq2", sk="whatever")
    check(validator, bad_sig, "192.168.1.20:1234")  # account white list: no signature / perm check
    with pytest.raises(AclError, match="Check signature failed"):
        check(validator, bad_sig, "192.168.2.20:1234")


@pytest.mark.parametrize(
    ("code", "ext", "ok"),
    [
        (RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), "No permission for topic:topicA"),
        (RequestCode.SEND_MESSAGE_V2, send_v2("topicC"), "No permission for topic:topicC"),  # SUB only
        (RequestCode.SEND_MESSAGE_V2, send_v2("other"), "No default permission for topic:other"),
        (RequestCode.SEND_MESSAGE_V2, send_v2("RMQ_SYS_TRACE_TOPIC"), None),
        (RequestCode.SEND_MESSAGE_V2, send_v2("%RETRY%groupC"), None),  # default group perm SUB
        (RequestCode.SEND_MESSAGE_V2, send_v2("%RETRY%groupA"), "No permission for group:groupA"),
        (RequestCode.SEND_MESSAGE, {"producerGroup": "p", "topic": "topicB", "queueId": "0"}, None),
        (RequestCode.SEND_MESSAGE, {"producerGroup": "p", "topic": "topicA", "queueId": "0"}, "topic:topicA"),
        (RequestCode.PULL_MESSAGE, {"consumerGroup": "groupB", "topic": "topicC", "queueId": "0"}, None),
        (
            RequestCode.PULL_MESSAGE,
            {"consumerGroup": "groupA", "topic": "topicC", "queueId": "0"},
            "group:groupA",
        ),
        (
            RequestCode.PULL_MESSAGE,
            {"consumerGroup": "groupB", "topic": "topicA", "queueId": "0"},
            "topic:topicA",
        ),
        (RequestCode.POP_MESSAGE, {"consumerGroup": "groupB", "topic": "topicC", "queueId": "-1"}, None),
        (RequestCode.POP_MESSAGE, {"consumerGroup": "groupA", "topic": "topicC"}, "group:groupA"),
        (RequestCode.ACK_MESSAGE, {"consumerGroup": "groupB", "topic": "topicA"}, "topic:topicA"),
        (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {"consumerGroup": "groupA", "topic": "topicC"}, "groupA"),
        (RequestCode.QUERY_MESSAGE, {"topic": "topicC", "key": "k", "maxNum": "32"}, None),
        (RequestCode.QUERY_MESSAGE, {"topic": "zzz", "key": "k", "maxNum": "32"}, "topic:zzz"),
        (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "groupA", "offset": "1"}, "group:groupA"),
        (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "g1", "offset": "1"}, None),
        (RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g1", "topic": "topicA"}, "topic:topicA"),
        (RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "groupA"}, "group:groupA"),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupB"}, None),
        (
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": "topicB"},
            "Need admin permission for request code=17",
        ),
        (RequestCode.GET_MAX_OFFSET, {"topic": "anything", "queueId": "0"}, None),
    ],
)
def test_resource_checks(
    validator: PlainAccessValidator, code: int, ext: dict[str, str], ok: str | None
) -> None:
    req = signed(code, ext)
    if ok is None:
        check(validator, req)
    else:
        with pytest.raises(AclError, match=ok):
            check(validator, req)


def heartbeat(group: str, *topics: str) -> bytes:
    subs = [SubscriptionData(topic=t) for t in topics]
    return HeartbeatData(
        client_id="c1", consumer_data_set=[ConsumerData(group_name=group, subscription_data_set=subs)]
    ).encode()


def test_heartbeat_needs_every_group_and_topic(validator: PlainAccessValidator) -> None:
    res = PlainAccessResource.parse(
        signed(RequestCode.HEART_BEAT, {}, heartbeat("groupB", "topicC", "%RETRY%groupB")), CLIENT
    )
    assert res.resource_perms == {"%RETRY%groupB": Permission.SUB, "topicC": Permission.SUB}
    check(validator, signed(RequestCode.HEART_BEAT, {}, heartbeat("groupB", "topicC", "%RETRY%groupB")))
    with pytest.raises(AclError, match="topic:topicA"):
        check(validator, signed(RequestCode.HEART_BEAT, {}, heartbeat("groupB", "topicC", "topicA")))
    with pytest.raises(AclError, match="heartbeat"):
        check(validator, signed(RequestCode.HEART_BEAT, {}, b"not json"))


def test_admin_without_perms_may_do_anything(validator: PlainAccessValidator) -> None:
    req = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, ak="rocketmq2", sk="12345678")
    check(validator, req)
    check(validator, signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), ak="rocketmq2", sk="12345678"))


def test_hot_reload(acl_file: Path) -> None:
    v = PlainAccessValidator(acl_file, watch_interval=0.01)
    req = signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), ak="publisher", sk="publisherSecret")
    check(v, req)
    acl_file.write_text(ACL_YML.replace("defaultTopicPerm: PUB", "defaultTopicPerm: SUB"))
    stat = acl_file.stat()
    os.utime(acl_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    deadline = time.monotonic() + 5
    while True:
        try:
            check(
                v,
                signed(RequestCode.SEND_MESSAGE_V2, send_v2("topicA"), ak="publisher", sk="publisherSecret"),
            )
        except AclError as exc:
            assert "No default permission for topic:topicA" in str(exc)
            break
        assert time.monotonic() < deadline, "the changed plain_acl.yml was not picked up"
        time.sleep(0.005)  # poll interval of this deadline-bounded wait
    # a broken edit keeps the previous configuration
    acl_file.write_text("accounts: [\n")
    os.utime(acl_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    v.manager._next_check = 0.0
    assert not v.manager.maybe_reload()
    assert "publisher" in v.manager.config.accounts


def test_broker_conf_keys(tmp_path: Path) -> None:
    """``aclEnable`` / ``aclFile`` in a RocketMQ broker.conf reach BrokerConfig."""
    from tidemq.broker.config import BrokerConfig, load_broker_conf

    assert BrokerConfig().acl_enable is False
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\naclEnable=true\naclFile=/etc/tidemq/plain_acl.yml\n")
    bc, _ = load_broker_conf(conf)
    assert bc.acl_enable is True
    assert bc.acl_file == "/etc/tidemq/plain_acl.yml"


def test_batch_ack_needs_every_entry_topic_and_group(validator: PlainAccessValidator) -> None:
    from tidemq.protocol.headers.pop import BatchAck, BatchAckMessageRequestBody

    def body(group: str, topic: str) -> bytes:
        return BatchAckMessageRequestBody("b", [BatchAck(group, topic, "0", 0, 0, 0, 1, 1, 1)]).encode()

    check(validator, signed(RequestCode.BATCH_ACK_MESSAGE, {}, body("groupB", "topicC")))
    with pytest.raises(AclError, match="topic:topicA"):
        check(validator, signed(RequestCode.BATCH_ACK_MESSAGE, {}, body("groupB", "topicA")))
    with pytest.raises(AclError, match="batch ack"):
        check(validator, signed(RequestCode.BATCH_ACK_MESSAGE, {}, b"not json"))
