"""Serve the dashboard with uvicorn: in a background thread (``tidemq serve --dashboard-port``) or in
the foreground (``tidemq dashboard``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import uvicorn

from tidemq.admin.dashboard.app import create_app

__all__ = ["DashboardServer"]

log = logging.getLogger(__name__)


class DashboardServer:
    """The dashboard app on uvicorn.

    Args:
        namesrv_addr: name server(s) of the cluster to show.
        host / port: where to listen (port 0 = a free port; the real one is :attr:`port` once started).
        access_key / secret_key: ACL credentials of an admin account.
        sample_interval: seconds between lag samples.
    """

    def __init__(
        self,
        namesrv_addr: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        sample_interval: float = 5.0,
    ) -> None:
        self.host = host
        self.port = port
        app = create_app(
            namesrv_addr, access_key=access_key, secret_key=secret_key, sample_interval=sample_interval
        )
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def _bound_port(self) -> int:
        servers: Any = getattr(self.server, "servers", [])
        for srv in servers:
            for sock in srv.sockets:
                return int(sock.getsockname()[1])
        return self.port

    def start(self, timeout: float = 20.0) -> int:
        """Run in a daemon thread (its own event loop); returns the bound port once serving.

        Raises:
            OSError: the server did not start within ``timeout`` seconds (e.g. the port is taken).
        """
        self._thread = threading.Thread(target=self._run_thread, name="tidemq-dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)  # uvicorn offers no readiness event; poll its flag with a deadline
        if not self.server.started:
            raise OSError(f"the dashboard did not start on {self.host}:{self.port}")
        self.port = self._bound_port()
        log.info("dashboard at http://%s:%d/", self.host, self.port)
        return self.port

    def _run_thread(self) -> None:
        asyncio.run(self.server.serve())

    def run(self) -> None:
        """Serve in the foreground until SIGINT/SIGTERM."""
        self.server.run()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit and wait for its thread. Idempotent."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
