"""The blocking producer's direct path (tidemq.client.direct): one blocking connection per broker,
used by the caller's thread. Real sockets: a scripted server for timeouts and stray frames, a
real broker for concurrent senders."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for_sync
from tidemq.client.direct import DirectConnection, DirectPool
from tidemq.client.producer.producer import Producer
from tidemq.errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from tidemq.protocol.command import FrameDecoder, RemotingCommand, encode_command
from tidemq.protocol.message import Message
from tidemq.testing import ClusterThread


class ScriptedServer:
    """Answers each request with code 0 and the request's body as remark; body ``slow`` is answered
    after 0.5 s, ``close`` closes the connection, ``bye`` is answered and then the connection closed
    (a broker going away while the client's connection sits idle), ``stray`` is preceded by a server request and a
    response to an unknown opaque."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.said_bye = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for req in decoder.feed(data):
                    body = req.body.decode()
                    if body == "close":
                        return
                    if body == "slow":
                        time.sleep(0.5)
                    if body == "stray":
                        conn.sendall(encode_command(RemotingCommand.create_request(40, None)))
                        late = RemotingCommand.create_response(0, "late")
                        late.opaque = req.opaque + 1000
                        conn.sendall(encode_command(late))
                    resp = RemotingCommand.create_response(0, body)
                    resp.response_to(req)
                    try:
                        conn.sendall(encode_command(resp))
                    except OSError:
                        return
                    if body == "bye":
                        conn.close()
                        self.said_bye += 1
                        return

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    try:
        yield srv
    finally:
        srv.close()


def call(conn: DirectConnection, body: str, timeout: float = 5.0) -> RemotingCommand:
    with conn.lock:
        return conn.invoke(RemotingCommand.create_request(10, None, body.encode()), timeout)


def test_answers_are_matched_by_opaque(server: ScriptedServer) -> None:
    conn = DirectConnection(server.addr)
    assert call(conn, "one").remark == "one"
    assert call(conn, "stray").remark == "stray"  # a server request and an unknown answer are skipped
    assert call(conn, "two").remark == "two"
    assert server.connections == 1
    conn.close()


def test_timeout_closes_the_connection_so_a_late_answer_is_never_misread(server: ScriptedServer) -> None:
    conn = DirectConnection(server.addr)
    with pytest.raises(RemotingTimeoutError, match="timeout"):
        call(conn, "slow", timeout=0.1)
    assert not conn.connected
    assert call(conn, "next").remark == "next"
    assert server.connections == 2
    conn.close()


def test_transport_errors_are_typed(server: ScriptedServer) -> None:
    conn = DirectConnection(server.addr)
    with pytest.raises(RemotingSendRequestError):
        call(conn, "close")
    assert call(conn, "again").remark == "again"
    conn.close()
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(RemotingConnectError):
        call(DirectConnection(f"127.0.0.1:{port}"), "x")


def test_a_connection_the_peer_closed_while_idle_is_replaced_before_the_next_request(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker restarted while the connection sat idle: the next request goes on a new
    connection instead of failing on the dead one (a send to a chosen queue has no retry)."""
    monkeypatch.setattr("tidemq.remoting.blocking.STALE_CHECK_S", 0.0)
    conn = DirectConnection(server.addr)
    assert call(conn, "bye").remark == "bye"
    wait_for_sync(lambda: server.said_bye == 1, 5, "the server to close the connection")
    assert call(conn, "after").remark == "after"
    assert server.connections == 2
    conn.close()


def test_pool_hands_a_busy_connection_to_one_thread_only(server: ScriptedServer) -> None:
    pool = DirectPool()
    first = pool.try_acquire(server.addr)
    assert first is not None
    assert pool.try_acquire(server.addr) is None  # busy: the caller takes the event-loop path
    first.lock.release()
    again = pool.try_acquire(server.addr)
    assert again is first
    again.lock.release()
    pool.close()
    assert pool.try_acquire(server.addr) is None


def test_concurrent_sync_senders_store_every_message_once(tmp_path: Path) -> None:
    """Four threads share one Producer (one direct connection; the others fall back to the loop):
    every send is SEND_OK at its own queue offset."""
    with ClusterThread(tmp_path) as cluster:
        producer = Producer(namesrv_addr=cluster.namesrv_addr, producer_group="direct-p")
        producer.start()
        try:
            producer.send(Message("DirectT", b"create"))
            results = []
            lock = threading.Lock()

            def worker(k: int) -> None:
                for i in range(50):
                    r = producer.send(Message("DirectT", f"{k}-{i}"))
                    with lock:
                        results.append(r)

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            producer.shutdown()
    assert len(results) == 200
    assert {r.send_status for r in results} == {"SEND_OK"}
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 200
    assert len({r.msg_id for r in results}) == 200


def test_invoke_many_pipelines_and_returns_answers_in_request_order(server: ScriptedServer) -> None:
    conn = DirectConnection(server.addr)
    requests = [RemotingCommand.create_request(10, None, body.encode()) for body in ("a", "stray", "b")]
    with conn.lock:
        answers = conn.invoke_many(requests, 5.0)
    assert [a.remark for a in answers] == ["a", "stray", "b"]
    assert [a.opaque for a in answers] == [r.opaque for r in requests]
    with conn.lock, pytest.raises(RemotingTimeoutError):
        conn.invoke_many([RemotingCommand.create_request(10, None, b"slow") for _ in range(2)], 0.1)
    assert not conn.connected
    conn.close()


def test_requests_sent_without_waiting_are_answered_to_their_callbacks_by_later_reads(
    server: ScriptedServer,
) -> None:
    """``send`` does not wait: the answers reach their callbacks when a later call reads them
    (``read_pending``, or an ``invoke`` waiting for its own answer), and a closed connection gives
    the callbacks still waiting None."""
    conn = DirectConnection(server.addr)
    got: list[str | None] = []

    def record(resp: RemotingCommand | None) -> None:
        got.append(None if resp is None else resp.remark)

    def request(body: str) -> RemotingCommand:
        return RemotingCommand.create_request(10, None, body.encode())

    try:
        with conn.lock:
            conn.send([(request("along"), record)], 5.0)
            assert conn.pending == 1
            wait_for_sync(lambda: (conn.read_pending(), got)[1] == ["along"], 5.0, "the answer sent along")
            assert conn.pending == 0
            conn.send([(request("slow"), record), (request("next"), record)], 5.0)
            assert conn.invoke(request("third"), 5.0).remark == "third"  # reads the earlier answers first
            assert got == ["along", "slow", "next"]
            conn.send([(request("close"), record)], 5.0)
            wait_for_sync(
                lambda: (conn.read_pending(), got)[1] == ["along", "slow", "next", None], 5.0, "None"
            )
            assert conn.pending == 0 and not conn.connected
    finally:
        conn.close()
