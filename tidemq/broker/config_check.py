"""The one place broker configuration values are parsed and checked.

Every way a value can arrive ends here: ``broker.conf`` (:func:`tidemq.broker.config.load_broker_conf`),
CLI flags of ``tidemq serve / broker / namesrv`` (:func:`apply_overrides`) and the dataclass
defaults or values set in code (:func:`check_config`, which :meth:`Broker.start` calls too). An
invalid value is a :class:`ConfigError` whose one-line message names the key (as the user wrote
it: ``listenPort`` in broker.conf, ``--broker-port`` on the command line), the value and what is
allowed; nothing starts. Unknown broker.conf keys stay accepted (RocketMQ ignores them too), except
a key within a small edit distance of one tidemq uses (``flushDiskTyp``): that is an error naming the
known key (:func:`check_unknown_keys`), since the broker would otherwise run with the default.

RocketMQ's ``MixAll.properties2Object`` silently skips values it cannot parse; tidemq refuses them.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tidemq.errors import ClientError
from tidemq.store.config import _DELAY_UNITS, ASYNC_FLUSH, CQ_STORE_UNIT_SIZE, SYNC_FLUSH, MessageStoreConfig

__all__ = [
    "ConfigError",
    "apply_overrides",
    "check_config",
    "check_flush_flag",
    "check_port",
    "check_unknown_keys",
    "parse_value",
    "snake_to_camel",
]

Sources = Mapping[str, str]
"""``{field name: how the user named it}``, e.g. ``{"listen_port": "--broker-port"}``."""


class ConfigError(ClientError):
    """An invalid configuration value; the message is one line naming key, value and what is allowed."""


def snake_to_camel(name: str) -> str:
    """``listen_port`` -> ``listenPort``, ``broker_ip1`` -> ``brokerIP1`` (the broker.conf spelling)."""
    first, *rest = name.split("_")
    out = first + "".join(p.capitalize() for p in rest)
    return out.replace("Ip1", "IP1").replace("Ip2", "IP2")


def _label(name: str, sources: Sources | None) -> str:
    if sources and name in sources:
        return sources[name]
    return snake_to_camel(name)


def _fail(label: str, value: object, allowed: str) -> ConfigError:
    text = str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    shown = repr(text) if isinstance(value, str) else text
    return ConfigError(f"invalid configuration: {label}={shown}: {allowed}")


_TRUE = ("true",)
_FALSE = ("false",)


def parse_value(label: str, raw: str, hint: Any) -> Any:
    """Convert the text ``raw`` to the field type ``hint`` (bool, int, float, str, Optional[...]).

    Raises:
        ConfigError: ``raw`` does not parse (message names ``label``, the value and the type).
    """
    args = typing.get_args(hint)
    if args:  # Optional[X] / X | None
        if raw == "" and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    text = raw.strip()
    if hint is bool:
        low = text.lower()
        if low not in _TRUE + _FALSE:
            raise _fail(label, raw, "must be true or false")
        return low in _TRUE
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise _fail(label, raw, "must be an integer") from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise _fail(label, raw, "must be a number") from None
    return raw


def apply_overrides(target: Any, values: Mapping[str, str], sources: dict[str, str]) -> list[str]:
    """Parse and set ``values`` (``{field name: text}``) on dataclass ``target``; return unknown names.

    ``sources`` is updated with each applied field's label (the caller passes labels in it
    beforehand, e.g. ``{"listen_port": "--broker-port"}``; missing ones default to the camelCase key).

    Raises:
        ConfigError: a value does not parse as its field's type.
    """
    hints = typing.get_type_hints(type(target))
    names = {f.name for f in dataclasses.fields(target)}
    rest: list[str] = []
    for name, raw in values.items():
        if name not in names:
            rest.append(name)
            continue
        label = sources.setdefault(name, snake_to_camel(name))
        setattr(target, name, parse_value(label, raw, hints[name]))
    return rest


# -- rules -------------------------------------------------------------------------------------------

Rule = tuple[Callable[[Any], bool], str]


def _port(allow_zero: bool = True) -> Rule:
    low = 0 if allow_zero else 1
    return (lambda v: isinstance(v, int) and low <= v <= 65535, f"must be an integer {low}..65535")


def _at_least(low: int) -> Rule:
    return (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low,
        f"must be an integer >= {low}",
    )


def _between(low: int, high: int) -> Rule:
    return (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high,
        f"must be an integer {low}..{high}",
    )


def _one_of(*choices: str) -> Rule:
    return (lambda v: v in choices, "allowed: " + ", ".join(choices))


_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")
_ADDR = re.compile(r"[^\s:;]+:\d{1,5}")


def _namesrv_ok(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    parts = [a.strip() for a in value.split(";") if a.strip()]
    return all(_ADDR.fullmatch(p) and 0 < int(p.rsplit(":", 1)[1]) <= 65535 for p in parts)


def _delay_levels_ok(value: Any) -> bool:
    if not isinstance(value, str) or not value.split():
        return False
    return all(item[-1:] in _DELAY_UNITS and item[:-1].isdigit() for item in value.split())


BROKER_RULES: dict[str, Rule] = {
    "broker_name": (
        lambda v: isinstance(v, str) and _NAME.fullmatch(v) is not None,
        "must be 1..127 characters of [%|a-zA-Z0-9_-]",
    ),
    "broker_cluster_name": (
        lambda v: isinstance(v, str) and _NAME.fullmatch(v) is not None,
        "must be 1..127 characters of [%|a-zA-Z0-9_-]",
    ),
    "broker_id": _at_least(0),
    "listen_port": _port(),
    "ha_listen_port": (lambda v: v is None or _port()[0](v), "must be an integer 0..65535"),
    "namesrv_addr": (_namesrv_ok, "must be host:port[;host:port...]"),
    "default_topic_queue_nums": _between(1, 1024),
    "short_polling_time_mills": _at_least(1),
    "max_suspend_ms": _at_least(0),
    "register_name_server_period": _at_least(1000),
    "register_broker_timeout_mills": _at_least(1),
    "broker_permission": _between(0, 7),
    "channel_expired_timeout": _at_least(1000),
    "subscription_expired_timeout": _at_least(1000),
    "client_channel_scan_interval": _at_least(100),
    "flush_consumer_offset_interval": _at_least(100),
    "max_reconsume_times": _between(0, 10_000),
    "broker_role": _one_of("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
    "server_channel_max_idle_time_seconds": _at_least(1),
    "idle_poll_us": _between(0, 100_000),
    "transaction_time_out": _at_least(0),
    "transaction_check_max": _between(1, 10_000),
    "transaction_check_interval": _at_least(10),
}
"""``{BrokerConfig field: (is valid, what is allowed)}``; fields not listed only need their type."""

STORE_RULES: dict[str, Rule] = {
    "store_path_root_dir": (lambda v: isinstance(v, str) and v.strip() != "", "must be a directory path"),
    "flush_disk_type": _one_of(ASYNC_FLUSH, SYNC_FLUSH),
    "mapped_file_size_commit_log": _at_least(4096),
    "mapped_file_size_consume_queue": (
        lambda v: isinstance(v, int) and v >= CQ_STORE_UNIT_SIZE and v % CQ_STORE_UNIT_SIZE == 0,
        f"must be a positive multiple of {CQ_STORE_UNIT_SIZE}",
    ),
    "flush_interval_commit_log": _at_least(1),
    "flush_interval_consume_queue": _at_least(1),
    "sync_flush_timeout": _at_least(1),
    "file_reserved_time": _at_least(0),
    "disk_max_used_space_ratio": _between(10, 95),
    "disk_space_clean_forcibly_ratio": _between(10, 95),
    "disk_space_warning_level_ratio": _between(10, 100),
    "max_message_size": _between(1, 64 * 1024 * 1024),
    "max_transfer_bytes_on_message_in_memory": _at_least(1),
    "max_transfer_count_on_message_in_memory": _at_least(1),
    "max_transfer_bytes_on_message_in_disk": _at_least(1),
    "max_transfer_count_on_message_in_disk": _at_least(1),
    "access_message_in_memory_max_ratio": _between(0, 100),
    "message_delay_level": (
        _delay_levels_ok,
        "must be space-separated <number><s|m|h|d> entries, e.g. '1s 5s 1m'",
    ),
    "max_hash_slot_num": _at_least(1),
    "max_index_num": _at_least(1),
    "max_msgs_num_batch": _at_least(1),
    "default_query_max_num": _at_least(1),
    "timer_precision_ms": _between(10, 60_000),  # the wheel: (max delay + 2 h) / precision slots of 32 B
    "timer_max_delay_sec": _between(1, 40 * 86_400),
    "mapped_file_size_timer_log": _at_least(48),  # one timer-log record
}
"""``{MessageStoreConfig field: (is valid, what is allowed)}``."""


def _check_types(target: Any, sources: Sources | None) -> None:
    hints = typing.get_type_hints(type(target))
    for f in dataclasses.fields(target):
        value = getattr(target, f.name)
        hint = hints[f.name]
        args = typing.get_args(hint)
        if args:
            if value is None and type(None) in args:
                continue
            hint = next(a for a in args if a is not type(None))
        ok = (
            isinstance(value, bool)
            if hint is bool
            else isinstance(value, int) and not isinstance(value, bool)
            if hint is int
            else isinstance(value, (int, float)) and not isinstance(value, bool)
            if hint is float
            else isinstance(value, hint)
            if isinstance(hint, type)
            else True
        )
        if not ok:
            name = getattr(hint, "__name__", str(hint))
            raise _fail(_label(f.name, sources), value, f"must be of type {name}")


def check_config(broker: Any, store: MessageStoreConfig, sources: Sources | None = None) -> None:
    """Check every value of a ``BrokerConfig`` and a ``MessageStoreConfig`` once, in one place.

    Args:
        broker: a :class:`~tidemq.broker.config.BrokerConfig`.
        store: the store options.
        sources: how the user named each field (defaults to the camelCase broker.conf key).

    Raises:
        ConfigError: the first invalid value, as one line naming key, value and what is allowed.
    """
    for target, rules in ((broker, BROKER_RULES), (store, STORE_RULES)):
        _check_types(target, sources)
        for name, (ok, allowed) in rules.items():
            if not hasattr(target, name):
                continue
            value = getattr(target, name)
            if not ok(value):
                raise _fail(_label(name, sources), value, allowed)


def check_port(label: str, raw: str) -> int:
    """Parse a port given as text (a CLI flag): an integer 0..65535 (0 = pick a free one).

    Raises:
        ConfigError: not an integer in range (the message names ``label``).
    """
    value = parse_value(label, raw, int)
    ok, allowed = _port()
    if not ok(value):
        raise _fail(label, raw, allowed)
    return int(value)


def check_flush_flag(raw: str) -> str:
    """``--flush async|sync`` -> ``ASYNC_FLUSH`` / ``SYNC_FLUSH`` (case-insensitive).

    Raises:
        ConfigError: any other value.
    """
    low = raw.strip().lower()
    if low not in ("async", "sync"):
        raise _fail("--flush", raw, "allowed: async, sync")
    return SYNC_FLUSH if low == "sync" else ASYNC_FLUSH


def edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein distance (adjacent swaps count 1) of ``a`` and ``b``, or ``limit + 1``
    once it is known to exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def near_key(key: str, known: Iterable[str]) -> str | None:
    """The known key ``key`` is most likely a misspelling of: same letters in another case, or within
    edit distance 1 (keys up to 8 characters) or 2 (longer ones); None if none is that close."""
    limit = 1 if len(key) <= 8 else 2
    low = key.lower()
    best: tuple[int, str] | None = None
    for name in known:
        d = edit_distance(low, name.lower(), limit)
        if d <= limit and (best is None or d < best[0]):
            best = (d, name)
    return best[1] if best is not None else None


def check_unknown_keys(unknown: Iterable[str], known: Iterable[str], source: str) -> list[str]:
    """Sort the broker.conf keys tidemq does not use: a RocketMQ option (``ROCKETMQ_BROKER_KEYS``) or
    any key not close to a known one is accepted (returned, for one warning); a near miss of a key
    tidemq uses is an error.

    Raises:
        ConfigError: ``key`` is a misspelling of a known key (the message names both and ``source``).
    """
    from tidemq.broker.rocketmq_keys import ROCKETMQ_BROKER_KEYS

    known = sorted(known)
    rest: list[str] = []
    for key in unknown:
        if key in ROCKETMQ_BROKER_KEYS:
            continue
        near = near_key(key, known)
        if near is not None:
            raise ConfigError(
                f"invalid configuration: unknown key {key!r} in {source}: did you mean {near!r}? "
                f"(a misspelled key would leave {near} at its default)"
            )
        rest.append(key)
    return rest
