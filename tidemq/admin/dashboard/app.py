"""The dashboard's Starlette application: server-rendered Jinja2 pages over :class:`AsyncAdminClient`.

Everything is read through the admin client (name server + broker request codes), so the dashboard
works against a RocketMQ 4.x cluster as well as a tidemq one. Pages:

==========================  ==============================================================
``/``                       clusters and brokers: version, in/out TPS, today's counts, disk
``/topics``                 topics with queue count, stored messages and TPS, a page at a time
                            (``?q=`` filter, ``page``, ``size``); create a topic
``/topics/{topic}/delete``  delete a topic (POST, after the browser's confirmation)
``/topics/{topic}``         route, per-queue min/max offset, consuming groups with their lag
``/groups``                 consumer groups with members online and total lag
``/groups/{group}``         members, per-queue lag, a lag chart over time, reset by time
``/messages``               a topic's newest messages, or search by key, message id, queue + offset
``/send``                   send a test message
``/transactions``           pending half messages per producer group and topic, oldest's age
``/pop``                    POP groups: in flight, popped, acked, redelivered, dead-lettered
``/api/groups/{g}/lag``     the lag history as JSON (the chart's data)
==========================  ==============================================================

The lag history is kept in memory by :class:`LagRecorder`: a background task samples every
group's total lag every ``sample_interval`` seconds (and each group page view adds a sample).
The chart is drawn by uPlot, served from ``/static`` (no CDN: works offline).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from tidemq.admin.client import AsyncAdminClient
from tidemq.admin.dashboard.pop_page import group_pop_rows, pop_groups_view
from tidemq.admin.dashboard.topic_ops import (
    browse_topic,
    create_topic_view,
    delete_topic_view,
    group_reset_topics,
    thousands,
)
from tidemq.admin.dashboard.topics_page import TopicPage, TopicQuery, load_topic_page
from tidemq.errors import ConsumerNotOnlineError, NoRouteError, TideMQError
from tidemq.protocol.message import MessageExt, MessageQueue
from tidemq.protocol.topic import is_system_group

__all__ = ["LagRecorder", "create_app"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent


async def _message_trace(admin: AsyncAdminClient, msg_id: str, trace_topic: str | None) -> Any:
    """The :class:`~tidemq.client.trace.MessageTrace` of ``msg_id`` (None when the lookup failed)."""
    from tidemq.admin.ops_trace import query_msg_trace_by_id

    try:
        return await query_msg_trace_by_id(admin, msg_id, trace_topic or None)
    except (TideMQError, TimeoutError):
        return None


class LagRecorder:
    """Total lag per consumer group over time, in memory (``maxlen`` points per group).

    Args:
        admin: the client to read consume stats with.
        interval: seconds between samples of every group (0 = no background sampling).
        maxlen: points kept per group (720 x 5 s = 1 hour).
    """

    def __init__(self, admin: AsyncAdminClient, interval: float = 5.0, maxlen: int = 720) -> None:
        self.admin = admin
        self.interval = interval
        self.history: dict[str, deque[tuple[float, int]]] = {}
        self.maxlen = maxlen

    def record(self, group: str, lag: int, now: float | None = None) -> None:
        """Add one point (``now`` in epoch seconds)."""
        points = self.history.setdefault(group, deque(maxlen=self.maxlen))
        points.append((time.time() if now is None else now, lag))

    def series(self, group: str) -> dict[str, list[float]]:
        """``{"t": [epoch s...], "lag": [...]}`` of ``group``."""
        points = list(self.history.get(group, ()))
        return {"t": [p[0] for p in points], "lag": [float(p[1]) for p in points]}

    async def sample_group(self, group: str) -> int:
        """Read ``group``'s total lag now and record it."""
        stats = await self.admin.examine_consume_stats(group)
        lag = stats.compute_total_diff()
        self.record(group, lag)
        return lag

    async def run(self) -> None:
        """Sample every non-system group with offsets, every ``interval`` seconds, until cancelled."""
        while True:
            try:
                for group in await self.admin.subscription_groups():
                    if not is_system_group(group):
                        stats = await self.admin.examine_consume_stats(group)
                        if stats.offset_table:
                            self.record(group, stats.compute_total_diff())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the cluster may be down for a while: keep trying
                log.debug("lag sampling failed: %s", exc)
            await asyncio.sleep(self.interval)


def _fmt_ms(ts: int) -> str:
    if ts <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts / 1000))


def create_app(
    namesrv_addr: str,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    sample_interval: float = 5.0,
) -> Starlette:
    """The dashboard ASGI app for the cluster behind ``namesrv_addr``.

    Args:
        namesrv_addr: ``host:port[;host:port]`` of the name server(s).
        access_key / secret_key: ACL credentials of an admin account (both or neither).
        sample_interval: seconds between lag samples (0 disables background sampling).
    """
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["ms"] = _fmt_ms
    templates.env.filters["n"] = thousands  # 12,345
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = AsyncAdminClient(namesrv_addr, access_key=access_key, secret_key=secret_key)
        recorder = LagRecorder(admin, sample_interval)
        state.update(admin=admin, recorder=recorder)
        task = asyncio.create_task(recorder.run()) if sample_interval > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await admin.close()

    def admin() -> AsyncAdminClient:
        a: AsyncAdminClient = state["admin"]
        return a

    def page(request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        ctx.setdefault("error", None)
        ctx["namesrv"] = namesrv_addr
        return templates.TemplateResponse(request, name, ctx, status_code=status)

    def failed(request: Request, name: str, exc: BaseException, **ctx: Any) -> Response:
        status = 404 if isinstance(exc, NoRouteError) else 502
        return page(request, name, status, error=str(exc), **ctx)

    async def cluster(request: Request) -> Response:
        try:
            rows = await admin().cluster_list()
        except (TideMQError, TimeoutError) as exc:
            return failed(request, "cluster.html", exc, rows=[])
        return page(request, "cluster.html", rows=rows)

    async def topics(
        request: Request, error: str | None = None, notice: str | None = None, status: int = 200
    ) -> Response:
        if request.method == "POST" and request.url.path == "/topics" and error is None and notice is None:
            return await create_topic_view(request, admin(), topics)
        try:
            query = TopicQuery.parse(request.query_params)
        except ValueError as exc:
            error, status, query = str(exc), 400, TopicQuery()
        try:
            listing = await load_topic_page(admin(), query)
        except (TideMQError, TimeoutError) as exc:
            return failed(request, "topics.html", exc, listing=TopicPage(query), notice=notice)
        return page(request, "topics.html", status, listing=listing, error=error, notice=notice)

    async def topic_delete(request: Request) -> Response:
        return await delete_topic_view(request, admin(), topics)

    async def topic_detail(request: Request) -> Response:
        topic = request.path_params["topic"]
        try:
            route = await admin().examine_topic_route_info(topic)
            stats = await admin().examine_topic_stats(topic)
            tps = 0.0
            for bd in route.broker_datas:
                addr = bd.broker_addrs.get(0)
                if addr:
                    data = await admin().stats_data_or_zero(addr, "TOPIC_PUT_NUMS", topic)
                    tps += float(data["statsMinute"]["tps"])
            groups = []
            for g in await admin().query_topic_consume_by_who(topic):
                cs = await admin().examine_consume_stats(g, topic)
                groups.append({"group": g, "lag": cs.compute_total_diff()})
        except (TideMQError, TimeoutError) as exc:
            return failed(request, "topic.html", exc, topic=topic, route=None, queues=[], groups=[], tps=0.0)
        queues = sorted(stats.offset_table.items())
        return page(request, "topic.html", topic=topic, route=route, queues=queues, groups=groups, tps=tps)

    async def groups(request: Request) -> Response:
        rows = []
        try:
            for g, cfg in (await admin().subscription_groups()).items():
                if is_system_group(g):
                    continue
                cs = await admin().examine_consume_stats(g)
                try:
                    online = len((await admin().examine_consumer_connection_info(g)).connection_set)
                except ConsumerNotOnlineError:
                    online = 0
                topics_ = sorted({mq.topic for mq in cs.offset_table})
                rows.append(
                    {
                        "group": g,
                        "online": online,
                        "lag": cs.compute_total_diff(),
                        "topics": topics_,
                        "enabled": cfg.consume_enable,
                    }
                )
        except (TideMQError, TimeoutError) as exc:
            return failed(request, "groups.html", exc, rows=rows)
        return page(request, "groups.html", rows=rows)

    async def group_detail(
        request: Request, result: Any = None, status: int = 200, error: str | None = None
    ) -> Response:
        group = request.path_params["group"]
        try:
            progress = await admin().consumer_progress(group)
            try:
                cc = await admin().examine_consumer_connection_info(group)
                members = cc.connection_set
                subs = sorted(cc.subscription_table.items())
            except ConsumerNotOnlineError:
                members, subs = [], []
        except (TideMQError, TimeoutError) as exc:
            return failed(
                request,
                "group.html",
                exc,
                group=group,
                progress=[],
                members=[],
                subs=[],
                total=0,
                topics=[],
                result=None,
            )
        if not progress and not members and group not in await admin().subscription_groups():
            return page(
                request,
                "group.html",
                404,
                group=group,
                progress=[],
                members=[],
                subs=[],
                total=0,
                topics=[],
                result=None,
                error=f"consumer group {group} does not exist (no offsets, no members, no settings)",
            )
        total = sum(r.lag for r in progress)
        state["recorder"].record(group, total)
        topics_ = group_reset_topics(sorted({r.mq.topic for r in progress}))
        return page(
            request,
            "group.html",
            status,
            group=group,
            progress=progress,
            members=members,
            subs=subs,
            total=total,
            topics=topics_,
            result=result,
            error=error,
            pop=await group_pop_rows(admin(), group),  # its POP figures, if it pops (pop_page.py)
        )

    async def group_reset(request: Request) -> Response:
        group = request.path_params["group"]
        form = await request.form()
        topic = str(form.get("topic") or "")
        when = str(form.get("when") or "")
        try:
            ts = int(time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M")) * 1000) if when else -1
            table = await admin().reset_offset_by_timestamp(topic, group, ts)
        except ValueError:
            return await group_detail(
                request, status=400, error=f"bad time {when!r}: use the picker (YYYY-MM-DDTHH:MM)"
            )
        except (TideMQError, TimeoutError) as exc:
            return await group_detail(request, status=502, error=f"reset failed: {exc}")
        result = {
            "topic": topic,
            "when": when or "the end",
            "offsets": [(q.broker_name, q.queue_id, o) for q, o in table.items()],
        }
        return await group_detail(request, result=result)

    async def group_lag_api(request: Request) -> Response:
        group = request.path_params["group"]
        return JSONResponse(state["recorder"].series(group))

    async def messages(request: Request) -> Response:
        q = request.query_params
        topic, key, msg_id = q.get("topic", "").strip(), q.get("key", "").strip(), q.get("msgId", "").strip()
        queue, offset, broker = (
            q.get("queueId", "").strip(),
            q.get("offset", "").strip(),
            q.get("broker", "").strip(),
        )
        found: list[MessageExt] = []
        error = None
        searched = bool(topic)
        browsing = searched and not (key or msg_id or offset)
        try:
            if browsing:  # a topic alone: its newest messages
                found = await browse_topic(admin(), topic)
            elif searched and key:
                found = await admin().query_message_by_key(topic, key)
            elif searched and msg_id:
                found = [await admin().view_message(msg_id, topic)]
            elif searched and offset:
                route = await admin().examine_topic_route_info(topic)
                broker = broker or route.broker_datas[0].broker_name
                found = [
                    await admin().query_message_by_offset(
                        MessageQueue(topic, broker, int(queue or 0)), int(offset)
                    )
                ]
        except ValueError:
            error = "queue id and offset must be numbers"
        except (TideMQError, TimeoutError) as exc:
            error = str(exc)
        rows = [{"m": m, "body": m.body.decode("utf-8", "replace")} for m in found]
        for row, m in zip(rows[:10], found, strict=False):  # each message's trace, when there is one
            row["trace"] = await _message_trace(admin(), m.msg_id, q.get("traceTopic"))
        status = 404 if error and searched else 200
        return page(
            request,
            "messages.html",
            status,
            q=dict(q),
            rows=rows,
            searched=searched,
            error=error,
            browsing=browsing,
        )

    async def transactions(request: Request) -> Response:
        from tidemq.admin.transactions import pending_half_messages

        try:
            rows = await pending_half_messages(admin())
        except (TideMQError, TimeoutError) as exc:
            return failed(request, "transactions.html", exc, rows=[])
        return page(request, "transactions.html", rows=rows)

    async def send(request: Request) -> Response:
        result = None
        error = None
        form: dict[str, str] = {}
        if request.method == "POST":
            data = await request.form()
            form = {k: str(v) for k, v in data.items()}
            try:
                r = await admin().send_message(
                    form.get("topic", "").strip(),
                    form.get("body", "").encode(),
                    tags=form.get("tags") or None,
                    keys=form.get("keys") or None,
                )
                result = {
                    "msgId": r.msg_id,
                    "offsetMsgId": r.offset_msg_id,
                    "broker": r.message_queue.broker_name,
                    "queueId": r.message_queue.queue_id,
                    "queueOffset": r.queue_offset,
                    "status": str(getattr(r.send_status, "value", r.send_status)),
                }
            except (TideMQError, TimeoutError, ValueError) as exc:
                error = str(exc)
        return page(
            request, "send.html", 200 if error is None else 400, form=form, result=result, error=error
        )

    routes = [
        Route("/", cluster),
        Route("/topics", topics, methods=["GET", "POST"]),
        Route("/topics/{topic}", topic_detail),
        Route("/topics/{topic}/delete", topic_delete, methods=["POST"]),
        Route("/groups", groups),
        Route("/groups/{group}", group_detail),
        Route("/groups/{group}/reset", group_reset, methods=["POST"]),
        Route("/api/groups/{group}/lag", group_lag_api),
        Route("/messages", messages),
        Route("/send", send, methods=["GET", "POST"]),
        Route("/transactions", transactions),
        Route("/pop", functools.partial(pop_groups_view, admin=admin, page=page)),  # pop_page.py
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
