"""broker.conf keys: a near miss of a key tidemq uses is an error naming it; others are accepted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tidemq.broker.config import load_broker_conf
from tidemq.broker.config_check import ConfigError, edit_distance


@pytest.mark.parametrize(
    ("line", "known"),
    [
        ("flushDiskTyp=SYNC_FLUSH", "flushDiskType"),  # the case: it ran ASYNC_FLUSH
        ("flushdisktype=SYNC_FLUSH", "flushDiskType"),  # case
        ("brokerNmae=b", "brokerName"),  # swapped letters
        ("fileReservedTimes=1", "fileReservedTime"),
        ("cleanFileForciblyEnabled=true", "cleanFileForciblyEnable"),
    ],
)
def test_a_misspelled_key_is_an_error_naming_the_known_key(tmp_path: Path, line: str, known: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=b\n{line}\n")
    with pytest.raises(ConfigError, match=f"did you mean '{known}'") as err:
        load_broker_conf(conf)
    assert line.split("=")[0] in str(err.value) and str(conf) in str(err.value)


def test_rocketmq_and_unrelated_keys_stay_accepted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=b\nbrokerIP2=10.0.0.8\nsendMessageThreadPoolNums=16\ntransientStorePoolEnable=false\n"
        "mapedFileSizeCommitLog=1073741824\nmyCompanyTag=blue\ndiskSpaceWarningLevelRatio=88\n"
        "cleanFileForciblyEnable=true\n"
    )
    caplog.set_level(logging.WARNING)
    _bc, sc = load_broker_conf(conf)
    assert sc.disk_space_warning_level_ratio == 88 and sc.clean_file_forcibly_enable is True
    assert "myCompanyTag" in caplog.text  # unknown and far from any key: one warning
    assert "sendMessageThreadPoolNums" not in caplog.text  # a RocketMQ option tidemq does not use


def test_edit_distance() -> None:
    assert edit_distance("abcd", "abdc", 2) == 1
    assert edit_distance("kitten", "sitting", 5) == 3
    assert edit_distance("short", "a much longer text", 2) == 3  # past the limit: limit + 1
