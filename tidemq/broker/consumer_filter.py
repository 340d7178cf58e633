"""SQL92 filters of consumer groups, compiled once. Mirrors RocketMQ's ``ConsumerFilterManager``,
``ConsumerFilterData``, ``ExpressionMessageFilter`` / ``ExpressionForRetryMessageFilter`` and the
filter checks of ``PullMessageProcessor`` and ``ClientManageProcessor.checkClientConfig``
(transactions.md §2.1, §2.4).

* A heartbeat registers each SQL92 subscription of a group (:meth:`ConsumerFilterManager.register`):
  compiled when new or newer (``subVersion``); a parse error is logged and the heartbeat still
  succeeds, as in RocketMQ. Pulls without the subscription bit use these.
* A pull that carries its subscription is compiled through a cache keyed by (group, topic,
  subVersion) (:meth:`ConsumerFilterManager.build`), so a consumer that sends its expression on
  every pull (ali-ons does) costs one dict lookup per pull.
* :meth:`ConsumerFilterManager.record_filter_for` gives the store its per-record filter, or None on
  the plain tag path (no cost there). With ``filter_support_retry`` a group's ``%RETRY%`` messages
  are evaluated with the SQL92 filter the group registered for their original topic
  (``RETRY_TOPIC``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemq.broker.config import BrokerConfig
from tidemq.protocol.body import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, SubscriptionData
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from tidemq.protocol.message import MessageConst, string_to_properties
from tidemq.protocol.sql92 import Sql92Error, Sql92Expression, compile_sql92
from tidemq.protocol.sql92.record import RecordFilter, properties_span, property_lookup, record_filter
from tidemq.protocol.topic import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from tidemq.broker.longpolling import HeldPullRequest
    from tidemq.store.dispatcher import PutRun

log = logging.getLogger(__name__)

NOT_SUPPORTED = "The broker does not support consumer to filter message by "
FILTER_DATA_NOT_EXIST = "The broker's consumer filter data is not exist!Your expression may be wrong!"
FILTER_DATA_NOT_LATEST = "the consumer's consumer filter data not latest"
PARSE_FAILED = "parse the consumer's subscription failed"
_BUILD_CACHE_SIZE = 4096


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``: null, empty or ``TAG``."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


@dataclass(slots=True)
class ConsumerFilterData:
    """One group's compiled filter for one topic. Mirrors ``ConsumerFilterData``.

    Attributes:
        client_version: the subscription's ``subVersion`` (ms).
        matches_record: the store-side filter (``(buffer, record position) -> bool``).
    """

    topic: str
    group: str
    expression: str
    expression_type: str
    client_version: int
    compiled: Sql92Expression
    matches_record: RecordFilter = field(repr=False)


def compile_filter(expression_type: str, expression: str) -> Sql92Expression:
    """``FilterFactory.get(type).compile(expression)``.

    Raises:
        Sql92Error: a bad expression, or a type other than SQL92.
    """
    if expression_type != EXPRESSION_TYPE_SQL92:
        raise Sql92Error(f"unsupported expression type {expression_type!r} (only TAG and SQL92)")
    return compile_sql92(expression)


class ConsumerFilterManager:
    """The broker's SQL92 filters (see the module doc). Thread-safe.

    Args:
        config: the broker's config (``enable_property_filter``, ``filter_support_retry``).
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._registered: dict[tuple[str, str], ConsumerFilterData] = {}  # (topic, group)
        self._groups_with_filters: dict[str, int] = {}
        self._built: OrderedDict[tuple[str, str, int], ConsumerFilterData] = OrderedDict()

    # -- building (cached) -------------------------------------------------------------------

    def build(
        self, topic: str, group: str, expression: str, expression_type: str, version: int
    ) -> ConsumerFilterData:
        """The compiled filter for one subscription, cached per (group, topic, subVersion).

        Raises:
            Sql92Error: the expression does not compile.
        """
        key = (group, topic, version)
        with self._lock:
            data = self._built.get(key)
            if data is not None and data.expression == expression and data.expression_type == expression_type:
                self._built.move_to_end(key)
                return data
        compiled = compile_filter(expression_type, expression)
        data = ConsumerFilterData(
            topic, group, expression, expression_type, version, compiled, record_filter(compiled)
        )
        with self._lock:
            self._built[key] = data
            while len(self._built) > _BUILD_CACHE_SIZE:
                self._built.popitem(last=False)
        return data

    # -- registration from heartbeats ----------------------------------------------------------

    def register(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """Register a heartbeat's non-TAG subscriptions of ``group``. Mirrors
        ``ConsumerFilterManager.register``: an older or equal ``subVersion`` keeps what is there; a
        newer one with a bad expression removes it (the consumer's pulls then get
        FILTER_DATA_NOT_EXIST); a bad expression is logged, never an error of the heartbeat. A newer
        TAG subscription of a topic removes the topic's filter (RocketMQ keeps it, so its retry
        filter would go on using the old expression)."""
        for sub in subscriptions:
            key = (sub.topic, group)
            version = int(sub.sub_version)
            old = self._registered.get(key)
            if old is not None and version <= old.client_version:
                continue
            expression_type = sub.expression_type
            if is_tag_type(expression_type) or not sub.sub_string:
                if old is not None:  # the group went back to tags: its retries are not filtered
                    self._unregister(key)
                continue
            try:
                data = self.build(sub.topic, group, sub.sub_string, expression_type, version)
            except Sql92Error as exc:
                log.warning(
                    "consumer group %s: SQL92 filter of topic %s does not compile: %s", group, sub.topic, exc
                )
                self._unregister(key)
                continue
            with self._lock:
                if key not in self._registered:
                    self._groups_with_filters[group] = self._groups_with_filters.get(group, 0) + 1
                self._registered[key] = data
            log.info(
                "consumer group %s: SQL92 filter of topic %s registered: %s", group, sub.topic, sub.sub_string
            )

    def _unregister(self, key: tuple[str, str]) -> None:
        with self._lock:
            if self._registered.pop(key, None) is not None:
                group = key[1]
                self._groups_with_filters[group] -= 1
                if not self._groups_with_filters[group]:
                    del self._groups_with_filters[group]

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        """The filter ``group`` registered for ``topic`` by heartbeat, if any."""
        return self._registered.get((topic, group))

    # -- pull ----------------------------------------------------------------------------------

    def check_pull(
        self, header: PullMessageRequestHeader, sub: SubscriptionData, *, from_request: bool
    ) -> tuple[int, str] | None:
        """The error ``(code, remark)`` for a pull with a non-TAG subscription, or None to serve it.

        In RocketMQ's order: with the subscription bit the request's expression must compile
        (SUBSCRIPTION_PARSE_FAILED, even with filtering off); without it the heartbeat's filter
        must exist (FILTER_DATA_NOT_EXIST) and be as new as the pull's subVersion
        (FILTER_DATA_NOT_LATEST); then filtering must be on (SYSTEM_ERROR).
        """
        expression_type = sub.expression_type
        if from_request:
            if expression_type == EXPRESSION_TYPE_SQL92 or self.config.enable_property_filter:
                try:
                    self.build(
                        header.topic,
                        header.consumer_group,
                        header.subscription or "",
                        expression_type,
                        header.sub_version,
                    )
                except Sql92Error as exc:
                    return ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"{PARSE_FAILED}: {exc}"
        else:
            data = self.get(header.topic, header.consumer_group)
            if data is None:
                return ResponseCode.FILTER_DATA_NOT_EXIST, FILTER_DATA_NOT_EXIST
            if data.client_version < header.sub_version:
                return ResponseCode.FILTER_DATA_NOT_LATEST, FILTER_DATA_NOT_LATEST
        if not self.config.enable_property_filter:
            return ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED + expression_type
        return None

    def record_filter_for(
        self, header: PullMessageRequestHeader, sub: SubscriptionData
    ) -> RecordFilter | None:
        """The store-side filter of an accepted pull; None when only tags filter (the usual case)."""
        if is_tag_type(sub.expression_type):
            if (
                self.config.filter_support_retry
                and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                and self._groups_with_filters.get(header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
            ):
                return self._retry_filter(header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
            return None
        data = self._pull_filter(header, sub)
        return None if data is None else data.matches_record

    def _pull_filter(
        self, header: PullMessageRequestHeader, sub: SubscriptionData
    ) -> ConsumerFilterData | None:
        """The SQL92 filter of a pull: built from the pull's own expression when it carries one
        (subscription flag), else the one the group registered by heartbeat (None: none).

        Raises:
            Sql92Error: the pull's expression does not compile.
        """
        if PullSysFlag.has_subscription_flag(header.sys_flag):
            return self.build(
                header.topic,
                header.consumer_group,
                header.subscription or "",
                sub.expression_type,
                header.sub_version,
            )
        return self.get(header.topic, header.consumer_group)

    def hold_past_unmatched(
        self, held: HeldPullRequest, header: PullMessageRequestHeader, sub: SubscriptionData, run: PutRun
    ) -> None:
        """A held SQL92 pull waiting at exactly the first offset of a put's ``run``: when none of the
        run's messages match, it keeps waiting past them (its wake-up offset moves to the run's end;
        the pull itself still reads from its own offset when it is answered). Without this every
        arriving message that does not match would wake it to answer PULL_RETRY_IMMEDIATELY, and
        the consumer would pull again at once. RocketMQ's hold service evaluates the arriving
        message's properties the same way. (A retry topic's filter is not looked at here.)"""
        if is_tag_type(sub.expression_type):
            return
        data = self._pull_filter(header, sub)
        properties = run[5]
        if data is None or held.pull_from_this_offset != run[2]:
            return
        matches = data.compiled.matches
        if not any(matches(string_to_properties(text)) for text in properties):
            held.pull_from_this_offset = run[2] + len(properties)

    def _retry_filter(self, group: str) -> RecordFilter:
        """``ExpressionForRetryMessageFilter``: a retry message is evaluated with the filter the group
        registered for its original topic (``RETRY_TOPIC``); none registered -> it matches."""
        retry_topic_of = property_lookup(MessageConst.PROPERTY_RETRY_TOPIC)
        per_topic: dict[str | None, RecordFilter | None] = {}

        def match(buf: bytes, pos: int) -> bool:
            try:
                start, end = properties_span(buf, pos)
            except Exception:  # unreadable properties: no match
                return False
            real = retry_topic_of(buf, start, end)
            if real not in per_topic:
                data = self.get(real, group) if real is not None else None
                per_topic[real] = data.matches_record if data is not None else None
            fn = per_topic[real]
            return True if fn is None else fn(buf, pos)

        return match

    # -- CHECK_CLIENT_CONFIG (46) ----------------------------------------------------------------

    def check_client_config(self, subscription: dict[str, object] | None) -> tuple[int, str | None]:
        """``ClientManageProcessor.checkClientConfig``: TAG -> SUCCESS; filtering off -> SYSTEM_ERROR;
        an expression that does not compile -> SUBSCRIPTION_PARSE_FAILED with the parser's message."""
        if not isinstance(subscription, dict):
            return ResponseCode.SUCCESS, None
        expression_type = subscription.get("expressionType")
        if is_tag_type(expression_type if isinstance(expression_type, str) else None):
            return ResponseCode.SUCCESS, None
        if not self.config.enable_property_filter:
            return ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED + str(expression_type)
        try:
            compile_filter(str(expression_type), str(subscription.get("subString") or ""))
        except Sql92Error as exc:
            return ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)
        return ResponseCode.SUCCESS, None
