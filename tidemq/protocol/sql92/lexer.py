"""Tokens of RocketMQ's SQL92 message selectors (``filter/parser/SelectorParser.jj``, 4.9).

The lexer is lazy, like the JavaCC token manager it mirrors: the parser asks for one token at a
time, so text after a complete expression is never read (RocketMQ ignores it too, see
:mod:`tidemq.protocol.sql92.parser`). At each position the longest match wins; between a keyword
and an identifier of the same length the keyword wins.

Skipped: spaces, tabs, ``\\n``, ``\\r``, ``\\f``; ``-- comment`` **ended by a newline** (without
one, ``--`` lexes as two minus signs, as in Java); ``/* block */`` comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final

from tidemq.errors import ProtocolError


class Sql92Error(ProtocolError):
    """An SQL92 selector that does not compile. ``str()`` is RocketMQ's
    ``Invalid MessageSelector. ...`` text; ``line`` / ``column`` (1-based) locate the problem."""

    def __init__(self, detail: str, line: int = 0, column: int = 0) -> None:
        self.detail = detail
        self.line = line
        self.column = column
        where = f" (at line {line}, column {column})" if line and "at line" not in detail else ""
        super().__init__(f"Invalid MessageSelector. {detail}{where}")


class Kind(Enum):
    """Token kinds (JavaCC's token names)."""

    EOF = "<EOF>"
    NOT = "NOT"
    AND = "AND"
    OR = "OR"
    BETWEEN = "BETWEEN"
    IN = "IN"
    TRUE = "TRUE"
    FALSE = "FALSE"
    NULL = "NULL"
    IS = "IS"
    DECIMAL = "<DECIMAL_LITERAL>"
    FLOAT = "<FLOATING_POINT_LITERAL>"
    STRING = "<STRING_LITERAL>"
    ID = "<ID>"
    EQ = '"="'
    NE = '"<>"'
    GT = '">"'
    GE = '">="'
    LT = '"<"'
    LE = '"<="'
    LPAREN = '"("'
    COMMA = '","'
    RPAREN = '")"'
    PLUS = '"+"'
    MINUS = '"-"'


KEYWORDS: Final = {
    k.value: k
    for k in (
        Kind.NOT,
        Kind.AND,
        Kind.OR,
        Kind.BETWEEN,
        Kind.IN,
        Kind.TRUE,
        Kind.FALSE,
        Kind.NULL,
        Kind.IS,
    )
}
_OPERATORS: Final = {
    "=": Kind.EQ,
    "<>": Kind.NE,
    ">": Kind.GT,
    ">=": Kind.GE,
    "<": Kind.LT,
    "<=": Kind.LE,
    "(": Kind.LPAREN,
    ",": Kind.COMMA,
    ")": Kind.RPAREN,
    "+": Kind.PLUS,
    "-": Kind.MINUS,
}

_SKIP = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)+")
_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_OPERATOR = re.compile(r"<>|>=|<=|[=<>(),+\-]")


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its text (``image``) and where it starts (1-based line and column)."""

    kind: Kind
    image: str
    line: int
    column: int
    pos: int


class Lexer:
    """Hands out the tokens of ``text`` one at a time (:meth:`next`).

    Raises:
        Sql92Error: on a character no token starts with (JavaCC's ``TokenMgrError``).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._line = 1
        self._line_start = 0
        self._scanned = 0  # newlines before here are counted in _line

    def _where(self, pos: int) -> tuple[int, int]:
        """Line and column (1-based) of ``pos``, counting only the newlines since the last call (a
        recount from the start at every token made a long selector quadratic)."""
        if pos < self._scanned:  # (never: tokens come in order) recount from the start
            self._line, self._line_start, self._scanned = 1, 0, 0
        text = self.text
        newlines = text.count("\n", self._scanned, pos)
        if newlines:
            self._line += newlines
            self._line_start = text.rfind("\n", self._scanned, pos) + 1
        self._scanned = pos
        return self._line, pos - self._line_start + 1

    def next(self) -> Token:
        """The next token (``Kind.EOF`` at the end, for ever after)."""
        text = self.text
        skip = _SKIP.match(text, self.pos)
        if skip is not None:
            self.pos = skip.end()
        pos = self.pos
        line, column = self._where(pos)
        if pos >= len(text):
            return Token(Kind.EOF, "", line, column, pos)
        best: tuple[int, Kind] | None = None
        for regex, kind in (
            (_ID, Kind.ID),
            (_DECIMAL, Kind.DECIMAL),
            (_FLOAT, Kind.FLOAT),
            (_STRING, Kind.STRING),
        ):
            m = regex.match(text, pos)
            if m is not None and (best is None or m.end() > best[0]):
                best = (m.end(), kind)
        op = _OPERATOR.match(text, pos)
        if op is not None and (best is None or op.end() > best[0]):
            best = (op.end(), _OPERATORS[op.group()])
        if best is None:
            char = text[pos]
            raise Sql92Error(
                f'Lexical error at line {line}, column {column}.  Encountered: "{char}" ({ord(char)}), after : ""',
                line,
                column,
            )
        end, kind = best
        image = text[pos:end]
        if kind is Kind.ID:
            kind = KEYWORDS.get(image.upper(), Kind.ID)
        self.pos = end
        return Token(kind, image, line, column, pos)
