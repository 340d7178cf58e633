"""The real C++ client with ACL credentials against an ACL-enabled tidemq broker.

The C++ client signs every request (``AccessKey``, ``OnsChannel``, header fields as JSON numbers,
body) with HMAC-SHA1; the broker must verify that, allow the account's topics and refuse the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.conftest import Spawn
from tests.interop.harness import stored_messages
from tidemq.testing import ClusterThread

pytest.importorskip("rocketmq.client")
pytestmark = pytest.mark.interop

ACL_YML = """\
accounts:
  - accessKey: CppAccessKey
    secretKey: CppSecretKey
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - CppDenied=DENY
"""


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    with ClusterThread(tmp_path, acl_enable=True, acl_file=str(acl)) as c:
        yield c


def test_cpp_producer_and_push_consumer_with_credentials(acl_cluster: ClusterThread, spawn: Spawn) -> None:
    ns, topic = acl_cluster.namesrv_addr, "CppAclTopic"
    creds = ["--ak", "CppAccessKey", "--sk", "CppSecretKey"]
    producer = spawn("cpp_acl.py", "produce", "--namesrv", ns, "--topic", topic, "--count", "20", *creds)
    assert producer.wait_event("done", 60), producer.describe()
    assert producer.wait_exit(15) == 0, producer.describe()
    assert len(producer.of("sent")) == 20 and producer.of("error") == [], producer.describe()
    stored = {m.body.decode() for msgs in stored_messages(acl_cluster.broker, topic).values() for m in msgs}
    assert stored == {f"acl-{i}" for i in range(20)}

    consumer = spawn(
        "cpp_acl.py",
        "consume",
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--group",
        "CppAclGroup",
        "--count",
        "20",
        *creds,
    )
    assert consumer.wait_until(lambda p: {e["body"] for e in p.of("msg")} >= stored, 60), consumer.describe()


@pytest.mark.parametrize(
    ("topic", "creds", "reason"),
    [
        ("CppAclTopic", ["--ak", "CppAccessKey", "--sk", "WrongSecretKey"], "Check signature failed"),
        ("CppDenied", ["--ak", "CppAccessKey", "--sk", "CppSecretKey"], "No permission for topic:CppDenied"),
        # no credentials: the C++ client still sends AccessKey "" and a signature
        ("CppAclTopic", [], "No accessKey is configured"),
    ],
    ids=["wrong-secret", "denied-topic", "no-credentials"],
)
def test_cpp_producer_refused(
    acl_cluster: ClusterThread,
    spawn: Spawn,
    caplog: pytest.LogCaptureFixture,
    topic: str,
    creds: list[str],
    reason: str,
) -> None:
    caplog.set_level(logging.INFO, logger="tidemq.acl.plain")
    ns = acl_cluster.namesrv_addr
    producer = spawn("cpp_acl.py", "produce", "--namesrv", ns, "--topic", topic, "--count", "2", *creds)
    assert producer.wait_event("done", 60), producer.describe()
    # (librocketmq reports the last refusal of each send as "No route info of this topic")
    assert producer.of("sent") == [] and len(producer.of("error")) == 2, producer.describe()
    assert sum(len(m) for m in stored_messages(acl_cluster.broker, topic).values()) == 0
    assert "refused request code 10 from 127.0.0.1" in caplog.text and reason in caplog.text, caplog.text
    # the broker keeps serving good clients
    good = spawn(
        "cpp_acl.py",
        "produce",
        "--namesrv",
        ns,
        "--topic",
        "CppAclOk",
        "--count",
        "1",
        "--ak",
        "CppAccessKey",
        "--sk",
        "CppSecretKey",
    )
    assert good.wait_event("done", 60), good.describe()
    assert len(good.of("sent")) == 1, good.describe()
