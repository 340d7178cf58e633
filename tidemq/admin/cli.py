"""``tidemq admin ...``: mqadmin's everyday verbs over :class:`~tidemq.admin.AsyncAdminClient`.

Importing this module registers every verb on ``admin_group`` (the verbs live in ``cli_topic``,
``cli_group``, ``cli_message``, ``cli_broker``, ``cli_pop``, ``cli_trace``, ``cli_transaction`` and
``cli_topic_batch``) and re-exports what they share from :mod:`tidemq.admin.cli_base`, whose
docstring lists the common options, output and error conventions.
"""

from __future__ import annotations

from tidemq.admin import (
    cli_broker,
    cli_group,
    cli_message,
    cli_pop,
    cli_topic,
    cli_topic_batch,
    cli_trace,
    cli_transaction,
)
from tidemq.admin.cli_base import (
    MQADMIN_NAMES,
    Out,
    Verb,
    admin_command,
    admin_group,
    fmt_ms,
    format_table,
    message_json,
    parse_time_ms,
    resolve_broker_addrs,
    show_messages,
    time_ms,
)

# Importing the cli_* modules registers their verbs on admin_group; they import cli_base (not this
# module), so there is no import cycle.
__all__ = [
    "MQADMIN_NAMES",
    "Out",
    "Verb",
    "admin_command",
    "admin_group",
    "cli_broker",
    "cli_group",
    "cli_message",
    "cli_pop",
    "cli_topic",
    "cli_topic_batch",
    "cli_trace",
    "cli_transaction",
    "fmt_ms",
    "format_table",
    "message_json",
    "parse_time_ms",
    "resolve_broker_addrs",
    "show_messages",
    "time_ms",
]
