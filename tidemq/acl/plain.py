"""Plain ACL on the broker: ``plain_acl.yml``, per-request resources, the checks, the RPC hook.

Mirrors RocketMQ's ``PlainAccessValidator`` (parse a request into a ``PlainAccessResource``),
``PlainPermissionManager`` (load ``plain_acl.yml``, ``validate``, ``checkPerm``) and the hook
``BrokerController.initialAcl`` registers (protocol.md §9).

Order of the checks for each request (from the client's IP, port stripped):

1. the IP matches a ``globalWhiteRemoteAddresses`` entry -> allowed;
2. no (or empty) ``AccessKey`` -> ``No accessKey is configured``; unknown -> ``No acl config for X``;
3. the IP matches the account's ``whiteRemoteAddress`` -> allowed (no signature needed);
4. the ``Signature`` does not match -> ``Check signature failed for accessKey=X``;
5. admin-only request codes need ``admin: true``; each resource the request touches (topics by name,
   groups as ``%RETRY%<group>``) is checked against the account's explicit permission, else its
   ``defaultTopicPerm`` / ``defaultGroupPerm``.

A failure raises :class:`~tidemq.acl.common.AclError`, which the remoting layer answers with
``SYSTEM_ERROR`` (1) and the error text as remark (nothing for oneway requests).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from tidemq.acl.common import (
    ACCESS_KEY,
    ACCESS_KEY_MIN_LENGTH,
    SECURITY_TOKEN,
    SIGNATURE,
    AclConfigError,
    AclError,
    AclSigner,
    Permission,
)
from tidemq.acl.remote_address import RemoteAddressStrategy, host_of, parse_remote_address
from tidemq.errors import BodyError
from tidemq.protocol.body import HeartbeatData
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic, retry_topic

__all__ = [
    "TRACE_TOPIC",
    "PlainAccessConfig",
    "PlainAccessResource",
    "PlainAccessValidator",
    "PlainAclConfig",
    "PlainPermissionManager",
]

log = logging.getLogger(__name__)

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""Sends to the message-trace topic skip resource checks (signature still checked)."""

_SEND_V1 = {int(RequestCode.SEND_MESSAGE)}
_SEND_V2 = {int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)}


# -- plain_acl.yml ------------------------------------------------------------------------------


@dataclass(slots=True)
class PlainAccessConfig:
    """One ``accounts`` entry of ``plain_acl.yml``. Mirrors ``PlainAccessConfig`` (as loaded).

    Attributes:
        access_key / secret_key: the credentials (each longer than 6 characters).
        white_remote_address: pattern of client IPs allowed without a signature or permission check.
        admin: may send the admin-only request codes (create/delete topic or group, broker config).
        default_topic_perm / default_group_perm: :class:`Permission` bits for resources not listed.
        resource_perms: explicit permissions: topic name -> bits, ``%RETRY%<group>`` -> bits;
            ``None`` when the file lists none (an admin without any is then allowed everything).
    """

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = Permission.DENY
    default_group_perm: int = Permission.DENY
    resource_perms: dict[str, int] | None = None
    remote_address_strategy: RemoteAddressStrategy = field(default_factory=lambda: parse_remote_address(None))

    @classmethod
    def from_yaml_dict(cls, obj: Any, index: int = 0) -> PlainAccessConfig:
        """Build from one parsed ``accounts`` item (camelCase keys as in RocketMQ).

        Raises:
            AclConfigError: a key is too short or missing, or a permission / address is malformed.
        """
        where = f"accounts[{index}]"
        if not isinstance(obj, Mapping):
            raise AclConfigError(f"{where} must be a mapping with accessKey/secretKey, got {obj!r}")
        ak = "" if obj.get("accessKey") is None else str(obj["accessKey"])
        sk = "" if obj.get("secretKey") is None else str(obj["secretKey"])
        for name, value in (("accessKey", ak), ("secretKey", sk)):
            if len(value) <= ACCESS_KEY_MIN_LENGTH:
                raise AclConfigError(
                    f"{where}: {name} {value!r} is too short: it must be longer than {ACCESS_KEY_MIN_LENGTH}"
                    " characters"
                )
        try:
            white = obj.get("whiteRemoteAddress")
            perms: dict[str, int] | None = None
            for key, to_resource in (("topicPerms", str), ("groupPerms", retry_topic)):
                for name, perm in _parse_resource_perms(obj.get(key), key):
                    perms = {} if perms is None else perms
                    perms[to_resource(name)] = perm
            return cls(
                access_key=ak,
                secret_key=sk,
                white_remote_address=None if white is None else str(white),
                admin=_as_bool(obj.get("admin", False), "admin"),
                default_topic_perm=Permission.parse_perm_from_string(_opt_str(obj.get("defaultTopicPerm"))),
                default_group_perm=Permission.parse_perm_from_string(_opt_str(obj.get("defaultGroupPerm"))),
                resource_perms=perms,
                remote_address_strategy=parse_remote_address(None if white is None else str(white)),
            )
        except AclConfigError as exc:
            raise AclConfigError(f"{where} (accessKey={ak}): {exc}") from None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise AclConfigError(f"{name} must be true or false, got {value!r}")


def _parse_resource_perms(items: Any, key: str) -> list[tuple[str, int]]:
    """``["topicA=DENY", "topicB=PUB|SUB"]`` (or a ``{name: perm}`` mapping) -> pairs."""
    if items is None:
        return []
    if isinstance(items, Mapping):
        return [(str(k).strip(), Permission.parse_perm_from_string(str(v))) for k, v in items.items()]
    if not isinstance(items, list):
        raise AclConfigError(f"{key} must be a list of 'name=PERM' entries, got {items!r}")
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, Mapping) and len(item) == 1:
            ((name, perm),) = item.items()
            out.append((str(name).strip(), Permission.parse_perm_from_string(str(perm))))
            continue
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise AclConfigError(f"{key} entry {item!r} is not 'name=PERM' (e.g. topicA=PUB|SUB)")
        out.append((name.strip(), Permission.parse_perm_from_string(perm)))
    return out


@dataclass(slots=True)
class PlainAclConfig:
    """The whole of ``plain_acl.yml``, compiled.

    Attributes:
        global_white_remote_addresses: patterns whose clients skip every check.
        accounts: access key -> account.
    """

    global_white_remote_addresses: list[RemoteAddressStrategy] = field(default_factory=list)
    accounts: dict[str, PlainAccessConfig] = field(default_factory=dict)

    @classmethod
    def from_yaml(cls, text: str, source: str = "plain_acl.yml") -> PlainAclConfig:
        """Parse YAML text (an empty document means no accounts).

        Raises:
            AclConfigError: not YAML, not a mapping, or a bad entry; the message starts with ``source``.
        """
        try:
            obj = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AclConfigError(f"{source}: not valid YAML: {exc}") from None
        try:
            return cls.from_dict(obj or {})
        except AclConfigError as exc:
            raise AclConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_dict(cls, obj: Any) -> PlainAclConfig:
        """Build from the parsed YAML document (keys ``globalWhiteRemoteAddresses``, ``accounts``).

        Raises:
            AclConfigError: see :meth:`from_yaml`.
        """
        if not isinstance(obj, Mapping):
            raise AclConfigError(f"the top level must be a mapping, got {type(obj).__name__}")
        white = obj.get("globalWhiteRemoteAddresses") or []
        if not isinstance(white, list):
            white = [white]
        raw_accounts = obj.get("accounts") or []
        if not isinstance(raw_accounts, list):
            raise AclConfigError("accounts must be a list")
        accounts: dict[str, PlainAccessConfig] = {}
        for i, item in enumerate(raw_accounts):
            account = PlainAccessConfig.from_yaml_dict(item, i)
            if account.access_key in accounts:
                raise AclConfigError(f"accounts[{i}]: accessKey {account.access_key} is listed twice")
            accounts[account.access_key] = account
        return cls([parse_remote_address(str(w)) for w in white if w is not None], accounts)

    @classmethod
    def load(cls, path: str | Path) -> PlainAclConfig:
        """Read and parse ``path``.

        Raises:
            AclConfigError: the file is missing or unreadable, or see :meth:`from_yaml`.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise AclConfigError(f"ACL is enabled but the ACL file {path} does not exist") from None
        except OSError as exc:
            raise AclConfigError(f"cannot read the ACL file {path}: {exc}") from None
        return cls.from_yaml(text, str(path))


# -- what a request asks for -------------------------------------------------------------------


@dataclass(slots=True)
class PlainAccessResource:
    """The ACL view of one request. Mirrors ``PlainAccessResource`` as built by ``parse``.

    Attributes:
        remote_ip: the client's IP (port stripped).
        request_code: the request code.
        access_key / signature / security_token: the ext fields of those names (``None`` if absent).
        resource_perms: resource -> needed :class:`Permission` bit (topics by name, groups as
            ``%RETRY%<group>``).
        ext_fields / body: what the signature covers.
    """

    remote_ip: str
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resource_perms: dict[str, int] = field(default_factory=dict)
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def add_resource_and_perm(self, resource: str | None, perm: int) -> None:
        """Require ``perm`` on ``resource`` (ignored when ``resource`` is ``None`` or empty)."""
        if resource:
            self.resource_perms[resource] = perm

    @classmethod
    def parse(cls, request: RemotingCommand, remote_addr: str) -> PlainAccessResource:
        """Build the resource view of ``request`` from ``remote_addr`` (``"ip:port"``).

        Resources per request code (protocol.md §9): SEND_MESSAGE / V2 / batch -> topic PUB (a
        ``%RETRY%`` topic: that group SUB; ``RMQ_SYS_TRACE_TOPIC``: none); CONSUMER_SEND_MSG_BACK ->
        group SUB; PULL_MESSAGE, POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and each entry
        of a BATCH_ACK_MESSAGE -> topic SUB + group SUB; QUERY_MESSAGE -> topic SUB; HEART_BEAT ->
        each consumer group SUB + each subscribed topic SUB; UNREGISTER_CLIENT /
        GET_CONSUMER_LIST_BY_GROUP -> group SUB; UPDATE_CONSUMER_OFFSET -> group SUB + topic SUB.

        Raises:
            AclError: a HEART_BEAT body cannot be decoded.
        """
        ext = request.ext_fields
        res = cls(
            remote_ip=host_of(remote_addr),
            request_code=request.code,
            access_key=ext.get(ACCESS_KEY),
            signature=ext.get(SIGNATURE),
            security_token=ext.get(SECURITY_TOKEN),
            ext_fields=ext,
            body=request.body or b"",
        )
        code = request.code
        group_of = _group_resource
        if code in _SEND_V1 or code in _SEND_V2:
            topic = ext.get("topic") if code in _SEND_V1 else ext.get("b")
            if topic and is_retry_topic(topic):
                res.add_resource_and_perm(topic, Permission.SUB)
            elif topic != TRACE_TOPIC:
                res.add_resource_and_perm(topic, Permission.PUB)
        elif code == RequestCode.RECALL_MESSAGE:
            res.add_resource_and_perm(ext.get("topic"), Permission.PUB)
        elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
            res.add_resource_and_perm(group_of(ext.get("group")), Permission.SUB)
        elif code in _CONSUME:  # PULL_MESSAGE and RocketMQ 5's POP requests
            res.add_resource_and_perm(ext.get("topic"), Permission.SUB)
            res.add_resource_and_perm(group_of(ext.get("consumerGroup")), Permission.SUB)
        elif code == RequestCode.BATCH_ACK_MESSAGE:
            _batch_ack_resources(res, request.body or b"")
        elif code == RequestCode.QUERY_MESSAGE:
            res.add_resource_and_perm(ext.get("topic"), Permission.SUB)
        elif code == RequestCode.HEART_BEAT:
            try:
                heartbeat = HeartbeatData.decode(request.body or b"{}")
            except BodyError as exc:
                raise AclError(f"cannot read the heartbeat for the ACL check: {exc}") from None
            for consumer in heartbeat.consumer_data_set:
                res.add_resource_and_perm(group_of(consumer.group_name), Permission.SUB)
                for sub in consumer.subscription_data_set:  # %RETRY%<group> counts as the group
                    res.add_resource_and_perm(sub.topic, Permission.SUB)
        elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
            res.add_resource_and_perm(group_of(ext.get("consumerGroup")), Permission.SUB)
        elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
            res.add_resource_and_perm(group_of(ext.get("consumerGroup")), Permission.SUB)
            res.add_resource_and_perm(ext.get("topic"), Permission.SUB)
        return res


_CONSUME = {
    int(RequestCode.PULL_MESSAGE),
    int(RequestCode.POP_MESSAGE),
    int(RequestCode.ACK_MESSAGE),
    int(RequestCode.CHANGE_MESSAGE_INVISIBLETIME),
}


def _batch_ack_resources(res: PlainAccessResource, body: bytes) -> None:
    """BATCH_ACK_MESSAGE: topic SUB + group SUB of every entry of its body."""
    from tidemq.protocol.headers.pop import BatchAckMessageRequestBody

    try:
        acks = BatchAckMessageRequestBody.decode(body).acks
    except ValueError as exc:
        raise AclError(f"cannot read the batch ack for the ACL check: {exc}") from None
    for ack in acks:
        res.add_resource_and_perm(ack.topic, Permission.SUB)
        res.add_resource_and_perm(_group_resource(ack.consumer_group), Permission.SUB)


def _group_resource(group: str | None) -> str | None:
    return retry_topic(group) if group else None


def _describe(resource: str) -> str:
    if is_retry_topic(resource):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return "topic:" + resource


# -- the checks ---------------------------------------------------------------------------------


class PlainPermissionManager:
    """Holds the loaded ``plain_acl.yml`` and validates requests. Mirrors ``PlainPermissionManager``.

    Args:
        path: the ``plain_acl.yml`` file.
        watch_interval: seconds between checks of the file's modification time (hot reload, as
            RocketMQ's ``FileWatchService``); ``0`` disables reloading. A changed file that fails
            to load is logged and the previous configuration stays in force.

    Raises:
        AclConfigError: the file is missing or invalid at construction.
    """

    def __init__(self, path: str | Path, *, watch_interval: float = 1.0) -> None:
        self.path = Path(path)
        self.watch_interval = watch_interval
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self.config = PlainAclConfig.load(self.path)
        self._next_check = time.monotonic() + watch_interval

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def reload(self) -> None:
        """Load the file again now.

        Raises:
            AclConfigError: the file is missing or invalid (the current configuration is kept).
        """
        stamp = self._file_stamp()
        config = PlainAclConfig.load(self.path)
        with self._lock:
            self.config, self._stamp = config, stamp
        log.info("ACL: loaded %s (%d accounts)", self.path, len(config.accounts))

    def maybe_reload(self) -> bool:
        """Reload if the file changed since the last load (at most once per ``watch_interval``).

        Returns:
            True if a new configuration was loaded.
        """
        if self.watch_interval <= 0:
            return False
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + self.watch_interval
        stamp = self._file_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        try:
            self.reload()
        except AclConfigError as exc:
            self._stamp = stamp  # do not retry until the file changes again
            log.error("ACL: keeping the previous configuration: %s", exc)
            return False
        return True

    def validate(self, resource: PlainAccessResource) -> None:
        """Allow ``resource`` or raise. Mirrors ``PlainPermissionManager.validate``.

        Raises:
            AclError: with the reason (see the module doc for the order and texts).
        """
        self.maybe_reload()
        config = self.config
        for strategy in config.global_white_remote_addresses:
            if strategy.match(resource.remote_ip):
                return
        if not resource.access_key:
            raise AclError(
                f"No accessKey is configured (request code {resource.request_code} from {resource.remote_ip})"
            )
        owned = config.accounts.get(resource.access_key)
        if owned is None:
            raise AclError(f"No acl config for {resource.access_key}")
        if owned.remote_address_strategy.match(resource.remote_ip):
            return
        if not AclSigner.verify_request(resource.ext_fields, resource.body, owned.secret_key):
            raise AclError(f"Check signature failed for accessKey={resource.access_key}")
        self.check_perm(resource, owned)

    @staticmethod
    def check_perm(needed: PlainAccessResource, owned: PlainAccessConfig) -> None:
        """Check admin-only codes and each needed resource. Mirrors ``PlainPermissionManager.checkPerm``.

        Raises:
            AclError: naming the code or the resource (``topic:X`` / ``group:G``) refused.
        """
        if Permission.need_admin_perm(needed.request_code) and not owned.admin:
            raise AclError(
                f"Need admin permission for request code={needed.request_code},"
                f" but accessKey={owned.access_key} is not"
            )
        if not needed.resource_perms:
            return
        explicit = owned.resource_perms
        if explicit is None and owned.admin:
            return
        for resource, perm in needed.resource_perms.items():
            is_group = is_retry_topic(resource)
            if explicit is not None and resource in explicit:
                have = explicit[resource]
                what = "No permission for"
            else:
                have = owned.default_group_perm if is_group else owned.default_topic_perm
                what = "No default permission for"
            if not Permission.check_permission(perm, have):
                raise AclError(
                    f"{what} {_describe(resource)}: accessKey={owned.access_key} has"
                    f" {Permission.name(have)}, needs {Permission.name(perm)}"
                )


class PlainAccessValidator:
    """The broker's ACL RPC hook. Mirrors ``PlainAccessValidator`` + the hook of ``initialAcl``.

    Register with ``RemotingServer.register_rpc_hook``: :meth:`do_before_request` raises
    :class:`AclError` for refused requests, which the server answers with ``SYSTEM_ERROR`` (1)
    and the error text (nothing for oneway requests).

    Args:
        path: the ``plain_acl.yml`` file.
        watch_interval: hot-reload check period in seconds (``0`` = never reload).

    Raises:
        AclConfigError: the file is missing or invalid.
    """

    def __init__(self, path: str | Path, *, watch_interval: float = 1.0) -> None:
        self.manager = PlainPermissionManager(path, watch_interval=watch_interval)

    def parse(self, request: RemotingCommand, remote_addr: str) -> PlainAccessResource:
        """See :meth:`PlainAccessResource.parse`."""
        return PlainAccessResource.parse(request, remote_addr)

    def validate(self, resource: PlainAccessResource) -> None:
        """See :meth:`PlainPermissionManager.validate`."""
        self.manager.validate(resource)

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        """Validate an incoming request; raise :class:`AclError` to refuse it."""
        try:
            self.validate(self.parse(request, remote_addr))
        except AclError as exc:
            log.info("ACL: refused request code %d from %s: %s", request.code, remote_addr, exc)
            raise

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        """Nothing to do after the response."""
