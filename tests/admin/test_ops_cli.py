"""Issue 31's command-line habits: `send`/`consume` take -n and NAMESRV_ADDR, refuse bad or reserved
topics up front, SIGTERM stops `consume` cleanly (offsets persisted); admin hints name the real
problem; mqadmin's option letters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tests.helpers import wait_for_sync
from tidemq.admin import AdminClient
from tidemq.admin.cli import admin_group
from tidemq.cli import main
from tidemq.protocol.message import MessageQueue
from tidemq.protocol.topic_attributes import alter_attributes, attributes_to_string, parse_attributes
from tidemq.testing import ClusterThread


def test_send_consume_namesrv_and_topic_checks(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        ns = cluster.namesrv_addr
        runner = CliRunner()
        sent = runner.invoke(main, ["send", "-n", ns, "--topic", "HabitT", "--count", "2"])
        assert sent.exit_code == 0, sent.output
        by_env = runner.invoke(main, ["send", "--topic", "HabitT"], env={"NAMESRV_ADDR": ns})
        assert by_env.exit_code == 0 and json.loads(by_env.output)["status"] == "SEND_OK", by_env.output
        bad = runner.invoke(
            main, ["consume", "-n", ns, "--topic", "bad topic!", "--group", "g", "--count", "1"]
        )
        assert (
            bad.exit_code == 2 and "invalid topic name" in bad.output and "does not exist" not in bad.output
        )
        reserved = runner.invoke(main, ["send", "-n", ns, "--topic", "TBW102"])
        assert reserved.exit_code == 2 and "reserved system topic" in reserved.output

        # SIGTERM: the consumer shuts down and persists its offsets (3 messages consumed -> offset 3)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tidemq",
                "consume",
                "--topic",
                "HabitT",
                "--group",
                "term-g",
                "--from",
                "first",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, NAMESRV_ADDR=ns),
        )
        try:
            lines: list[str] = []
            while sum('"message"' in line for line in lines) < 3:
                line = proc.stdout.readline() if proc.stdout else ""
                assert line, proc.stderr.read() if proc.stderr else ""
                lines.append(line)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        with AdminClient(ns) as admin:
            mqs = admin.fetch_subscribe_message_queues("HabitT")
            assert sum(max(o, 0) for o in admin.query_consumer_offsets("term-g", mqs).values()) == 3


def test_admin_hints_and_mqadmin_letters(tmp_path: Path) -> None:
    with ClusterThread(tmp_path) as cluster:
        ns, broker = cluster.namesrv_addr, cluster.broker_addr
        runner = CliRunner()

        def run(*args: str) -> tuple[int, str]:
            res = runner.invoke(admin_group, [args[0], "-n", ns, *args[1:]])
            return res.exit_code, res.output

        code, out = run("updateBrokerConfig", "-k", "listenPort", "-v", "1")
        assert code == 1 and "read-only" in out and "access-key" not in out, out
        code, out = run("brokerStatus", "-b", "127.0.0.1:1")
        assert code == 1 and "nothing answers at 127.0.0.1:1" in out and "NAMESRV_ADDR" not in out, out

        # updateTopic with mqadmin's letters: -b broker, -w/-r queues, -p perm, -a attributes
        code, out = run(
            "updateTopic",
            "--json",
            "-b",
            broker,
            "-t",
            "LetterT",
            "-w",
            "4",
            "-r",
            "2",
            "-p",
            "6",
            "-a",
            "+message.type=FIFO",
        )
        assert code == 0 and json.loads(out)["brokers"] == [broker], out
        tc = cluster.broker.topic_config_manager.select_topic_config("LetterT")
        assert tc is not None and (tc.write_queue_nums, tc.read_queue_nums) == (4, 2)
        assert tc.attributes == {"message.type": "FIFO"}
        code, out = run("updateTopic", "-t", "LetterT", "-a", "message.type=FIFO")
        assert code == 1 and "+key=value" in out
        code, out = run("updateTopicPerm", "--json", "-t", "LetterT", "-p", "4", "-b", broker)
        assert code == 0 and json.loads(out)["brokers"] == [broker], out

        # consumerProgress without -g lists every group; -s true adds the client of each queue
        with AdminClient(ns) as admin:
            admin.create_topic("%RETRY%letter-g", 1)
            admin.update_consumer_offset("letter-g", MessageQueue("LetterT", "broker-a", 0), 0)
        code, out = run("consumerProgress", "--json")
        assert code == 0 and "letter-g" in [g["group"] for g in json.loads(out)["groups"]], out
        wait_for_sync(lambda: run("topicRoute", "-t", "LetterT")[0] == 0, 10, "LetterT routed")
        code, out = run("topicRoute", "-t", "LetterT", "-l")
        assert code == 0 and "DefaultCluster" in out, out
        code, out = run("topicList", "-c", "--json")
        assert code == 0 and {
            "clusterName": "DefaultCluster",
            "topic": "LetterT",
            "consumerGroup": "letter-g",
        } in json.loads(out)
        code, out = run("clusterList", "-m")
        assert code == 0 and "inTotalYest" in out
        code, out = run("printMsg", "-t", "LetterT", "-s", "TagA", "-b", "0", "--json")
        assert code == 0 and json.loads(out) == []
        code, out = run("consumerStatus", "-g", "letter-g", "-s")
        assert code == 1 and "jstack" in out


def test_topic_attribute_syntax() -> None:
    """mqadmin's -a syntax (AttributeParser) and the broker's alteration rules (AttributeUtil)."""
    change = parse_attributes("+message.type=FIFO,-cleanup.policy")
    assert change == {"+message.type": "FIFO", "-cleanup.policy": ""}
    assert attributes_to_string(change) == "+message.type=FIFO,-cleanup.policy"
    assert alter_attributes(True, {}, {"+message.type": "DELAY"}) == {"message.type": "DELAY"}
    assert alter_attributes(False, {"message.type": "DELAY"}, {"-message.type": ""}) == {}
    for create, current, bad, why in [
        (True, {}, {"-message.type": ""}, "only add"),
        (False, {}, {"+queue.type": "BatchCQ"}, "unchangeable"),
        (True, {}, {"+message.type": "ODD"}, "not one of"),
        (True, {}, {"+no.such": "x"}, "unsupported key"),
        (False, {}, {"-message.type": ""}, "nonexistent"),
    ]:
        try:
            alter_attributes(create, current, bad)
        except ValueError as exc:
            assert why in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")
