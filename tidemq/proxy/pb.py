"""The generated ``apache.rocketmq.v2`` modules, from the official Python client.

PyPI ``rocketmq-python-client`` ships them as ``rocketmq.grpc_protocol`` (messages and the
``MessagingServiceServicer`` server classes): tidemq uses those rather than a copy of the protos.
Every proxy module imports them from here, so the import (and the hint when the package is
missing) lives in one place.

Raises:
    ImportError: at import, naming the ``grpc`` extra, when the package is not installed.
"""

from __future__ import annotations

from typing import Any

try:
    from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "the RocketMQ 5 gRPC endpoint needs grpcio and rocketmq-python-client: pip install 'tidemq[grpc]'"
    ) from exc

d: Any = definition_pb2
"""``apache/rocketmq/v2/definition.proto``: Message, Resource, Status, Code, Settings..."""
s: Any = service_pb2
"""``apache/rocketmq/v2/service.proto``: the requests and responses."""
grpc_service: Any = service_pb2_grpc
"""``MessagingServiceServicer`` and ``add_MessagingServiceServicer_to_server``."""

Code: Any = definition_pb2.Code
MessageType: Any = definition_pb2.MessageType
ClientType: Any = definition_pb2.ClientType
