"""The ``tidemq`` command line: ``tidemq serve | namesrv | broker`` (others add their commands).

``tidemq serve`` runs a name server and a broker in one process (store under ``~/.tidemq/store``
unless ``--store``), prints exactly one line on stdout once both accept connections::

    tidemq ready namesrv=127.0.0.1:9876 broker=127.0.0.1:10911

and stops cleanly on SIGINT/SIGTERM (flush, checkpoint, remove the abort file), exit status 0.
Logs go to stderr. Other commands register with ``main.add_command(...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from tidemq.broker.transaction.options import apply_transaction_options, transaction_options
from tidemq.errors import TideMQError
from tidemq.proxy.cli import serve_grpc_options, start_local
from tidemq.remoting.busy_poll import SERVE_IDLE_POLL_US

log = logging.getLogger("tidemq.cli")

DEFAULT_STORE = "~/.tidemq/store"


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


SERVER_COMMANDS = frozenset({"serve", "namesrv", "broker", "cluster", "dashboard", "proxy"})
"""Commands that log at INFO by default; the client commands (send, consume, admin...) log warnings only."""


class _MainGroup(click.Group):
    """Accepts ``--log-level LEVEL`` after the subcommand too (``tidemq send ... --log-level DEBUG``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_log_level(args))


def hoist_log_level(args: list[str]) -> list[str]:
    """Move ``--log-level X`` / ``--log-level=X`` found after the subcommand to the front (stops at ``--``)."""
    out: list[str] = []
    moved: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        if a == "--log-level" and i + 1 < len(args) and out:
            moved += [a, args[i + 1]]
            i += 2
            continue
        if a.startswith("--log-level=") and out:
            moved.append(a)
        else:
            out.append(a)
        i += 1
    return moved + out


@click.group(cls=_MainGroup)
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Log level (logs go to stderr) [INFO for servers, WARNING for client commands; -v on send/consume: INFO].",
)
@click.version_option(package_name="tidemq")
@click.pass_context
def main(ctx: click.Context, log_level: str | None) -> None:
    """tidemq: a RocketMQ 4.x compatible messaging system in pure Python."""
    if log_level is None:
        log_level = "INFO" if ctx.invoked_subcommand in SERVER_COMMANDS else "WARNING"
    _setup_logging(log_level)


def _config_error(exc: Exception) -> NoReturn:
    """Print a configuration error as one line on stderr and exit 1 (nothing has started)."""
    click.echo(f"tidemq: error: {exc}", err=True)
    sys.exit(1)


def _port_value(flag: str, raw: str | None) -> int | None:
    """Parse a ``--*-port`` flag through the shared config checks (``None`` = not given)."""
    from tidemq.broker.config_check import check_port

    try:
        return None if raw is None else check_port(flag, raw)
    except TideMQError as exc:
        _config_error(exc)


def _lock_store(sc: Any) -> Any:
    """Take the store's exclusive lock before anything starts (a second process exits here, with one
    line naming the store and the holder's pid)."""
    from tidemq.store.lock import StoreLock

    lock = StoreLock(sc.store_path_root_dir)
    try:
        lock.acquire()
    except TideMQError as exc:
        _config_error(exc)
    return lock


def _broker_configs(
    conf: str | None,
    store: str | None,
    host: str,
    port: str | None,
    flush: str | None,
    broker_name: str | None,
    namesrv: str | None,
    *,
    port_flag: str = "--port",
    idle_poll_us: str | None = None,
) -> tuple[Any, Any]:
    """BrokerConfig + MessageStoreConfig from defaults, ``-c broker.conf`` and the CLI flags, checked
    once by :func:`tidemq.broker.config_check.check_config`; an invalid value exits with one line.

    The broker runs in a process of its own here, so it polls after reads
    (``idle_poll_us`` = :data:`~tidemq.remoting.busy_poll.SERVE_IDLE_POLL_US`) unless
    ``--idle-poll-us`` or ``idlePollUs`` in the broker.conf says otherwise."""
    from tidemq.broker.config import BrokerConfig, load_broker_conf
    from tidemq.broker.config_check import apply_overrides, check_config, check_flush_flag
    from tidemq.store.config import MessageStoreConfig

    try:
        sources: dict[str, str] = {}
        if conf:
            bc, sc = load_broker_conf(conf, sources=sources, check=False)
        else:
            bc, sc = BrokerConfig(), MessageStoreConfig()
        flags: dict[str, str] = {"listen_host": host}
        sources["listen_host"] = "--host"
        if port is not None:
            flags["listen_port"], sources["listen_port"] = port, port_flag
        if broker_name:
            flags["broker_name"], sources["broker_name"] = broker_name, "--broker-name"
        elif not conf:
            bc.broker_name = "broker-a"
        if namesrv is not None:
            flags["namesrv_addr"], sources["namesrv_addr"] = namesrv, "--namesrv"
        if idle_poll_us is not None:
            flags["idle_poll_us"], sources["idle_poll_us"] = idle_poll_us, "--idle-poll-us"
        elif "idle_poll_us" not in sources:
            bc.idle_poll_us = SERVE_IDLE_POLL_US
        apply_overrides(bc, flags, sources)
        if store is not None or not conf:
            sc.store_path_root_dir = str(Path(store or DEFAULT_STORE).expanduser())
            sources["store_path_root_dir"] = "--store"
        if flush is not None:
            sc.flush_disk_type = check_flush_flag(flush)
            sources["flush_disk_type"] = "--flush"
        check_config(bc, sc, sources)
        Path(sc.store_path_root_dir).mkdir(parents=True, exist_ok=True)
    except (TideMQError, OSError) as exc:
        _config_error(exc)
    return bc, sc


def _run(main_coro: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main_coro(stop_event)`` on the best loop; SIGINT/SIGTERM set the event."""
    from tidemq.remoting.loop import use_best_event_loop

    use_best_event_loop()

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await main_coro(stop)

    try:
        asyncio.run(runner())
    except TideMQError as exc:
        click.echo(f"tidemq: error: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"tidemq: error: {exc}", err=True)
        sys.exit(1)


def _ready(line: str) -> None:
    """Print the server's ``tidemq ready ...`` line (what scripts and ``ServeProcess`` wait for),
    once start-up's objects are out of the cyclic garbage collector's way (:func:`freeze_startup_heap`)."""
    freeze_startup_heap()
    click.echo(line)
    sys.stdout.flush()


def freeze_startup_heap() -> None:
    """One full collection, then ``gc.freeze()``: what start-up made (modules, configs, the loaded
    store's tables; about 30,000 objects for ``tidemq serve``) moves to the permanent generation.

    A server process calls this once it is ready. Later full collections scan only what was made
    since: 0.04 ms instead of 10-34 ms of a stalled event loop for ``tidemq serve`` on a 2-core VM
    (every connected client waits for a full collection). Frozen objects are still freed by reference
    counting; only a start-up object in a reference cycle that later becomes garbage stays. Not for
    library code: the client leaves the application's collector alone.
    """
    import gc

    gc.collect()
    gc.freeze()


def _host_for(listen_host: str) -> str:
    from tidemq.broker.config import guess_broker_ip

    return guess_broker_ip(listen_host)


def _idle_poll_opt(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--idle-poll-us",
        metavar="US",
        default=None,
        help=f"While requests come close together, keep polling connections this many µs after each "
        f"read instead of sleeping, so the next request need not wake a sleeping CPU (0 = off) "
        f"[{SERVE_IDLE_POLL_US}, or idlePollUs of -c].",
    )(f)


def _transaction_flags(bc: Any, sc: Any, given: dict[str, str | None]) -> None:
    """Apply the ``--transaction-*`` options (exit with one line on a bad value)."""
    try:
        apply_transaction_options(bc, sc, given)
    except TideMQError as exc:
        _config_error(exc)


def _flush_opt(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--flush",
        metavar="[async|sync]",
        default=None,
        help="ASYNC_FLUSH (default) or SYNC_FLUSH: acknowledge sends only after fsync.",
    )(f)


@main.command()
@click.option(
    "--store", type=click.Path(file_okay=False), default=None, help=f"Store directory [{DEFAULT_STORE}]."
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to listen on.")
@click.option("--namesrv-port", default="9876", show_default=True, help="Name server port (0 = free port).")
@click.option("--broker-port", default=None, help="Broker port (0 = free port) [10911, or listenPort of -c].")
@_flush_opt
@_idle_poll_opt
@click.option(
    "-c", "--config", "conf", type=click.Path(dir_okay=False, exists=True), help="RocketMQ broker.conf."
)
@click.option("--broker-name", default=None, help="Broker name [broker-a, or brokerName from -c].")
@click.option(
    "--acl",
    "acl_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Enable plain ACL with this plain_acl.yml (see docs/acl.md).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus /metrics here (0 = free port).",
)
@click.option(
    "--dashboard-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the web dashboard here (0 = free port).",
)
@serve_grpc_options
@transaction_options
def serve(
    store: str | None,
    host: str,
    namesrv_port: str,
    broker_port: str | None,
    flush: str | None,
    idle_poll_us: str | None,
    conf: str | None,
    broker_name: str | None,
    acl_file: str | None,
    metrics_port: int | None,
    dashboard_port: int | None,
    grpc_port: int | None,
    grpc_tls_cert: str | None,
    grpc_tls_key: str | None,
    **transaction: str | None,
) -> None:
    """Run a name server and a broker in one process (plus /metrics, the dashboard and the RocketMQ 5
    gRPC endpoint when asked)."""
    ns_port = _port_value("--namesrv-port", namesrv_port)
    bc, sc = _broker_configs(
        conf,
        store,
        host,
        broker_port,
        flush,
        broker_name,
        None,
        port_flag="--broker-port",
        idle_poll_us=idle_poll_us,
    )
    _transaction_flags(bc, sc, transaction)
    if acl_file:
        bc.acl_enable, bc.acl_file = True, str(Path(acl_file).resolve())
    store_lock = _lock_store(sc)
    extras = _ServeExtras(metrics_port, dashboard_port, acl_file, grpc_port, grpc_tls_cert, grpc_tls_key)
    _run(lambda stop: _serve_until_stopped(stop, host, ns_port or 0, bc, sc, store_lock, extras))


@dataclass(frozen=True, slots=True)
class _ServeExtras:
    """What ``tidemq serve`` runs beside the name server and the broker (None = not asked for)."""

    metrics_port: int | None
    dashboard_port: int | None
    acl_file: str | None
    grpc_port: int | None
    grpc_tls_cert: str | None
    grpc_tls_key: str | None


async def _serve_until_stopped(
    stop: asyncio.Event, host: str, ns_port: int, bc: Any, sc: Any, store_lock: Any, extras: _ServeExtras
) -> None:
    """``tidemq serve``'s process: name server, broker, /metrics and dashboard, gRPC endpoint, started
    in that order; the ready line; then, once ``stop`` is set (or a start fails), whatever started is
    stopped in the reverse order."""
    from tidemq.broker.broker import Broker
    from tidemq.namesrv.config import NamesrvConfig
    from tidemq.namesrv.server import NameServer

    async with contextlib.AsyncExitStack() as started:
        namesrv = NameServer(NamesrvConfig(), host, ns_port)
        await namesrv.start()
        started.push_async_callback(namesrv.shutdown)
        ns_addr = f"{_host_for(host)}:{namesrv.port}"
        bc.namesrv_addr = ns_addr
        broker = Broker(bc, sc, store_lock=store_lock)
        await broker.start()
        started.push_async_callback(broker.shutdown)
        fields = await _start_ops_servers(
            broker, ns_addr, host, extras.metrics_port, extras.dashboard_port, extras.acl_file
        )
        started.callback(fields.pop("stop"))
        # the gRPC port may be taken or a TLS file unreadable: what started above stops cleanly
        grpc_fields, stop_grpc = await start_local(
            broker, host, _host_for(host), extras.grpc_port, extras.grpc_tls_cert, extras.grpc_tls_key
        )
        started.push_async_callback(stop_grpc)
        fields.update(grpc_fields)
        _ready(
            f"tidemq ready namesrv={ns_addr} broker={broker.addr}"
            + "".join(f" {k}={v}" for k, v in fields.items())
        )
        try:
            await stop.wait()
        finally:
            log.info("stopping")


async def _start_ops_servers(
    broker: Any,
    ns_addr: str,
    host: str,
    metrics_port: int | None,
    dashboard_port: int | None,
    acl_file: str | None,
) -> dict[str, Any]:
    """Start /metrics and the dashboard when asked; returns the ready-line fields and a ``stop`` callable."""
    stops: list[Callable[[], None]] = []
    fields: dict[str, Any] = {}
    shown_host = _host_for(host)
    if metrics_port is not None:
        from tidemq.broker.metrics import MetricsServer

        metrics = MetricsServer(broker, host, metrics_port)
        fields["metrics"] = f"{shown_host}:{metrics.start()}"
        stops.append(metrics.stop)
    if dashboard_port is not None:
        from tidemq.admin.dashboard import DashboardServer

        keys = _first_admin_account(acl_file) if acl_file else (None, None)
        dash = DashboardServer(ns_addr, host, dashboard_port, access_key=keys[0], secret_key=keys[1])
        port = await asyncio.get_running_loop().run_in_executor(None, dash.start)
        fields["dashboard"] = f"{shown_host}:{port}"
        stops.append(dash.stop)

    def stop() -> None:
        for fn in reversed(stops):
            with contextlib.suppress(Exception):
                fn()

    fields["stop"] = stop
    return fields


def _first_admin_account(acl_file: str) -> tuple[str | None, str | None]:
    """The keys of the first ``admin: true`` account of ``plain_acl.yml`` (for the embedded dashboard)."""
    from tidemq.acl.plain import PlainAclConfig

    config = PlainAclConfig.from_yaml(Path(acl_file).read_text(encoding="utf-8"), acl_file)
    for account in config.accounts.values():
        if account.admin:
            return account.access_key, account.secret_key
    return None, None


@main.command()
@click.option(
    "--namesrv",
    "namesrv_addr",
    envvar="NAMESRV_ADDR",
    default="127.0.0.1:9876",
    show_default=True,
    help="Name server(s) of the cluster.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port (0 = free port)."
)
@click.option(
    "--access-key", envvar="TIDEMQ_ACCESS_KEY", default=None, help="ACL access key (admin account)."
)
@click.option("--secret-key", envvar="TIDEMQ_SECRET_KEY", default=None, help="ACL secret key.")
def dashboard(
    namesrv_addr: str, host: str, port: int, access_key: str | None, secret_key: str | None
) -> None:
    """Serve the web dashboard for a tidemq or RocketMQ cluster."""
    from tidemq.admin.dashboard import DashboardServer

    if (access_key is None) != (secret_key is None):
        raise click.UsageError("give both --access-key and --secret-key, or neither")
    server = DashboardServer(namesrv_addr, host, port, access_key=access_key, secret_key=secret_key)
    try:
        bound = server.start()
    except OSError as exc:
        click.echo(f"tidemq: error: {exc}", err=True)
        sys.exit(1)
    _ready(f"tidemq ready dashboard={_host_for(host)}:{bound}")

    async def run(stop: asyncio.Event) -> None:
        try:
            await stop.wait()
        finally:
            await asyncio.get_running_loop().run_in_executor(None, server.stop)

    _run(run)


@main.command()
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to listen on.")
@click.option("--port", default="9876", show_default=True, help="Port (0 = free port).")
def namesrv(host: str, port: str) -> None:
    """Run a name server alone."""
    from tidemq.namesrv.config import NamesrvConfig
    from tidemq.namesrv.server import NameServer

    port_no = _port_value("--port", port) or 0

    async def run(stop: asyncio.Event) -> None:
        server = NameServer(NamesrvConfig(), host, port_no)
        await server.start()
        _ready(f"tidemq ready namesrv={_host_for(host)}:{server.port}")
        try:
            await stop.wait()
        finally:
            await server.shutdown()

    _run(run)


@main.command()
@click.option("--namesrv", "namesrv_addr", default=None, help="Name servers, 'host:port;host:port'.")
@click.option(
    "--store", type=click.Path(file_okay=False), default=None, help=f"Store directory [{DEFAULT_STORE}]."
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to listen on.")
@click.option("--port", default=None, help="Broker port (0 = free port) [10911, or listenPort of -c].")
@_flush_opt
@_idle_poll_opt
@click.option(
    "-c", "--config", "conf", type=click.Path(dir_okay=False, exists=True), help="RocketMQ broker.conf."
)
@click.option("--broker-name", default=None, help="Broker name.")
@transaction_options
def broker(
    namesrv_addr: str | None,
    store: str | None,
    host: str,
    port: str | None,
    flush: str | None,
    idle_poll_us: str | None,
    conf: str | None,
    broker_name: str | None,
    **transaction: str | None,
) -> None:
    """Run a broker alone, registering with the name servers given by --namesrv (or namesrvAddr)."""
    from tidemq.broker.broker import Broker

    bc, sc = _broker_configs(
        conf, store, host, port, flush, broker_name, namesrv_addr, idle_poll_us=idle_poll_us
    )
    _transaction_flags(bc, sc, transaction)
    if not bc.namesrv_addr_list():
        raise click.UsageError("no name server: pass --namesrv host:port (or namesrvAddr in -c broker.conf)")

    store_lock = _lock_store(sc)

    async def run(stop: asyncio.Event) -> None:
        b = Broker(bc, sc, store_lock=store_lock)
        await b.start()
        ha = f" ha={b.addr.rsplit(':', 1)[0]}:{b.ha.service.port}" if b.ha and b.ha.service else ""
        _ready(f"tidemq ready broker={b.addr}{ha}")
        try:
            await stop.wait()
        finally:
            await b.shutdown()

    _run(run)


def _register_subcommands() -> None:
    """Attach the commands that live with their layer (client, admin, pipelines).

    Those modules import only click and tidemq (heavy imports such as pyspark happen inside the
    commands), so ``tidemq serve`` stays quick to start.
    """
    from tidemq.admin.cli import admin_group
    from tidemq.client.cli import consume_command, send_command
    from tidemq.cluster import cluster_group
    from tidemq.pipelines.cli import pipeline_group
    from tidemq.proxy.cli import proxy_command

    main.add_command(send_command, "send")
    main.add_command(consume_command, "consume")
    main.add_command(admin_group, "admin")
    main.add_command(pipeline_group, "pipeline")
    main.add_command(cluster_group, "cluster")
    main.add_command(proxy_command, "proxy")


_register_subcommands()
