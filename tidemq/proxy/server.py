"""The gRPC server: ``MessagingService`` on grpc.aio, plaintext (h2c) or TLS.

Both official v5 clients connect in plaintext by default (rocketmq5.md §1), so plaintext is the
default; given a certificate and key (PEM files) the port serves TLS instead.

Example (local mode, in the broker's process, as ``tidemq serve --grpc-port 0`` does)::

    proxy = GrpcProxy.local(broker, "0.0.0.0", 0)
    port = await proxy.start()
    ...
    await proxy.stop()
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidemq.proxy.backend import Backend
from tidemq.proxy.cluster import ClusterBackend
from tidemq.proxy.local import LocalBackend
from tidemq.proxy.pb import grpc_service
from tidemq.proxy.service import MessagingService

if TYPE_CHECKING:
    from tidemq.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_MESSAGE_LENGTH = 16 * 1024 * 1024
"""Largest gRPC message accepted or sent (bytes): a 4 MiB body and its properties fit, as a frame does."""


class GrpcProxy:
    """The RocketMQ 5 endpoint. Mirrors RocketMQ 5's ``GrpcServer`` + ``GrpcMessagingApplication``.

    Args:
        backend: the broker(s) behind it (:meth:`local` or :meth:`cluster` build one).
        host: interface to listen on.
        port: TCP port; 0 picks a free one (read :attr:`port` after :meth:`start`).
        tls_cert / tls_key: PEM certificate chain and private key: TLS instead of plaintext.
        acl_file: ``plain_acl.yml``: check MQv2-HMAC-SHA1 signatures and permissions against it.
        consumer_config: receive limits (:class:`~tidemq.proxy.consumer.ConsumerConfig`; RocketMQ's defaults).

    Raises:
        OSError: the TLS files cannot be read.
        ValueError: only one of the certificate and the key was given.
    """

    def __init__(
        self,
        backend: Backend,
        host: str = "0.0.0.0",
        port: int = 8081,
        *,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        acl_file: str | None = None,
        consumer_config: Any = None,
    ) -> None:
        self.backend = backend
        self.host = host
        self.port = port
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("TLS needs both a certificate and a key")
        self._tls_pem = (
            None
            if tls_cert is None or tls_key is None
            else (Path(tls_key).read_bytes(), Path(tls_cert).read_bytes())
        )
        auth = None
        if acl_file:
            from tidemq.proxy.auth import GrpcAuthenticator

            auth = GrpcAuthenticator(acl_file)
        self.service = MessagingService(backend, auth)
        from tidemq.proxy.consumer import ConsumerActivity, ConsumerConfig

        self.service.consumer = ConsumerActivity(backend, consumer_config or ConsumerConfig())
        from tidemq.proxy.transaction import TransactionActivity

        tx = TransactionActivity(backend, self.service)
        self.service.transactions = tx
        self.service.producer.sent_hook = tx.on_sent
        if isinstance(backend, LocalBackend):
            name = backend.broker.config.broker_name
            backend.on_broker_request = lambda _client, cmd: tx.on_check(name, cmd)
        elif isinstance(backend, ClusterBackend):
            backend.on_broker_request = tx.on_check
        self._server: Any = None

    @classmethod
    def local(cls, broker: Broker, host: str = "0.0.0.0", port: int = 8081, **kwargs: Any) -> GrpcProxy:
        """The endpoint in the broker's process (its ACL file is used when the broker has ACL on)."""
        if broker.config.acl_enable and "acl_file" not in kwargs:
            kwargs["acl_file"] = str(broker.config.acl_file or Path(broker.config_dir) / "plain_acl.yml")
        proxy = cls(LocalBackend(broker), host, port, **kwargs)
        return proxy

    @classmethod
    def cluster(cls, namesrv_addr: str, host: str = "0.0.0.0", port: int = 8081, **kwargs: Any) -> GrpcProxy:
        """The endpoint in front of every broker registered with ``namesrv_addr``."""
        rpc_hook = kwargs.pop("rpc_hook", None)
        proxy = cls(ClusterBackend(namesrv_addr, rpc_hook=rpc_hook), host, port, **kwargs)
        return proxy

    async def start(self) -> int:
        """Bind and serve; returns the port.

        Raises:
            OSError: the port cannot be bound.
        """
        import grpc

        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_LENGTH),
            ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        grpc_service.add_MessagingServiceServicer_to_server(self.service, server)
        address = f"{self.host}:{self.port}"
        try:
            if self._tls_pem is not None:
                bound = server.add_secure_port(address, grpc.ssl_server_credentials([self._tls_pem]))
            else:
                bound = server.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address ..."
            raise OSError(f"cannot bind the gRPC port {address} (in use?): {exc}") from None
        if not bound:
            raise OSError(f"cannot bind the gRPC port {address}")
        await server.start()
        self._server, self.port = server, int(bound)
        log.info(
            "gRPC endpoint (apache.rocketmq.v2) listening on %s:%d%s",
            self.host,
            bound,
            " (TLS)" if self.tls_cert else "",
        )
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving (open streams get ``grace`` seconds), then close the cluster connections."""
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self.service.consumer is not None:
            await self.service.consumer.renewer.stop()
        close = getattr(self.backend, "close", None)
        if close is not None:
            await close()
