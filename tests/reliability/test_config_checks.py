"""Configuration is checked once, in one place, however it arrives: one-line errors, nothing starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig, load_broker_conf
from tidemq.broker.config_check import ConfigError, check_config
from tidemq.store.config import MessageStoreConfig


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemq", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    ("line", "key", "value", "allowed"),
    [
        ("flushDiskType=SYNC", "flushDiskType", "'SYNC'", "ASYNC_FLUSH, SYNC_FLUSH"),
        ("listenPort=abc", "listenPort", "'abc'", "integer"),
        ("autoCreateTopicEnable=nope", "autoCreateTopicEnable", "'nope'", "true or false"),
        ("listenPort=70000", "listenPort", "70000", "0..65535"),
        ("brokerPermission=9", "brokerPermission", "9", "0..7"),
        ("messageDelayLevel=1s 5x", "messageDelayLevel", "'1s 5x'", "<number><s|m|h|d>"),
        ("idlePollUs=-1", "idlePollUs", "-1", "0..100000"),
    ],
)
def test_bad_broker_conf_value_is_one_line_naming_key_value_and_allowed(
    tmp_path: Path, line: str, key: str, value: str, allowed: str
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=b1\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_broker_conf(conf)
    text = str(info.value)
    assert "\n" not in text
    assert f"{key} (in {conf})={value}" in text and allowed in text, text


def test_cli_flush_disk_type_sync_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The issue's case: broker.conf flushDiskType=SYNC used to run ASYNC_FLUSH silently."""
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskType=SYNC\n")
    store = tmp_path / "store"
    proc = run_cli(
        "serve", "-c", str(conf), "--store", str(store), "--namesrv-port", "0", "--broker-port", "0"
    )
    assert proc.returncode == 1 and proc.stdout == ""
    (only,) = proc.stderr.strip().splitlines()
    assert "flushDiskType" in only and "'SYNC'" in only and "ASYNC_FLUSH, SYNC_FLUSH" in only, only
    assert not (store / "abort").exists() and not (store / "lock").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve", "--broker-port", "abc"], "--broker-port='abc': must be an integer"),
        (["serve", "--namesrv-port", "99999"], "--namesrv-port='99999': must be an integer 0..65535"),
        (["serve", "--flush", "sometimes"], "--flush='sometimes': allowed: async, sync"),
        (["namesrv", "--port", "x1"], "--port='x1': must be an integer"),
        (["broker", "--namesrv", "nohost", "--port", "0"], "--namesrv='nohost': must be host:port"),
        (["serve", "--idle-poll-us", "-1"], "--idle-poll-us=-1: must be an integer 0..100000"),
        (["broker", "--namesrv", "h:1", "--idle-poll-us", "1ms"], "--idle-poll-us='1ms': must be an integer"),
    ],
)
def test_bad_cli_flag_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    extra = ["--store", str(tmp_path / "store")] if args[0] != "namesrv" else []
    proc = run_cli(*args, *extra)
    assert proc.returncode == 1
    (only,) = proc.stderr.strip().splitlines()
    assert needle in only, only


def test_unknown_key_is_only_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nsomeFutureKey=1\n")
    bc, _ = load_broker_conf(conf)
    assert bc.broker_name == "b1"
    assert "someFutureKey" in caplog.text


def test_values_set_in_code_are_checked_too() -> None:
    """Defaults pass; a bad value set on the dataclass (bypassing __post_init__) is caught."""
    bc, sc = BrokerConfig(broker_name="b"), MessageStoreConfig()
    check_config(bc, sc)
    sc.flush_disk_type = "SYNC"
    with pytest.raises(ConfigError, match=r"flushDiskType='SYNC': allowed: ASYNC_FLUSH, SYNC_FLUSH"):
        check_config(bc, sc)
    sc.flush_disk_type = "SYNC_FLUSH"
    bc.listen_port = "10911"  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="listenPort='10911': must be of type int"):
        check_config(bc, sc)


async def test_broker_start_checks_its_config(tmp_path: Path) -> None:
    from tidemq.broker.broker import Broker
    from tidemq.testing import make_broker_configs

    bc, sc = make_broker_configs(tmp_path / "store", None)
    sc.mapped_file_size_consume_queue = 30
    broker = Broker(bc, sc)
    with pytest.raises(ConfigError, match="mappedFileSizeConsumeQueue=30: must be a positive multiple of 20"):
        await broker.start()
    await broker.shutdown()
    assert not (tmp_path / "store" / "abort").exists()


def test_serve_and_broker_poll_after_reads_unless_told_otherwise(tmp_path: Path) -> None:
    """A broker in its own process (``tidemq serve`` / ``tidemq broker``) polls 500 µs after reads;
    ``--idle-poll-us`` or ``idlePollUs`` change it, the flag winning; one made in code does not poll
    (it may share its process with clients)."""
    from tidemq.cli import _broker_configs
    from tidemq.remoting.busy_poll import SERVE_IDLE_POLL_US

    store = str(tmp_path / "store")

    def idle_poll(conf: Path | None = None, flag: str | None = None) -> int:
        args = (str(conf) if conf else None, store, "127.0.0.1", "0", None, None, None)
        bc, _ = _broker_configs(*args, idle_poll_us=flag)
        return int(bc.idle_poll_us)

    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nidlePollUs=250\n")
    assert BrokerConfig().idle_poll_us == 0
    assert idle_poll() == SERVE_IDLE_POLL_US == 500
    assert idle_poll(flag="0") == 0
    assert idle_poll(conf) == 250
    assert idle_poll(conf, flag="1000") == 1000
