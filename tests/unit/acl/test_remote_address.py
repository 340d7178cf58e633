"""plain_acl.yml address patterns (RemoteAddressStrategyFactory forms)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl import AclConfigError, parse_remote_address
from tidemq.acl.remote_address import host_of


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("", [], ["127.0.0.1"]),
        (None, [], ["127.0.0.1"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1", "10.168.1.1"]),
        ("192.168.*.*", ["192.168.0.1", "192.168.200.3"], ["192.169.0.1"]),
        ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.0", "192.168.1.101"]),
        ("192.168.1-10.*", ["192.168.1.7", "192.168.10.255"], ["192.168.11.1"]),
        ("192.168.1.{1,2,30}", ["192.168.1.1", "192.168.1.30"], ["192.168.1.3", "192.168.2.1"]),
        ("10.0.0.1,10.0.0.2", ["10.0.0.1", "10.0.0.2"], ["10.0.0.3"]),
        ("127.0.0.1", ["127.0.0.1", "::ffff:127.0.0.1"], ["127.0.0.2"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("fe80:0:0:0:0:0:0:*", ["fe80::1", "fe80::ffff"], ["fe81::1", "10.0.0.1"]),
        ("fe80::{1,a}", ["fe80::1", "fe80::a"], ["fe80::2"]),
    ],
)
def test_patterns(pattern: str | None, yes: list[str], no: list[str]) -> None:
    strategy = parse_remote_address(pattern)
    for ip in yes:
        assert strategy.match(ip), (pattern, ip)
    for ip in no:
        assert not strategy.match(ip), (pattern, ip)


@pytest.mark.parametrize(
    "pattern",
    ["192.168.1", "192.168.1.300", "192.168.1.100-1", "192.168.1.a", "not-an-ip", "1.2.3.{x}", "fe80::*"],
)
def test_bad_patterns_raise_a_clear_error(pattern: str) -> None:
    with pytest.raises(AclConfigError, match=r"pattern|address"):
        parse_remote_address(pattern)


def test_host_of() -> None:
    assert host_of("10.1.2.3:5000") == "10.1.2.3"
    assert host_of("[::1]:5000") == "::1"
    assert host_of("10.1.2.3") == "10.1.2.3"


@given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255))
def test_range_matches_exactly_its_interval(a: int, b: int, x: int) -> None:
    lo, hi = min(a, b), max(a, b)
    strategy = parse_remote_address(f"10.20.30.{lo}-{hi}")
    assert strategy.match(f"10.20.30.{x}") == (lo <= x <= hi)
