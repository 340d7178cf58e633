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
from pathlib import Path
from typing import Any, NoReturn

import click

from tidemq.errors import TideMQError

log = logging.getLogger("tidemq.cli")

DEFAULT_STORE = "~/.tidemq/store"


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@click.group()
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Log level (logs go to stderr).",
)
@click.version_option(package_name="tidemq")
def main(log_level: str) -> None:
    """tidemq: a RocketMQ 4.x compatible messaging system in pure Python."""
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
) -> tuple[Any, Any]:
    """BrokerConfig + MessageStoreConfig from defaults, ``-c broker.conf`` and the CLI flags, checked
    once by :func:`tidemq.broker.config_check.check_config`; an invalid value exits with one line."""
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


def _host_for(listen_host: str) -> str:
    from tidemq.broker.config import guess_broker_ip

    return guess_broker_ip(listen_host)


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
def serve(
    store: str | None,
    host: str,
    namesrv_port: str,
    broker_port: str | None,
    flush: str | None,
    conf: str | None,
    broker_name: str | None,
    acl_file: str | None,
) -> None:
    """Run a name server and a broker in one process."""
    from tidemq.broker.broker import Broker
    from tidemq.namesrv.config import NamesrvConfig
    from tidemq.namesrv.server import NameServer

    ns_port = _port_value("--namesrv-port", namesrv_port)
    bc, sc = _broker_configs(
        conf, store, host, broker_port, flush, broker_name, None, port_flag="--broker-port"
    )
    if acl_file:
        bc.acl_enable, bc.acl_file = True, str(Path(acl_file).resolve())
    store_lock = _lock_store(sc)

    async def run(stop: asyncio.Event) -> None:
        namesrv = NameServer(NamesrvConfig(), host, ns_port or 0)
        await namesrv.start()
        ns_addr = f"{_host_for(host)}:{namesrv.port}"
        bc.namesrv_addr = ns_addr
        broker = Broker(bc, sc, store_lock=store_lock)
        try:
            await broker.start()
        except BaseException:
            await namesrv.shutdown()
            raise
        click.echo(f"tidemq ready namesrv={ns_addr} broker={broker.addr}")
        sys.stdout.flush()
        try:
            await stop.wait()
        finally:
            log.info("stopping")
            await broker.shutdown()
            await namesrv.shutdown()

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
        click.echo(f"tidemq ready namesrv={_host_for(host)}:{server.port}")
        sys.stdout.flush()
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
@click.option(
    "-c", "--config", "conf", type=click.Path(dir_okay=False, exists=True), help="RocketMQ broker.conf."
)
@click.option("--broker-name", default=None, help="Broker name.")
def broker(
    namesrv_addr: str | None,
    store: str | None,
    host: str,
    port: str | None,
    flush: str | None,
    conf: str | None,
    broker_name: str | None,
) -> None:
    """Run a broker alone, registering with the name servers given by --namesrv (or namesrvAddr)."""
    from tidemq.broker.broker import Broker

    bc, sc = _broker_configs(conf, store, host, port, flush, broker_name, namesrv_addr)
    if not bc.namesrv_addr_list():
        raise click.UsageError("no name server: pass --namesrv host:port (or namesrvAddr in -c broker.conf)")

    store_lock = _lock_store(sc)

    async def run(stop: asyncio.Event) -> None:
        b = Broker(bc, sc, store_lock=store_lock)
        await b.start()
        click.echo(f"tidemq ready broker={b.addr}")
        sys.stdout.flush()
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
    from tidemq.pipelines.cli import pipeline_group

    main.add_command(send_command, "send")
    main.add_command(consume_command, "consume")
    main.add_command(admin_group, "admin")
    main.add_command(pipeline_group, "pipeline")


_register_subcommands()
