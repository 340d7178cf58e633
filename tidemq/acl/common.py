"""ACL building blocks shared by client and broker: credentials, permissions, request signing.

Mirrors RocketMQ's ``org.apache.rocketmq.acl.common`` package: ``SessionCredentials``,
``Permission``, ``AclSigner`` / ``AclUtils.calSignature`` / ``AclUtils.combineRequestContent``,
``AclConstants`` and ``AclException`` (protocol.md §9).

What is signed: every ext field that travels with the request except ``Signature`` (the broker also
leaves out ``_UNIQUE_KEY_QUERY``), sorted by key in Java ``TreeMap`` order (UTF-16 code units),
the **values only** concatenated, UTF-8 encoded, then the raw body bytes appended. The signature is
``Base64(HmacSHA1(secret_key_utf8, data))``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tidemq.errors import ProtocolError
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import ext_value_to_str

__all__ = [
    "ACCESS_KEY",
    "ONS_CHANNEL",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "AclConfigError",
    "AclError",
    "AclSigner",
    "Permission",
    "SessionCredentials",
    "calculate_signature",
    "combine_request_content",
]

ACCESS_KEY: Final = "AccessKey"
SECRET_KEY: Final = "SecretKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
ONS_CHANNEL: Final = "OnsChannel"
"""Sent by the C++ client and ali-ons (``ALIYUN`` by default); signed like any other field."""
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"
"""``MixAll.UNIQUE_MSG_QUERY_FLAG``: left out of the content by Java's verifier (but not its client)."""

ACCESS_KEY_MIN_LENGTH: Final = 6
"""Access and secret keys must be *longer* than this (``AclConstants.ACCESS_KEY_MIN_LENGTH``)."""


class AclError(ProtocolError):
    """A request was refused by the broker's ACL. Mirrors ``AclException``.

    Raised by the broker's RPC hook; the remoting layer turns it into a ``SYSTEM_ERROR`` (1)
    response whose remark is this error's text (no response at all for oneway requests). It
    derives from :class:`~tidemq.errors.ProtocolError` so the dispatcher uses the bare text as
    remark, as RocketMQ's broker does, without logging a traceback.
    """


class AclConfigError(AclError):
    """``plain_acl.yml`` is missing, not YAML, or has a bad account / permission / address entry."""


class Permission:
    """Permission bits of plain ACL. Mirrors ``org.apache.rocketmq.acl.common.Permission``.

    ``DENY`` = 1, ``ANY`` = 2, ``PUB`` = 4, ``SUB`` = 8 (one byte in Java).
    """

    DENY: Final = 1
    ANY: Final = 2
    PUB: Final = 4
    SUB: Final = 8

    #: request codes only ``admin: true`` accounts may send (``Permission.ADMIN_CODE``):
    #: UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER,
    #: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP.
    ADMIN_CODES: Final = frozenset(
        {
            int(RequestCode.UPDATE_AND_CREATE_TOPIC),
            int(RequestCode.UPDATE_BROKER_CONFIG),
            int(RequestCode.DELETE_TOPIC_IN_BROKER),
            int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
            int(RequestCode.DELETE_SUBSCRIPTIONGROUP),
        }
    )

    _BY_NAME: Final = {"DENY": 1, "PUB": 4, "SUB": 8, "PUB|SUB": 12, "SUB|PUB": 12}

    @classmethod
    def parse_perm_from_string(cls, text: str | None) -> int:
        """``"DENY"`` / ``"PUB"`` / ``"SUB"`` / ``"PUB|SUB"`` / ``"SUB|PUB"`` -> bits; ``None`` -> DENY.

        Mirrors ``Permission.parsePermFromString``, except that an unknown name raises instead of
        silently meaning DENY.

        Raises:
            AclConfigError: ``text`` is not one of the names above.
        """
        if text is None:
            return cls.DENY
        key = "".join(str(text).split()).upper()
        try:
            return cls._BY_NAME[key]
        except KeyError:
            raise AclConfigError(f"bad permission {text!r}: expected DENY, PUB, SUB or PUB|SUB") from None

    @classmethod
    def check_permission(cls, needed: int, owned: int) -> bool:
        """True if ``owned`` grants ``needed``. Mirrors ``Permission.checkPermission``.

        A DENY bit in ``owned`` refuses everything; ``needed`` ANY is met by PUB or SUB.
        """
        if owned & cls.DENY:
            return False
        if needed & cls.ANY:
            return bool(owned & (cls.PUB | cls.SUB))
        return bool(needed & owned)

    @classmethod
    def need_admin_perm(cls, code: int) -> bool:
        """True for the request codes only admin accounts may send (``Permission.needAdminPerm``)."""
        return code in cls.ADMIN_CODES

    @classmethod
    def name(cls, perm: int) -> str:
        """Readable form of ``perm`` for error messages (``"PUB|SUB"``, ``"DENY"``...)."""
        if perm & cls.DENY:
            return "DENY"
        parts = [n for n, bit in (("PUB", cls.PUB), ("SUB", cls.SUB), ("ANY", cls.ANY)) if perm & bit]
        return "|".join(parts) or "NONE"


@dataclass(slots=True, frozen=True)
class SessionCredentials:
    """An access key / secret key pair (+ optional security token). Mirrors ``SessionCredentials``.

    Attributes:
        access_key: sent in the ``AccessKey`` ext field; the broker looks the account up by it.
        secret_key: HMAC key; never sent.
        security_token: sent (and signed) as ``SecurityToken`` when not ``None``.
    """

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = None


def _java_order(key: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    return key.encode("utf-16-be", "surrogatepass")


def combine_request_content(
    ext_fields: Mapping[str, object],
    body: bytes | None,
    *,
    exclude: Iterable[str] = (SIGNATURE,),
) -> bytes:
    """The bytes a request signature covers. Mirrors ``AclUtils.combineRequestContent``.

    Args:
        ext_fields: the request's ext fields. Values may be strings or JSON scalars (as the C++
            client sends them); they are stringified Java-style (``4`` -> ``"4"``,
            ``True`` -> ``"true"``); ``None`` values are skipped.
        body: the request body (``None`` = empty).
        exclude: keys left out (``Signature`` always should be).

    Returns:
        The values sorted by key (Java ``TreeMap`` order) concatenated, UTF-8, followed by ``body``.
    """
    skip = set(exclude)
    parts: list[str] = []
    for key in sorted(ext_fields, key=_java_order):
        if key in skip:
            continue
        text = ext_value_to_str(ext_fields[key])
        if text is not None:
            parts.append(text)
    return "".join(parts).encode("utf-8") + (body or b"")


def calculate_signature(data: bytes | str, secret_key: str) -> str:
    """``Base64(HmacSHA1(secret_key, data))``. Mirrors ``AclUtils.calSignature`` / ``AclSigner.calSignature``.

    Args:
        data: the content (``str`` is UTF-8 encoded), usually from :func:`combine_request_content`.
        secret_key: the account's secret key (UTF-8).

    Returns:
        The 28-character Base64 signature.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    digest = hmac.new(secret_key.encode("utf-8"), raw, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


class AclSigner:
    """Namespace mirroring RocketMQ's ``AclSigner`` (HmacSHA1 is the only algorithm plain ACL uses)."""

    DEFAULT_ALGORITHM: Final = "HmacSHA1"

    @staticmethod
    def cal_signature(data: bytes | str, key: str) -> str:
        """Same as :func:`calculate_signature`."""
        return calculate_signature(data, key)

    @staticmethod
    def sign_request(ext_fields: Mapping[str, object], body: bytes | None, secret_key: str) -> str:
        """Signature of a request as a client computes it (all ext fields but ``Signature``)."""
        return calculate_signature(combine_request_content(ext_fields, body), secret_key)

    @staticmethod
    def verify_request(ext_fields: Mapping[str, object], body: bytes | None, secret_key: str) -> bool:
        """True if the request's ``Signature`` matches, computed with or without ``_UNIQUE_KEY_QUERY``.

        RocketMQ's verifier leaves ``_UNIQUE_KEY_QUERY`` out while its 4.9 client signs it
        (apache/rocketmq #5310): accepting either makes query-by-key work for both kinds of client.
        """
        given = ext_value_to_str(ext_fields.get(SIGNATURE))
        if not given:
            return False
        candidates: list[tuple[str, ...]] = [(SIGNATURE, UNIQUE_KEY_QUERY)]
        if UNIQUE_KEY_QUERY in ext_fields:
            candidates.append((SIGNATURE,))
        for exclude in candidates:
            expected = calculate_signature(
                combine_request_content(ext_fields, body, exclude=exclude), secret_key
            )
            if hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8")):
                return True
        return False
