"""Address parsing and formatting used by RemotingClient and Channel."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.errors import RemotingConnectError
from tidemq.remoting.channel import format_addr
from tidemq.remoting.client import parse_addr


@given(st.ip_addresses(), st.integers(min_value=1, max_value=65535))
def test_format_then_parse_round_trips(ip: object, port: int) -> None:
    """Any IPv4/IPv6 (host, port) survives format_addr -> parse_addr."""
    text = format_addr((str(ip), port))
    assert parse_addr(text) == (str(ip), port)


def test_ipv4_format_is_plain() -> None:
    """IPv4 peers print as RocketMQ does: 'ip:port'."""
    assert format_addr(("10.0.0.5", 10911)) == "10.0.0.5:10911"


@pytest.mark.parametrize("bad", ["", "host", "host:", ":9876", "host:port", "host:0", "host:70000"])
def test_bad_addresses_raise_connect_error(bad: str) -> None:
    """An address without a valid port is a RemotingConnectError naming the address."""
    with pytest.raises(RemotingConnectError, match="host:port"):
        parse_addr(bad)
