"""``tidemq serve`` / ``tidemq broker`` options for the transaction check (broker.conf keys win
when the option is not given)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tidemq.broker.config import BrokerConfig
    from tidemq.store.config import MessageStoreConfig

__all__ = ["TRANSACTION_FLAGS", "apply_transaction_options", "transaction_options"]

TRANSACTION_FLAGS: dict[str, tuple[str, str, str]] = {
    "transaction_check_interval": (
        "--transaction-check-interval",
        "MS",
        "Period of the transaction check pass [60000, or transactionCheckInterval of -c].",
    ),
    "transaction_time_out": (
        "--transaction-timeout",
        "MS",
        "A half message younger than this is not checked yet [6000, or transactionTimeOut of -c].",
    ),
    "transaction_check_max": (
        "--transaction-check-max",
        "N",
        "Checks before a half message is discarded to TRANS_CHECK_MAX_TIME_TOPIC "
        "[15, or transactionCheckMax of -c].",
    ),
}
"""``{BrokerConfig field: (flag, metavar, help)}``."""


def transaction_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the three ``--transaction-*`` options (passed to the command as their field names)."""
    for name, (flag, metavar, text) in TRANSACTION_FLAGS.items():
        f = click.option(flag, name, metavar=metavar, default=None, help=text)(f)
    return f


def apply_transaction_options(config: BrokerConfig, store: MessageStoreConfig, given: dict[str, Any]) -> None:
    """Set the options that were given on ``config``, checked like every other value.

    Raises:
        ConfigError: a value is not an integer or out of range (names the flag).
    """
    from tidemq.broker.config_check import apply_overrides, check_config

    values = {name: raw for name, raw in given.items() if name in TRANSACTION_FLAGS and raw is not None}
    if not values:
        return
    sources = {name: TRANSACTION_FLAGS[name][0] for name in values}
    apply_overrides(config, values, sources)
    check_config(config, store, sources)
