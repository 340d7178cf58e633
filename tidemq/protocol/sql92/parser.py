"""Parser of RocketMQ's SQL92 message selectors into a small tree (4.9 grammar, transactions.md §2.2).

Recursive descent over the grammar of ``SelectorParser.jj``::

    selector   := or                                  (must be boolean; a bare property is cast)
    or         := and ( OR and )*
    and        := equality ( AND equality )*
    equality   := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison := unary ( ('>'|'>='|'<'|'<=') unary | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')' )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | identifier | '(' or ')'

with the compile-time checks of ``ComparisonExpression`` / ``ConstantExpression`` (§2.2 "Compile-time
errors"). One deliberate difference: RocketMQ stops after a complete expression and silently ignores
what follows (JavaCC's ``JmsSelector`` does not require the end of input, so ``a > 5 b`` is
``a > 5`` and ``a CONTAINS 'x'`` is the bare property ``a``); tidemq refuses such text with
SUBSCRIPTION_PARSE_FAILED. CONTAINS / STARTSWITH / ENDSWITH / LIKE are not in the 4.9 grammar.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Final

from tidemq.protocol.sql92.lexer import Kind, Lexer, Sql92Error, Token
from tidemq.protocol.sql92.values import (
    INT_MAX,
    INT_MIN,
    JavaError,
    JLong,
    Value,
    java_compare,
    java_str,
    parse_long,
)

DOUBLE_MIN: Final = 5e-324
"""``Double.MIN_VALUE``: a float literal below it (``0.0``) is refused, as RocketMQ does."""


# -- the tree ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    """A literal. ``boolean``: TRUE / FALSE / NULL (Java's ``BooleanConstantExpression``)."""

    value: Value
    boolean: bool = False

    def __str__(self) -> str:
        return java_str(self.value)


@dataclass(frozen=True, slots=True)
class Prop:
    """A message property (its value is a string, or null when the message lacks it)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus: numbers negated, anything else null."""

    operand: Node

    def __str__(self) -> str:
        return f"(- {self.operand})"


@dataclass(frozen=True, slots=True)
class Not:
    """Boolean NOT (null stays null)."""

    operand: Node

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A bare property used as a boolean: null when missing, else FALSE (a String is no Boolean)."""

    operand: Prop

    def __str__(self) -> str:
        return str(self.operand)


@dataclass(frozen=True, slots=True)
class Logic:
    """AND / OR with SQL's three-valued logic, short-circuit from the left."""

    op: str
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} {'&&' if self.op == 'AND' else '||'} {self.right})"


@dataclass(frozen=True, slots=True)
class Compare:
    """``=`` (``<>`` is NOT ``=``; IS NULL is ``= NULL`` unchecked) or an ordering ``> >= < <=``."""

    op: str
    left: Node
    right: Node

    def __str__(self) -> str:
        return f"({self.left} {'==' if self.op == '=' else self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class In:
    """``prop [NOT] IN ('a', 'b')``: exact string membership."""

    operand: Prop
    values: frozenset[str]
    negated: bool

    def __str__(self) -> str:
        return f"{self.operand} {'NOT IN' if self.negated else 'IN'} ( {', '.join(sorted(self.values))} )"


Node = Const | Prop | Negate | Not | BoolCast | Logic | Compare | In


def is_boolean(node: Node) -> bool:
    """Java's ``instanceof BooleanExpression``."""
    if isinstance(node, Const):
        return node.boolean
    return isinstance(node, Not | BoolCast | Logic | Compare | In)


# -- compile-time checks (ComparisonExpression, SelectorParser.asBooleanExpression) -------------


def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_less_than_operand(node: Node, at: Token) -> None:
    if (isinstance(node, Const) and not _is_number(node.value)) or (
        not isinstance(node, Const) and is_boolean(node)
    ):
        raise Sql92Error(f"Value '{node}' cannot be compared.", at.line, at.column)


def _ordering(op: str, left: Node, right: Node, at: Token) -> Compare:
    _check_less_than_operand(left, at)
    _check_less_than_operand(right, at)
    return Compare(op, left, right)


def _equal(left: Node, right: Node, at: Token) -> Compare:
    for side in (left, right):
        if isinstance(side, Const) and side.value is None:
            raise Sql92Error(f"'{side}' cannot be compared.", at.line, at.column)
    if isinstance(left, Const) and isinstance(right, Const) and left.boolean and not right.boolean:
        raise Sql92Error(f"'{left}' cannot be compared with '{right}'", at.line, at.column)
    return Compare("=", left, right)


def _between(value: Node, low: Node, high: Node, at: Token) -> Logic:
    if isinstance(low, Const) and isinstance(high, Const):
        if low.value is None or high.value is None:
            raise Sql92Error("Illegal values of between, values can not be null!", at.line, at.column)
        try:
            ordered = java_compare(high.value, low.value) >= 0
        except JavaError as exc:
            raise Sql92Error(str(exc), at.line, at.column) from None
        if not ordered:
            raise Sql92Error(
                f"Illegal values of between, left value({_java_format(low.value)}) must less than or "
                f"equal to right value({_java_format(high.value)})",
                at.line,
                at.column,
            )
    return Logic("AND", _ordering(">=", value, low, at), _ordering("<=", value, high, at))


def _java_format(value: Value) -> str:
    """``String.format("%s", value)``."""
    if isinstance(value, str):
        return value
    return java_str(value)


def _as_boolean(node: Node, at: Token) -> Node:
    if is_boolean(node):
        return node
    if isinstance(node, Prop):
        return BoolCast(node)
    raise Sql92Error(f"Expression will not result in a boolean value: {node}", at.line, at.column)


# -- literals -----------------------------------------------------------------------------------


def _decimal(token: Token) -> Const:
    """``ConstantExpression.createFromDecimal``: Integer within int32, else Long."""
    text = token.image.rstrip("lL")
    try:
        value = parse_long(text)
    except JavaError as exc:
        raise Sql92Error(str(exc), token.line, token.column) from None
    return Const(int(value) if INT_MIN <= value <= INT_MAX else JLong(value))


def _float(token: Token) -> Const:
    """``ConstantExpression.createFloat``: a Double in ``[Double.MIN_VALUE, Double.MAX_VALUE]``."""
    value = float(token.image)
    if math.isinf(value):
        raise Sql92Error(f"{token.image} is greater than 1.7976931348623157E308", token.line, token.column)
    if value < DOUBLE_MIN:
        raise Sql92Error(f"{token.image} is less than 4.9E-324", token.line, token.column)
    return Const(value)


def _string(token: Token) -> str:
    return token.image[1:-1].replace("''", "'")


# -- the parser ---------------------------------------------------------------------------------

_ORDERING: Final = {Kind.GT: ">", Kind.GE: ">=", Kind.LT: "<", Kind.LE: "<="}
_LITERAL_START: Final = (Kind.STRING, Kind.DECIMAL, Kind.FLOAT, Kind.TRUE, Kind.FALSE, Kind.NULL)


class Parser:
    """Parses one selector (:func:`parse`); tokens are read only as far as the grammar needs."""

    def __init__(self, text: str) -> None:
        self._lexer = Lexer(text)
        self._ahead: list[Token] = []

    def _peek(self, k: int = 0) -> Token:
        while len(self._ahead) <= k:
            self._ahead.append(self._lexer.next())
        return self._ahead[k]

    def _take(self) -> Token:
        self._peek()
        return self._ahead.pop(0)

    def _fail(self, token: Token, *expected: str) -> Sql92Error:
        shown = "<EOF>" if token.kind is Kind.EOF else token.image
        return Sql92Error(
            f'Encountered "{shown}" at line {token.line}, column {token.column}. '
            f"Was expecting {'one of: ' if len(expected) > 1 else ''}{' | '.join(expected)}",
            token.line,
            token.column,
        )

    def _expect(self, kind: Kind) -> Token:
        token = self._take()
        if token.kind is not kind:
            raise self._fail(token, kind.value)
        return token

    def selector(self) -> Node:
        """``JmsSelector``: the whole expression, cast to boolean, then the end of the text.

        RocketMQ stops after a complete expression and ignores the rest (``a CONTAINS 'x'`` on 4.9
        is the bare property ``a``, which matches nothing); here text after it is refused, so that
        a mistake gets an error rather than silence. A final ``-- comment`` without a newline
        (which Java also ignores) is allowed."""
        first = self._peek()
        tree = _as_boolean(self._or(), first)
        rest = self._peek()
        if rest.kind is not Kind.EOF:
            tail = self._lexer.text[rest.pos :]
            if not (tail.startswith("--") and "\n" not in tail and "\r" not in tail):
                raise self._fail(rest, "<EOF> (the expression is complete before this)")
        return tree

    def _or(self) -> Node:
        left = self._and()
        while self._peek().kind is Kind.OR:
            at = self._take()
            right = self._and()
            left = Logic("OR", _as_boolean(left, at), _as_boolean(right, at))
        return left

    def _and(self) -> Node:
        left = self._equality()
        while self._peek().kind is Kind.AND:
            at = self._take()
            right = self._equality()
            left = Logic("AND", _as_boolean(left, at), _as_boolean(right, at))
        return left

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            token = self._peek()
            if token.kind is Kind.EQ:
                self._take()
                left = _equal(left, self._comparison(), token)
            elif token.kind is Kind.NE:
                self._take()
                left = Not(_equal(left, self._comparison(), token))
            elif token.kind is Kind.IS:
                self._take()
                if self._peek().kind is Kind.NULL:
                    self._take()
                    left = Compare("=", left, Const(None, True))
                else:
                    self._expect(Kind.NOT)
                    self._expect(Kind.NULL)
                    left = Not(Compare("=", left, Const(None, True)))
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            token = self._peek()
            kind = token.kind
            if kind in _ORDERING:
                self._take()
                left = _ordering(_ORDERING[kind], left, self._unary(), token)
            elif kind is Kind.BETWEEN:
                self._take()
                left = self._between_rest(left, token, negated=False)
            elif kind is Kind.IN:
                self._take()
                left = self._in_rest(left, token, negated=False)
            elif kind is Kind.NOT:
                after = self._peek(1).kind
                if after is Kind.BETWEEN:
                    self._take(), self._take()
                    left = self._between_rest(left, token, negated=True)
                elif after is Kind.IN:
                    self._take(), self._take()
                    left = self._in_rest(left, token, negated=True)
                else:
                    raise self._fail(self._peek(1), '"BETWEEN"', '"IN"')
            else:
                return left

    def _between_rest(self, value: Node, at: Token, *, negated: bool) -> Node:
        low = self._unary()
        self._expect(Kind.AND)
        high = self._unary()
        if negated:  # createNotBetween: no checks of the bounds
            return Logic("OR", _ordering("<", value, low, at), _ordering(">", value, high, at))
        return _between(value, low, high, at)

    def _in_rest(self, value: Node, at: Token, *, negated: bool) -> Node:
        self._expect(Kind.LPAREN)
        items = [_string(self._expect(Kind.STRING))]
        while self._peek().kind is Kind.COMMA:
            self._take()
            items.append(_string(self._expect(Kind.STRING)))
        self._expect(Kind.RPAREN)
        if not isinstance(value, Prop):
            raise Sql92Error(f"Expected a property for In expression, got: {value}", at.line, at.column)
        return In(value, frozenset(items), negated)

    def _unary(self) -> Node:
        token = self._peek()
        if token.kind is Kind.PLUS:
            self._take()
            return self._unary()
        if token.kind is Kind.MINUS:
            self._take()
            return Negate(self._unary())
        if token.kind is Kind.NOT:
            self._take()
            return Not(_as_boolean(self._unary(), token))
        return self._primary()

    def _primary(self) -> Node:
        token = self._take()
        kind = token.kind
        if kind is Kind.STRING:
            return Const(_string(token))
        if kind is Kind.DECIMAL:
            return _decimal(token)
        if kind is Kind.FLOAT:
            return _float(token)
        if kind in (Kind.TRUE, Kind.FALSE, Kind.NULL):
            return Const({Kind.TRUE: True, Kind.FALSE: False}.get(kind), True)
        if kind is Kind.ID:
            return Prop(token.image)
        if kind is Kind.LPAREN:
            inner = self._or()
            self._expect(Kind.RPAREN)
            return inner
        raise self._fail(token, "<literal>", "<ID>", '"("', '"+"', '"-"', '"NOT"')


def parse(text: str) -> Node:
    """Parse a selector into its boolean tree.

    Raises:
        Sql92Error: a lexical, syntax or compile-time error; the message is RocketMQ's
            ``Invalid MessageSelector. ...`` with the line and column of the problem.
    """
    limit = sys.getrecursionlimit()
    try:
        return Parser(text).selector()
    except RecursionError:
        raise Sql92Error(f"expression nested too deeply (over ~{limit // 8} levels)") from None
