"""``tidemq admin ...``: mqadmin's everyday verbs over :class:`~tidemq.admin.AsyncAdminClient`.

``admin_group`` (name ``admin``) is added to the ``tidemq`` command by ``tidemq.cli``. Every verb
has a kebab-case name (``topic-list``) and answers to mqadmin's own camelCase name too
(``tidemq admin topicList``). The verbs live in ``cli_topic``, ``cli_group``, ``cli_message`` and
``cli_broker``; this module holds what they share:

* ``-n/--namesrv`` (default ``$NAMESRV_ADDR``, else ``127.0.0.1:9876``);
* ``--access-key/--secret-key`` (``$TIDEMQ_ACCESS_KEY`` / ``$TIDEMQ_SECRET_KEY``) to sign requests
  for an ACL broker (use an account with ``admin: true``);
* ``--json`` for machine output (one JSON document on stdout), otherwise rich tables;
* errors: one ``error: ...`` line on stderr saying what to fix, exit status 1 (also when the
  named topic or group does not exist).
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
