"""Remote-address patterns of ``plain_acl.yml``. Mirrors ``RemoteAddressStrategyFactory``.

Forms (``globalWhiteRemoteAddresses`` entries and an account's ``whiteRemoteAddress``):

* blank / missing: matches nothing;
* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches every address;
* ``192.168.1.{1,2,3}``: any of the listed last parts (IPv6: ``fe80::{1,2}``);
* ``192.168.1.1,192.168.1.2``: any of the listed addresses;
* ``192.168.1.*``, ``192.168.*.*``, ``192.168.1.1-100``, ``192.168.1-10.*``: per-part wildcards and
  inclusive ranges (IPv6: the same per group, in hex, with all 8 groups written out);
* ``192.168.1.7`` / an IPv6 address: exactly that address.

A pattern that is none of these raises :class:`~tidemq.acl.common.AclConfigError` when loaded.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from tidemq.acl.common import AclConfigError

__all__ = ["RemoteAddressStrategy", "host_of", "normalize_ip", "parse_remote_address"]

_ALL = {"*", "*.*.*.*", "*:*:*:*:*:*:*:*"}


def host_of(remote_addr: str) -> str:
    """``"10.0.0.1:5000"`` -> ``"10.0.0.1"``, ``"[::1]:5000"`` -> ``"::1"`` (the part before the last ``:``)."""
    host = remote_addr.rsplit(":", 1)[0] if ":" in remote_addr else remote_addr
    return host.strip("[]")


def normalize_ip(ip: str) -> str:
    """Canonical text of ``ip``: IPv4 dotted quad, IPv4-mapped IPv6 as IPv4, other IPv6 fully expanded.

    Returns ``ip`` unchanged if it is not an IP address.
    """
    try:
        addr = ipaddress.ip_address(ip.strip().strip("[]"))
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return addr.exploded
    return str(addr)


@dataclass(frozen=True, slots=True)
class _Part:
    low: int
    high: int

    def match(self, value: int) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True, slots=True)
class RemoteAddressStrategy:
    """A compiled address pattern; :meth:`match` takes a client IP (no port).

    Attributes:
        pattern: the text from ``plain_acl.yml``.
    """

    pattern: str
    _kind: str  # "none" | "all" | "set" | "range"
    _set: frozenset[str] = frozenset()
    _parts: tuple[_Part, ...] = ()
    _v6: bool = False

    def match(self, ip: str) -> bool:
        """True if the client address ``ip`` (``"10.0.0.1"``, ``"::1"``) matches the pattern."""
        if self._kind == "all":
            return True
        if self._kind == "none":
            return False
        norm = normalize_ip(ip)
        if self._kind == "set":
            return norm in self._set
        try:
            addr = ipaddress.ip_address(norm)
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) != self._v6:
            return False
        values = (
            [int(g, 16) for g in addr.exploded.split(":")] if self._v6 else [int(p) for p in norm.split(".")]
        )
        return len(values) == len(self._parts) and all(
            p.match(v) for p, v in zip(self._parts, values, strict=True)
        )


def _address(text: str, pattern: str) -> str:
    try:
        return normalize_ip(str(ipaddress.ip_address(text.strip())))
    except ValueError:
        raise AclConfigError(f"bad remote address {text.strip()!r} in pattern {pattern!r}") from None


def _range_part(text: str, *, base: int, top: int, pattern: str) -> _Part:
    text = text.strip()
    try:
        if text == "*":
            return _Part(0, top)
        if "-" in text:
            lo_s, hi_s = text.split("-", 1)
            lo, hi = int(lo_s, base), int(hi_s, base)
        else:
            lo = hi = int(text, base)
    except ValueError:
        raise AclConfigError(f"bad part {text!r} in remote address pattern {pattern!r}") from None
    if not 0 <= lo <= hi <= top:
        raise AclConfigError(f"bad range {text!r} in remote address pattern {pattern!r}")
    return _Part(lo, hi)


def parse_remote_address(pattern: str | None) -> RemoteAddressStrategy:
    """Compile one address pattern (forms in the module doc).

    Raises:
        AclConfigError: the pattern is malformed (the message quotes it).
    """
    text = "" if pattern is None else str(pattern).strip()
    if not text:
        return RemoteAddressStrategy(text, "none")
    if text in _ALL:
        return RemoteAddressStrategy(text, "all")
    v6 = ":" in text
    if text.endswith("}"):
        head, sep, tail = text.rpartition("{")
        if not sep or not head or head[-1] not in ".:":
            raise AclConfigError(f"bad remote address pattern {text!r}: expected e.g. 192.168.1.{{1,2}}")
        items = [i for i in tail[:-1].split(",") if i.strip()]
        if not items:
            raise AclConfigError(f"bad remote address pattern {text!r}: empty {{}} list")
        return RemoteAddressStrategy(text, "set", frozenset(_address(head + i.strip(), text) for i in items))
    if "," in text:
        return RemoteAddressStrategy(
            text, "set", frozenset(_address(i, text) for i in text.split(",") if i.strip())
        )
    if "*" in text or "-" in text:
        parts = text.split(":") if v6 else text.split(".")
        if len(parts) != (8 if v6 else 4):
            raise AclConfigError(
                f"bad remote address pattern {text!r}: write all {8 if v6 else 4} parts, e.g. "
                + ("fe80:0:0:0:0:0:0:*" if v6 else "192.168.1.*")
            )
        top, base = (0xFFFF, 16) if v6 else (255, 10)
        compiled = tuple(_range_part(p, base=base, top=top, pattern=text) for p in parts)
        return RemoteAddressStrategy(text, "range", _parts=compiled, _v6=v6)
    return RemoteAddressStrategy(text, "set", frozenset({_address(text, text)}))
