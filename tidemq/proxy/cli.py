"""``tidemq proxy`` and the ``--grpc-*`` options of ``tidemq serve``.

``tidemq serve --grpc-port PORT`` adds the RocketMQ 5 endpoint in the broker's process (local
mode); the ready line gains ``grpc=HOST:PORT``. ``tidemq proxy --namesrv ADDR --grpc-port PORT``
runs it alone in front of every broker of a cluster (cluster mode) and prints
``tidemq ready grpc=HOST:PORT``. RocketMQ's proxy listens on 8081.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import click

DEFAULT_GRPC_PORT = 8081


def grpc_tls_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--grpc-tls-cert`` / ``--grpc-tls-key`` (PEM): TLS on the gRPC port instead of plaintext."""
    f = click.option(
        "--grpc-tls-key",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        help="PEM private key for --grpc-tls-cert.",
    )(f)
    return click.option(
        "--grpc-tls-cert",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        help="PEM certificate chain: serve the gRPC port over TLS (plaintext without it).",
    )(f)


def serve_grpc_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``tidemq serve``'s ``--grpc-port`` and TLS options."""
    f = grpc_tls_options(f)
    return click.option(
        "--grpc-port",
        type=click.IntRange(0, 65535),
        default=None,
        help="Serve RocketMQ 5 clients (gRPC, apache.rocketmq.v2) here (0 = free port; RocketMQ's proxy uses 8081).",
    )(f)


async def start_local(
    broker: Any, host: str, shown_host: str, port: int | None, tls_cert: str | None, tls_key: str | None
) -> tuple[dict[str, str], Callable[[], Awaitable[None]]]:
    """Start the local-mode endpoint when ``port`` is given: the ready-line fields and a stop coroutine."""
    if port is None:

        async def nothing() -> None:
            return None

        return {}, nothing
    from tidemq.proxy.server import GrpcProxy

    try:
        proxy = GrpcProxy.local(broker, host, port, tls_cert=tls_cert, tls_key=tls_key)
    except ValueError as exc:
        raise click.UsageError(f"--grpc-tls-cert / --grpc-tls-key: {exc}") from None
    bound = await proxy.start()
    return {"grpc": f"{shown_host}:{bound}"}, proxy.stop


@click.command("proxy")
@click.option(
    "--namesrv",
    "namesrv_addr",
    envvar="NAMESRV_ADDR",
    default="127.0.0.1:9876",
    show_default=True,
    help="Name server(s) of the cluster.",
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to listen on.")
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_GRPC_PORT,
    show_default=True,
    help="gRPC port (0 = free port).",
)
@grpc_tls_options
@click.option(
    "--acl",
    "acl_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Check MQv2-HMAC-SHA1 signatures against this plain_acl.yml.",
)
@click.option(
    "--access-key",
    envvar="TIDEMQ_ACCESS_KEY",
    default=None,
    help="ACL access key the proxy signs broker requests with.",
)
@click.option("--secret-key", envvar="TIDEMQ_SECRET_KEY", default=None, help="ACL secret key.")
def proxy_command(
    namesrv_addr: str,
    host: str,
    grpc_port: int,
    grpc_tls_cert: str | None,
    grpc_tls_key: str | None,
    acl_file: str | None,
    access_key: str | None,
    secret_key: str | None,
) -> None:
    """Serve RocketMQ 5 clients (gRPC) in front of every broker of a tidemq cluster."""
    from tidemq.cli import _host_for, _ready, _run
    from tidemq.proxy.server import GrpcProxy

    if (access_key is None) != (secret_key is None):
        raise click.UsageError("give both --access-key and --secret-key, or neither")
    hook = None
    if access_key is not None and secret_key is not None:
        from tidemq.acl.client_hook import AclClientRPCHook
        from tidemq.acl.common import SessionCredentials

        hook = AclClientRPCHook(SessionCredentials(access_key, secret_key))

    if (grpc_tls_cert is None) != (grpc_tls_key is None):
        raise click.UsageError("give both --grpc-tls-cert and --grpc-tls-key, or neither")

    async def run(stop: asyncio.Event) -> None:
        proxy = GrpcProxy.cluster(
            namesrv_addr,
            host,
            grpc_port,
            tls_cert=grpc_tls_cert,
            tls_key=grpc_tls_key,
            acl_file=acl_file,
            rpc_hook=hook,
        )
        bound = await proxy.start()
        _ready(f"tidemq ready grpc={_host_for(host)}:{bound}")
        try:
            await stop.wait()
        finally:
            await proxy.stop()

    _run(run)
