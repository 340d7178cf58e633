"""RocketMQ 4.x plain ACL: request signing (client) and access checks (broker).

Client: set ``access_key`` / ``secret_key`` (and optionally ``security_token``) in a
:class:`~tidemq.client.config.ClientConfig`; every request is then signed by
:class:`AclClientRPCHook`. Broker: ``BrokerConfig.acl_enable = True`` (``aclEnable=true`` in
``broker.conf``) installs :class:`PlainAccessValidator` over ``plain_acl.yml``. See docs/acl.md.
"""

from tidemq.acl.client_hook import AclClientRPCHook
from tidemq.acl.common import (
    ACCESS_KEY,
    ONS_CHANNEL,
    SECURITY_TOKEN,
    SIGNATURE,
    AclConfigError,
    AclError,
    AclSigner,
    Permission,
    SessionCredentials,
    calculate_signature,
    combine_request_content,
)
from tidemq.acl.plain import (
    PlainAccessConfig,
    PlainAccessResource,
    PlainAccessValidator,
    PlainAclConfig,
    PlainPermissionManager,
)
from tidemq.acl.remote_address import RemoteAddressStrategy, parse_remote_address

__all__ = [
    "ACCESS_KEY",
    "ONS_CHANNEL",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "AclClientRPCHook",
    "AclConfigError",
    "AclError",
    "AclSigner",
    "Permission",
    "PlainAccessConfig",
    "PlainAccessResource",
    "PlainAccessValidator",
    "PlainAclConfig",
    "PlainPermissionManager",
    "RemoteAddressStrategy",
    "SessionCredentials",
    "calculate_signature",
    "combine_request_content",
    "parse_remote_address",
]
