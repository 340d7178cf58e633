"""Compiles a parsed selector into nested closures over a tuple of property values.

Each property the selector names gets a getter that reads it from the evaluation context (a tuple
of values, or a stored record's bytes, where the property is only looked up when evaluation
reaches it); a getter gives the property's string or None. The common shapes (a property against a literal)
get closures that parse the property once as the literal's Java type and compare directly; the
rest go through :func:`~tidemq.protocol.sql92.values.java_compare`. Results are True, False or None
(SQL's unknown), exactly as RocketMQ 4.9's ``filter/expression`` classes give them (§2.3).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from tidemq.protocol.sql92.parser import BoolCast, Compare, Const, In, Logic, Negate, Node, Not, Prop
from tidemq.protocol.sql92.values import (
    JLong,
    Value,
    boolean_value_of,
    double_compare,
    java_compare,
    negate,
    parse_double,
    parse_int,
    parse_long,
)

Values = Any
"""The evaluation context handed to every closure: a tuple of property values, or a record's
``(buffer, properties start, properties end)``."""
Fn = Callable[[Values], Value]
Getter = Callable[[Values], str | None]

_TESTS: Final[dict[str, Callable[[int], bool]]] = {
    "=": lambda c: c == 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_INT_OPS: Final[dict[str, Callable[[int, int], bool]]] = {
    "=": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_MIRRORED: Final = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def property_names(node: Node) -> tuple[str, ...]:
    """The distinct properties a tree reads, in order of first appearance."""
    seen: dict[str, None] = {}
    stack = [node]  # depth first, left before right, without recursion (a long AND chain is deep)
    while stack:
        n = stack.pop()
        if isinstance(n, Prop):
            seen.setdefault(n.name, None)
        elif isinstance(n, Negate | Not | BoolCast | In):
            stack.append(n.operand)
        elif isinstance(n, Logic | Compare):
            stack += (n.right, n.left)
    return tuple(seen)


def compile_node(node: Node, getters: dict[str, Getter]) -> Fn:
    """The closure evaluating ``node``; ``getters[name](context)`` reads a property from the
    evaluation context (a values tuple, or a record's bytes: :mod:`tidemq.protocol.sql92.record`)."""
    if isinstance(node, Const):
        value = node.value
        return lambda v: value
    if isinstance(node, Prop):
        return getters[node.name]
    if isinstance(node, Negate):
        inner = compile_node(node.operand, getters)
        return lambda v: negate(inner(v))
    if isinstance(node, Not):
        return _not(compile_node(node.operand, getters))
    if isinstance(node, BoolCast):
        get = getters[node.operand.name]
        return lambda v: None if get(v) is None else False
    if isinstance(node, In):
        return _in(getters[node.operand.name], node.values, node.negated)
    if isinstance(node, Logic):
        return _logic([compile_node(n, getters) for n in _chain(node)], node.op != "AND")
    return _compare(node, getters)


def _not(inner: Fn) -> Fn:
    def fn(v: Values) -> Value:
        r = inner(v)
        return None if r is None else not r

    return fn


def _in(get: Getter, items: frozenset[str], negated: bool) -> Fn:
    def fn(v: Values) -> Value:
        x = get(v)
        return None if x is None else (x in items) is not negated

    return fn


def _chain(node: Logic) -> list[Node]:
    """The operands of a run of ``node.op`` (``a AND b AND c`` parses as ``((a AND b) AND c)``), in
    order, found without recursion: a selector of a thousand ANDs compiles to one flat closure."""
    operands: list[Node] = []
    n: Node = node
    while isinstance(n, Logic) and n.op == node.op:
        operands.append(n.right)
        n = n.left
    operands.append(n)
    operands.reverse()
    return operands


def _logic(operands: list[Fn], decisive: bool) -> Fn:
    """AND (``decisive`` False) or OR (True) of ``operands`` in three-valued logic, evaluated left to
    right: ``decisive`` at the first operand that is, else null when one was null, else ``not
    decisive``. The same results and the same operands evaluated as the nested pairs it replaces."""
    other = not decisive
    if len(operands) == 2:  # the common case: no loop
        left, right = operands

        def pair(v: Values) -> Value:
            lv = left(v)
            if lv is decisive:
                return decisive
            rv = right(v)
            if rv is decisive:
                return decisive
            return None if lv is None or rv is None else other

        return pair

    def run(v: Values) -> Value:
        unknown = False
        for operand in operands:
            r = operand(v)
            if r is decisive:
                return decisive
            if r is None:
                unknown = True
        return None if unknown else other

    return run


def _compare(node: Compare, getters: dict[str, Getter]) -> Fn:
    op, left, right = node.op, node.left, node.right
    if isinstance(left, Prop) and isinstance(right, Const) and right.value is not None:
        return _prop_vs_const(getters[left.name], op, right.value, prop_left=True)
    if isinstance(right, Prop) and isinstance(left, Const) and type(left.value) in (int, JLong, float, str):
        # (``TRUE = prop`` is left to the general path: Java throws a ClassCastException there)
        return _prop_vs_const(getters[right.name], _MIRRORED[op], left.value, prop_left=False)
    lf, rf = compile_node(left, getters), compile_node(right, getters)
    test = _TESTS[op]
    if op == "=":

        def equal(v: Values) -> Value:  # doCreateEqual
            lv, rv = lf(v), rf(v)
            if lv is None:
                return True if rv is None else None
            if rv is None:
                return False
            return java_compare(lv, rv) == 0

        return equal

    def ordering(v: Values) -> Value:  # ComparisonExpression.evaluate
        lv = lf(v)
        if lv is None:
            return None
        rv = rf(v)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # two strings: both as Double, or an exception
            return test(double_compare(parse_double(lv), parse_double(rv)))
        return test(java_compare(lv, rv))

    return ordering


def _prop_vs_const(get: Getter, op: str, const: Value, *, prop_left: bool) -> Fn:
    """``prop op const`` (``op`` already mirrored when the constant was on the left): the property
    is parsed as the constant's type, as ``__compare`` converts it. A missing property gives null,
    except ``const = prop``, which gives FALSE (only the right side is null)."""
    missing: Value = None if prop_left or op != "=" else False
    t = type(const)
    if t is str and op == "=":

        def str_eq(v: Values) -> Value:
            x = get(v)
            return missing if x is None else x == const

        return str_eq
    if t is int or t is JLong:
        parse = parse_int if t is int else parse_long
        int_op, n = _INT_OPS[op], int(const)  # type: ignore[arg-type]

        def int_cmp(v: Values) -> Value:
            x = get(v)
            if x is None:
                return missing
            # plain digits short enough for an int: what parse() gives, without the call
            return int_op(int(x) if len(x) < 10 and x.isdecimal() else parse(x), n)

        return int_cmp
    if t is float:
        test, d = _TESTS[op], float(const)  # type: ignore[arg-type]

        def double_cmp(v: Values) -> Value:
            x = get(v)
            return missing if x is None else test(double_compare(parse_double(x), d))

        return double_cmp
    if t is bool and op == "=":

        def bool_eq(v: Values) -> Value:
            x = get(v)
            return missing if x is None else boolean_value_of(x) is const

        return bool_eq
    # a string constant with an ordering cannot be compiled (checked by the parser)
    raise AssertionError(f"no closure for property {op} {const!r}")
