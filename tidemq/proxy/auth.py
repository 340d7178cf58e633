"""MQv2-HMAC-SHA1 request signatures, checked against the remoting ACL's accounts.

Mirrors RocketMQ 5's ``DefaultAuthenticationContextBuilder`` (rocketmq5.md §1)::

    authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>

The signature is HMAC-SHA1(secret key, the ``x-mq-date-time`` header's bytes) in hex (Python
writes lowercase, Node uppercase: compared case-insensitively). The access key is the Credential up
to its first ``/``. With ACL on, the account must exist in ``plain_acl.yml`` and its topic / group
permissions are checked as for remoting requests (``PlainPermissionManager.check_perm``).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.acl.client_hook import AclClientRPCHook
from tidemq.acl.common import AclError, Permission, SessionCredentials
from tidemq.acl.plain import PlainAccessResource, PlainPermissionManager
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.topic import retry_topic
from tidemq.proxy import codes

if TYPE_CHECKING:
    from pathlib import Path

    from tidemq.protocol.command import RemotingCommand

ALGORITHM = "MQv2-HMAC-SHA1"


@dataclass(slots=True, frozen=True)
class Authorization:
    """The parsed ``authorization`` header."""

    access_key: str
    signed_headers: str
    signature: str


def parse_authorization(header: str) -> Authorization:
    """Split ``MQv2-HMAC-SHA1 Credential=.., SignedHeaders=.., Signature=..``.

    Raises:
        ProxyError: UNAUTHORIZED when the algorithm or a part is missing.
    """
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise codes.ProxyError(codes.UNAUTHORIZED, f"authorization algorithm must be {ALGORITHM}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key] = value
    credential = fields.get("Credential", "")
    signature = fields.get("Signature", "")
    if not credential or not signature:
        raise codes.ProxyError(codes.UNAUTHORIZED, "authorization lacks Credential or Signature")
    return Authorization(credential.split("/", 1)[0], fields.get("SignedHeaders", ""), signature)


def sign(secret_key: str, date_time: str) -> str:
    """The hex HMAC-SHA1 of ``date_time`` under ``secret_key`` (what clients send)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


class GrpcAuthenticator:
    """Checks v5 requests against ``plain_acl.yml`` (hot-reloaded as the broker's ACL is).

    Args:
        acl_file: the ``plain_acl.yml`` of the remoting ACL.
    """

    def __init__(self, acl_file: str | Path) -> None:
        self.manager = PlainPermissionManager(acl_file)

    def check(
        self,
        metadata: dict[str, str],
        remote_ip: str,
        topics: dict[str, int] | None = None,
        groups: dict[str, int] | None = None,
    ) -> None:
        """Allow the request or raise.

        Args:
            metadata: the request's gRPC headers (lowercase keys).
            remote_ip: the client's IP (white-listed addresses pass without a signature).
            topics / groups: stored names -> needed :class:`~tidemq.acl.common.Permission`.

        Raises:
            ProxyError: UNAUTHORIZED (no or bad signature, unknown account) or FORBIDDEN (permission).
        """
        manager = self.manager
        manager.maybe_reload()
        config = manager.config
        if any(s.match(remote_ip) for s in config.global_white_remote_addresses):
            return
        header = metadata.get("authorization", "")
        auth = parse_authorization(header) if header else None
        if auth is None or not auth.access_key:
            raise codes.ProxyError(codes.UNAUTHORIZED, "no AccessKey: this server requires signed requests")
        owned = config.accounts.get(auth.access_key)
        if owned is None:
            raise codes.ProxyError(codes.UNAUTHORIZED, f"No acl config for {auth.access_key}")
        if owned.remote_address_strategy.match(remote_ip):
            return
        expected = sign(owned.secret_key, metadata.get("x-mq-date-time", ""))
        if not hmac.compare_digest(expected, auth.signature.lower()):
            raise codes.ProxyError(
                codes.UNAUTHORIZED, f"Check signature failed for accessKey={auth.access_key}"
            )
        needed = PlainAccessResource(remote_ip=remote_ip, request_code=RequestCode.SEND_MESSAGE)
        for topic, perm in (topics or {}).items():
            needed.add_resource_and_perm(topic, perm)
        for group, perm in (groups or {}).items():
            needed.add_resource_and_perm(retry_topic(group), perm)
        try:
            manager.check_perm(needed, owned)
        except AclError as exc:
            raise codes.ProxyError(codes.FORBIDDEN, str(exc)) from None

    def sign_as_caller(self, metadata: dict[str, str], request: RemotingCommand) -> None:
        """Sign a remoting ``request`` with the calling client's account (found by the access key
        of its ``authorization`` header), so a broker that checks ACL itself (END_TRANSACTION)
        sees the same identity. Does nothing without a known account."""
        header = metadata.get("authorization", "")
        try:
            auth = parse_authorization(header) if header else None
        except codes.ProxyError:
            return
        owned = self.manager.config.accounts.get(auth.access_key) if auth else None
        if owned is not None:
            AclClientRPCHook(SessionCredentials(owned.access_key, owned.secret_key)).sign(request)


PUB = Permission.PUB
SUB = Permission.SUB
