"""``tidemq cluster up | down | status | stop | start | kill``: a local multi-process cluster for development and tests.

``up`` starts ``--namesrv`` name servers and ``--groups`` broker groups (``broker-a``,
``broker-b``...), each a master plus ``--replicas`` slaves, every one its own ``tidemq namesrv`` /
``tidemq broker -c broker.conf`` process on 127.0.0.1 (free ports), and records them in
``DIR/cluster.json``. Each node has a directory ``DIR/<node>/`` with its ``broker.conf``, store and
``node.log``. After the first start a broker's ports are written into its ``broker.conf``, so a
restarted node (:meth:`LocalCluster.start_node`) comes back on the same address (its slaves
reconnect to it by themselves). ``down`` stops every recorded process (SIGTERM, SIGKILL after a
timeout); ``status`` shows which are alive and the name server's cluster table. ``stop NODE``
(SIGTERM, clean), ``kill NODE`` (SIGKILL, a crash) and ``start NODE`` (same ports, same store)
act on one node, to practise failover: ``tidemq cluster kill --dir D broker-a-0``.

The same is available from Python (tests, benchmarks)::

    with LocalCluster(tmp_path, groups=2, replicas=1).up() as cluster:
        producer = Producer("g", namesrv_addr=cluster.namesrv_addr)
        cluster.kill("broker-a-0")          # SIGKILL the master of broker-a
        cluster.start_node("broker-a-0")    # and bring it back
"""

from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

__all__ = ["LocalCluster", "Node", "cluster_group"]

READY = "tidemq ready "
STATE_FILE = "cluster.json"


@dataclass(slots=True)
class Node:
    """One process of a local cluster.

    Attributes:
        name: ``namesrv-0`` or ``broker-a-0`` (group, then brokerId: 0 = master).
        kind: ``"namesrv"`` or ``"broker"``.
        dir: the node's directory (config, store, ``node.log``).
        pid: process id of the last start (0 = never started).
        addr: ``ip:port`` it serves on (remoting).
        ha_addr: a master's HA address (``""`` otherwise).
        broker_name / broker_id / role: for brokers.
    """

    name: str
    kind: str
    dir: str
    pid: int = 0
    addr: str = ""
    ha_addr: str = ""
    broker_name: str = ""
    broker_id: int = 0
    role: str = ""

    @property
    def log_path(self) -> Path:
        return Path(self.dir) / "node.log"

    @property
    def alive(self) -> bool:
        """Whether the recorded pid is a running process: not gone, and not a zombie all of whose
        threads have exited. A SIGKILLed multi-threaded process shows its main thread as a zombie
        while its other threads are still exiting, and its sockets (the listening port, the name
        server connection whose close drops the broker from the routes) close only with the last
        thread: until then it is alive, so "killed" means the name server can see it gone."""
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return _has_live_thread(self.pid)


@dataclass(slots=True)
class LocalCluster:
    """A local cluster of ``tidemq`` processes rooted at ``dir`` (see the module docstring).

    Args:
        dir: root directory (created); holds ``cluster.json`` and one directory per node.
        groups: broker groups (``broker-a``...), 1..26.
        replicas: slaves per group (brokerId 1..replicas).
        namesrv: name servers.
        sync: masters are SYNC_MASTER (SEND_OK only once a slave holds the message) when there are
            replicas; else ASYNC_MASTER.
        flush: ``"async"`` or ``"sync"`` disk flush.
        cluster_name: ``brokerClusterName``.
        extra_conf: more ``broker.conf`` lines (``key=value``) for every broker.
        start_timeout: seconds to wait for each node's ready line.
    """

    dir: Path
    groups: int = 1
    replicas: int = 0
    namesrv: int = 1
    sync: bool = True
    flush: str = "async"
    cluster_name: str = "DefaultCluster"
    extra_conf: dict[str, str] = field(default_factory=dict)
    start_timeout: float = 60.0
    nodes: dict[str, Node] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = Path(self.dir).expanduser().resolve()
        if not 1 <= self.groups <= 26:
            raise click.UsageError("--groups must be 1..26")
        if self.replicas < 0 or self.namesrv < 1:
            raise click.UsageError("--replicas must be >= 0 and --namesrv >= 1")

    # ------------------------------------------------------------------ state file
    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def save(self) -> None:
        """Write ``cluster.json`` (nodes and settings)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        state = {
            "groups": self.groups,
            "replicas": self.replicas,
            "namesrv": self.namesrv,
            "cluster_name": self.cluster_name,
            "nodes": [asdict(n) for n in self.nodes.values()],
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)

    @classmethod
    def load(cls, dir: str | Path) -> LocalCluster:
        """The cluster recorded in ``dir/cluster.json``.

        Raises:
            click.ClickException: no cluster was started there.
        """
        path = Path(dir).expanduser().resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"no cluster in {dir}: {exc}") from exc
        cluster = cls(
            Path(dir),
            groups=int(state["groups"]),
            replicas=int(state["replicas"]),
            namesrv=int(state["namesrv"]),
            cluster_name=str(state.get("cluster_name", "DefaultCluster")),
        )
        cluster.nodes = {n["name"]: Node(**n) for n in state["nodes"]}
        return cluster

    # ------------------------------------------------------------------ addresses
    @property
    def namesrv_addr(self) -> str:
        """``"ip:port;ip:port"`` of the name servers (what clients and brokers are given)."""
        return ";".join(n.addr for n in self.nodes.values() if n.kind == "namesrv" and n.addr)

    def broker_names(self) -> list[str]:
        return [f"broker-{string.ascii_lowercase[i]}" for i in range(self.groups)]

    def node(self, name: str) -> Node:
        """The node called ``name`` (``KeyError`` if unknown)."""
        return self.nodes[name]

    # ------------------------------------------------------------------ lifecycle
    def up(self) -> LocalCluster:
        """Create the layout and start every node (name servers first). Returns self.

        Raises:
            RuntimeError: a node did not print its ready line in time (the log tail is included);
                the nodes already started are stopped.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            for i in range(self.namesrv):
                node = Node(f"namesrv-{i}", "namesrv", str(self.dir / f"namesrv-{i}"))
                self.nodes[node.name] = node
                self.start_node(node.name)
            role = "SYNC_MASTER" if self.sync and self.replicas else "ASYNC_MASTER"
            for name in self.broker_names():
                for bid in range(self.replicas + 1):
                    node = Node(
                        f"{name}-{bid}",
                        "broker",
                        str(self.dir / f"{name}-{bid}"),
                        broker_name=name,
                        broker_id=bid,
                        role=role if bid == 0 else "SLAVE",
                    )
                    self.nodes[node.name] = node
                    self._write_conf(node, listen_port=0)
                    self.start_node(node.name)
        except BaseException:
            self.down()
            raise
        return self

    def _write_conf(self, node: Node, *, listen_port: int, ha_port: int | None = None) -> None:
        lines = {
            "brokerClusterName": self.cluster_name,
            "brokerName": node.broker_name,
            "brokerId": str(node.broker_id),
            "brokerRole": node.role,
            "namesrvAddr": self.namesrv_addr,
            "listenPort": str(listen_port),
            "storePathRootDir": str(Path(node.dir) / "store"),
            "flushDiskType": "SYNC_FLUSH" if self.flush == "sync" else "ASYNC_FLUSH",
            "slaveReadEnable": "true",
            **self.extra_conf,
        }
        if ha_port is not None:
            lines["haListenPort"] = str(ha_port)
        Path(node.dir).mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in lines.items())
        (Path(node.dir) / "broker.conf").write_text(text)

    def _command(self, node: Node) -> list[str]:
        base = [sys.executable, "-m", "tidemq"]
        if node.kind == "namesrv":
            port = node.addr.rsplit(":", 1)[1] if node.addr else "0"
            return [*base, "namesrv", "--host", "127.0.0.1", "--port", port]
        return [*base, "broker", "--host", "127.0.0.1", "-c", str(Path(node.dir) / "broker.conf")]

    def start_node(self, name: str) -> Node:
        """Start (or restart) one node and wait for its ready line; same ports as its last start.

        Raises:
            RuntimeError: it exited or printed no ready line within ``start_timeout``.
        """
        node = self.nodes[name]
        if node.alive:
            return node
        Path(node.dir).mkdir(parents=True, exist_ok=True)
        offset = node.log_path.stat().st_size if node.log_path.exists() else 0
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(node.log_path, "ab") as log_file:
            proc = subprocess.Popen(
                self._command(node),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self._procs[name] = proc
        node.pid = proc.pid
        fields = self._wait_ready(node, proc, offset)
        if node.kind == "namesrv":
            node.addr = fields["namesrv"]
        else:
            first = not node.addr
            node.addr = fields["broker"]
            node.ha_addr = fields.get("ha", "")
            if first:  # pin the ports so that a restart comes back at the same address
                ha = int(node.ha_addr.rsplit(":", 1)[1]) if node.ha_addr else None
                self._write_conf(node, listen_port=int(node.addr.rsplit(":", 1)[1]), ha_port=ha)
        self.save()
        return node

    def _wait_ready(self, node: Node, proc: subprocess.Popen[bytes], offset: int) -> dict[str, str]:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            try:
                with open(node.log_path, "rb") as f:
                    f.seek(offset)
                    text = f.read().decode(errors="replace")
            except OSError:
                text = ""
            for line in text.splitlines():
                if line.startswith(READY):
                    return dict(p.split("=", 1) for p in line[len(READY) :].split() if "=" in p)
            if proc.poll() is not None:
                break
            time.sleep(0.05)  # polling a child's log file; the ready line is the condition
        tail = "\n".join(node.log_path.read_text(errors="replace").splitlines()[-20:])
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise RuntimeError(f"{node.name} did not start (exit {proc.poll()}); log tail:\n{tail}")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) to one node and reap it."""
        node = self.nodes[name]
        if node.pid > 0 and node.alive:
            with _suppress_lookup():
                os.kill(node.pid, sig)
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.wait(30)
        else:
            _wait_gone(node, 30.0)

    def stop_node(self, name: str, timeout: float = 30.0) -> None:
        """SIGTERM one node (clean shutdown), SIGKILL after ``timeout`` seconds."""
        node = self.nodes[name]
        if not node.alive:
            self._procs.pop(name, None)
            return
        with _suppress_lookup():
            os.kill(node.pid, signal.SIGTERM)
        proc = self._procs.pop(name, None)
        try:
            if proc is not None:
                proc.wait(timeout)
            elif not _wait_gone(node, timeout):
                raise subprocess.TimeoutExpired("tidemq", timeout)
        except subprocess.TimeoutExpired:
            with _suppress_lookup():
                os.kill(node.pid, signal.SIGKILL)
            if proc is not None:
                proc.wait()

    def down(self, timeout: float = 30.0) -> None:
        """Stop every node: brokers (slaves first), then name servers."""
        order = sorted(self.nodes.values(), key=lambda n: (n.kind == "namesrv", -n.broker_id, n.name))
        for node in order:
            self.stop_node(node.name, timeout)
        if self.nodes:
            self.save()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # ------------------------------------------------------------------ status
    def status_lines(self) -> list[str]:
        """One line per node: name, role, alive/dead, pid, address."""
        out = []
        for n in self.nodes.values():
            role = n.role or "NAMESRV"
            state = "alive" if n.alive else "dead"
            ha = f" ha={n.ha_addr}" if n.ha_addr else ""
            out.append(f"{n.name:<12} {role:<12} {state:<5} pid={n.pid:<7} addr={n.addr}{ha}")
        return out


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return exc_type is not None and issubclass(exc_type, ProcessLookupError)


def _has_live_thread(pid: int) -> bool:
    """True when a thread of ``pid`` is not a zombie (Linux ``/proc/PID/task``; always True
    without procfs, where only the pid's existence is known)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return not os.path.isdir("/proc/self/task")  # no procfs, else reaped meanwhile
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # this thread is gone
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return True
    return False


def _wait_gone(node: Node, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while node.alive and time.monotonic() < deadline:
        time.sleep(0.05)  # not our child (started by another `tidemq cluster up`): poll its pid
    return not node.alive


# ---------------------------------------------------------------------- CLI
@click.group("cluster")
def cluster_group() -> None:
    """A local multi-process cluster (name servers, broker groups with slaves) for development."""


@cluster_group.command("up")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
@click.option("--groups", default=1, show_default=True, help="Broker groups (broker-a, broker-b, ...).")
@click.option("--replicas", default=0, show_default=True, help="Slaves per group.")
@click.option("--namesrv", "namesrv", default=1, show_default=True, help="Name servers.")
@click.option(
    "--async-master", is_flag=True, help="ASYNC_MASTER instead of SYNC_MASTER when there are replicas."
)
@click.option("--flush", type=click.Choice(["async", "sync"]), default="async", show_default=True)
def up_command(dir_: str, groups: int, replicas: int, namesrv: int, async_master: bool, flush: str) -> None:
    """Start the cluster in the background and print its name server addresses."""
    state = Path(dir_) / STATE_FILE
    if state.exists() and any(n.alive for n in LocalCluster.load(dir_).nodes.values()):
        raise click.ClickException(f"a cluster is already running in {dir_}; `tidemq cluster down` first")
    cluster = LocalCluster(
        Path(dir_), groups=groups, replicas=replicas, namesrv=namesrv, sync=not async_master, flush=flush
    )
    try:
        cluster.up()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in cluster.status_lines():
        click.echo(line)
    click.echo(f"namesrvAddr={cluster.namesrv_addr}")


@cluster_group.command("down")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
def down_command(dir_: str) -> None:
    """Stop every process of the cluster (clean shutdown)."""
    cluster = LocalCluster.load(dir_)
    cluster.down()
    click.echo(f"stopped {len(cluster.nodes)} processes")


@cluster_group.command("status")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
def status_command(dir_: str) -> None:
    """Show each process and the name server's view (GET_BROKER_CLUSTER_INFO)."""
    cluster = LocalCluster.load(dir_)
    for line in cluster.status_lines():
        click.echo(line)
    addr = cluster.namesrv_addr
    if not addr or not any(n.alive for n in cluster.nodes.values() if n.kind == "namesrv"):
        return
    from tidemq.admin.client import AdminClient

    try:
        with AdminClient(addr) as admin:
            info = admin.examine_broker_cluster_info()
        for name, data in sorted(info.broker_addr_table.items()):
            addrs = " ".join(f"{bid}={a}" for bid, a in sorted(data.broker_addrs.items()))
            click.echo(f"route {data.cluster} {name}: {addrs}")
    except Exception as exc:  # status is informative only
        click.echo(f"name server query failed: {exc}")


def _known_node(cluster: LocalCluster, node: str) -> Node:
    if node not in cluster.nodes:
        raise click.ClickException(f"no node {node!r} in {cluster.dir}; nodes: {', '.join(cluster.nodes)}")
    return cluster.nodes[node]


@cluster_group.command("stop")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds before SIGKILL.")
@click.argument("node")
def stop_command(dir_: str, timeout: float, node: str) -> None:
    """Stop one node cleanly (SIGTERM; SIGKILL after --timeout), e.g. broker-a-0."""
    cluster = LocalCluster.load(dir_)
    n = _known_node(cluster, node)
    was_alive = n.alive
    cluster.stop_node(node, timeout)
    click.echo(f"{node} stopped (pid {n.pid})" if was_alive else f"{node} was not running")


@cluster_group.command("kill")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
@click.argument("node")
def kill_command(dir_: str, node: str) -> None:
    """SIGKILL one node (a crash: no shutdown, no final flush), e.g. broker-a-0."""
    cluster = LocalCluster.load(dir_)
    n = _known_node(cluster, node)
    was_alive = n.alive
    cluster.kill(node)
    click.echo(f"{node} killed (pid {n.pid})" if was_alive else f"{node} was not running")


@cluster_group.command("start")
@click.option("--dir", "dir_", type=click.Path(file_okay=False), required=True, help="Cluster directory.")
@click.argument("node")
def start_command(dir_: str, node: str) -> None:
    """Start one stopped node again, on its recorded ports and store (its slaves reconnect)."""
    cluster = LocalCluster.load(dir_)
    n = _known_node(cluster, node)
    if n.alive:
        click.echo(f"{node} is already running (pid {n.pid})")
        return
    try:
        cluster.start_node(node)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{node} started (pid {n.pid}) addr={n.addr}")
