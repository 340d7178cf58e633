"""config_file: atomic writes with .bak, fallback on corruption, fastjson integer keys."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.errors import StoreError
from tidemq.store.config_file import atomic_write_json, load_json, parse_json, quote_integer_keys


def test_round_trip_and_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    assert load_json(path) is None
    atomic_write_json(path, {"v": 1})
    assert load_json(path) == {"v": 1}
    assert not path.with_name("topics.json.bak").exists()
    atomic_write_json(path, {"v": 2})
    assert load_json(path) == {"v": 2}
    assert load_json(path.with_name("topics.json.bak")) == {"v": 1}
    assert not path.with_name("topics.json.tmp").exists()


def test_corrupt_main_falls_back_to_bak(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "consumerOffset.json"
    atomic_write_json(path, {"offsetTable": {"T@G": {"0": 5}}})
    atomic_write_json(path, {"offsetTable": {"T@G": {"0": 9}}})
    path.write_bytes(b'{"offsetTable": {"T@G"')  # torn write
    with caplog.at_level(logging.WARNING):
        assert load_json(path) == {"offsetTable": {"T@G": {"0": 5}}}
    assert "consumerOffset.json" in caplog.text
    # the next write must not back up the corrupt file over the good backup
    atomic_write_json(path, {"ok": True})
    assert load_json(path.with_name("consumerOffset.json.bak")) == {"offsetTable": {"T@G": {"0": 5}}}


def test_missing_main_uses_bak(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.with_name("x.json.bak").write_text('{"a": 1}')
    assert load_json(path) == {"a": 1}


def test_both_corrupt_raise_store_error_naming_file(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    path.write_text("{nope")
    path.with_name("subscriptionGroup.json.bak").write_text("")
    with pytest.raises(StoreError, match=r"subscriptionGroup\.json"):
        load_json(path)


def test_corrupt_main_without_bak_raises(tmp_path: Path) -> None:
    path = tmp_path / "delayOffset.json"
    path.write_text("garbage")
    with pytest.raises(StoreError, match=r"delayOffset\.json"):
        load_json(path)


def test_fastjson_unquoted_integer_keys(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(
        '{"offsetTable":{"TopicA@GroupA":{0:123,1:98},"%RETRY%GroupA@GroupA":{ -1 :0}},"s":"{0:1}"}'
    )
    assert load_json(path) == {
        "offsetTable": {"TopicA@GroupA": {"0": 123, "1": 98}, "%RETRY%GroupA@GroupA": {"-1": 0}},
        "s": "{0:1}",
    }
    assert parse_json(b'{"delay":{1:57,2:0,3:12}}') == {"delay": {"1": 57, "2": 0, "3": 12}}
    assert parse_json(b"[1, 2, {3: 4}]") == [1, 2, {"3": 4}]


@given(st.dictionaries(st.integers(-1000, 10**9), st.integers(-(2**63), 2**63 - 1)))
def test_quote_integer_keys_property(table: dict[int, int]) -> None:
    text = "{" + ",".join(f"{k}:{v}" for k, v in table.items()) + "}"
    assert parse_json(quote_integer_keys(text).encode()) == {str(k): v for k, v in table.items()}


def test_unwritable_path_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot write config file"):
        atomic_write_json(blocker / "sub" / "x.json", {})
