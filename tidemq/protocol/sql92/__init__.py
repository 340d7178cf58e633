"""RocketMQ's SQL92 property filter: parse a selector once, evaluate it per message.

Mirrors RocketMQ 4.9's ``filter`` module (``SelectorParser.jj``, ``filter/expression/*``; facts in
transactions.md §2.2-2.3)::

    >>> expr = compile_sql92("a > 5 AND b = 'x'")
    >>> expr.matches({"a": "7", "b": "x"}), expr.matches({"a": "7.5", "b": "x"}), expr.matches({"b": "x"})
    (True, False, False)

Only TRUE matches: FALSE, unknown (null) and any evaluation error (a property that does not parse as
the number it is compared with) do not. :func:`compile_sql92` raises :class:`Sql92Error` (RocketMQ's
``Invalid MessageSelector. ...`` text, with the line and column) for a selector that does not
compile. The broker evaluates against a stored record's property bytes
(:mod:`tidemq.protocol.sql92.record`) without decoding the whole property map.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from operator import itemgetter

from tidemq.protocol.sql92.compiler import Fn, Values, compile_node, property_names
from tidemq.protocol.sql92.lexer import Sql92Error
from tidemq.protocol.sql92.parser import Node, parse
from tidemq.protocol.sql92.values import JavaError

__all__ = ["MAX_SELECTOR_LENGTH", "JavaError", "Sql92Error", "Sql92Expression", "compile_sql92"]


class Sql92Expression:
    """A compiled selector. Immutable and thread-safe; share it between pulls.

    Attributes:
        text: the selector as given.
        tree: its parse tree (:mod:`tidemq.protocol.sql92.parser`).
        names: the distinct property names it reads, in the order ``values`` tuples use.
    """

    __slots__ = ("_fn", "evaluate_values", "names", "text", "tree")

    def __init__(self, text: str, tree: Node) -> None:
        self.text = text
        self.tree = tree
        self.names: tuple[str, ...] = property_names(tree)
        self._fn: Fn = compile_node(tree, {name: itemgetter(i) for i, name in enumerate(self.names)})
        self.evaluate_values: Fn = self._fn
        """``evaluate_values(values)``: the raw result (True, False or None) for ``values`` (one
        string or None per ``names``); raises :class:`JavaError` where Java throws (e.g.
        ``'abc' > 5``), which means no match."""

    def matches_values(self, values: Values) -> bool:
        """True only when the selector evaluates to TRUE (``ExpressionMessageFilter``: errors and
        null are no match)."""
        try:
            return self._fn(values) is True
        except Exception:  # Java: catch (Throwable) -> no match
            return False

    def matches(self, properties: Mapping[str, str] | None) -> bool:
        """:meth:`matches_values` for a message's property map (None: no properties)."""
        if properties is None:
            properties = {}
        return self.matches_values(tuple(properties.get(name) for name in self.names))

    def __repr__(self) -> str:
        return f"Sql92Expression({self.text!r})"


MAX_SELECTOR_LENGTH = 16 * 1024
"""The longest selector compiled (characters). A client's selector is compiled on the broker's loop
(~2 us a character) and kept in caches (parsed trees ~40 bytes a character), so one that is
megabytes long is refused instead of costing seconds and tens of MiB each time it changes."""


@lru_cache(maxsize=256)
def _compile(text: str) -> Sql92Expression | Sql92Error:
    try:
        return Sql92Expression(text, parse(text))
    except Sql92Error as exc:
        return exc


def compile_sql92(text: str) -> Sql92Expression:
    """Parse and compile ``text`` (cached, like RocketMQ's ``SelectorParser`` parse cache).

    Raises:
        Sql92Error: the selector does not compile (message: ``Invalid MessageSelector. ...``), or
            is longer than :data:`MAX_SELECTOR_LENGTH` characters.
    """
    if len(text) > MAX_SELECTOR_LENGTH:
        raise Sql92Error(f"the selector is {len(text)} characters long, at most {MAX_SELECTOR_LENGTH}")
    result = _compile(text)
    if isinstance(result, Sql92Error):
        raise Sql92Error(result.detail, result.line, result.column)
    return result
