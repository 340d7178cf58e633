"""SQL92 selectors: RocketMQ 4.9's grammar, compile-time errors and evaluation semantics
(transactions.md §2.2-2.3), and evaluation straight from stored records."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.message import properties_to_string
from tidemq.protocol.message_codec import encode_stored_message
from tidemq.protocol.sql92 import Sql92Error, compile_sql92
from tidemq.protocol.sql92.record import record_filter
from tidemq.protocol.sql92.values import JavaError, parse_double, parse_int


def match(sql: str, **props: str) -> bool:
    return compile_sql92(sql).matches(props)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"a": "7", "b": "x"}, True),
        ({"a": "5", "b": "x"}, False),
        ({"b": "x"}, False),
        ({"a": "abc", "b": "x"}, False),
        ({"a": "7.5", "b": "x"}, False),  # Integer.valueOf
        ({"a": "3000000000", "b": "x"}, False),  # int overflow
        ({"a": "9", "b": "X"}, False),
        ({"a": "9", "b": "x", "TAGS": "another"}, True),
    ],
)
def test_reference_vectors(props: dict[str, str], expected: bool) -> None:
    """The §2.3 table for ``a > 5 AND b = 'x'``."""
    assert compile_sql92("a > 5 AND b = 'x'").matches(props) is expected


@pytest.mark.parametrize(
    ("sql", "props", "expected"),
    [
        ("a > 5.0", {"a": "3000000000"}, True),  # Double.valueOf
        ("a > 3000000000", {"a": "3000000001"}, True),  # a Long literal: Long.valueOf
        ("a > 5.0", {"a": " 7 "}, True),  # Double.valueOf trims
        ("a > 5", {"a": " 7"}, False),  # Integer.valueOf does not
        ("a > 5.0", {"a": "7f"}, True),  # type suffix
        ("a > 5.0", {"a": "NaN"}, True),  # Double.compare: NaN above everything
        ("a > 5.0", {"a": "inf"}, False),  # Python's spelling is not Java's
        ("a > 5", {"a": "1_000"}, False),
        ("a > 5", {"a": "+7"}, True),
        ("a > 5", {"a": "\u0667"}, True),  # an Arabic-Indic 7: Character.digit
        ("a = 5", {"a": "05"}, True),
        ("a = 5.0", {"a": "5"}, True),
        ("a = 5", {"a": "5.0"}, False),  # Integer.valueOf("5.0") throws
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "X"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {}, False),  # NOT(null) = null
        ("a = TRUE", {"a": "TRUE"}, True),  # Boolean.valueOf
        ("TRUE = a", {"a": "true"}, False),  # ClassCastException in Java
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a BETWEEN 1 AND 3", {"a": "1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "4"}, False),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {}, False),
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x', 'y')", {}, False),
        ("a IN ('it''s')", {"a": "it's"}, True),
        ("flag", {"flag": "true"}, False),  # a present property casts to FALSE
        ("NOT flag", {"flag": "true"}, True),
        ("NOT flag", {}, False),
        ("a > b", {"a": "2.5", "b": "10"}, False),  # two strings: as doubles
        ("a > b", {"a": "x", "b": "1"}, False),
        ("a > -5", {"a": "-3"}, True),
        ("a = -2147483648", {"a": "-2147483648"}, True),
        ("-a = 1", {"a": "-1"}, False),  # negating a property gives null
        ("a > 5 OR b = 'x'", {"a": "abc", "b": "x"}, False),  # the exception stops evaluation
        ("b = 'x' OR a > 5", {"a": "abc", "b": "x"}, True),  # ... unless OR short-circuits first
        ("a > 5 OR b = 'x'", {"b": "x"}, True),  # null OR TRUE
        ("a > 5 AND b = 'x'", {"a": "1"}, False),
        ("TAGS = 'tg'", {"TAGS": "tg"}, True),
        ("TRUE", {}, True),
        ("FALSE OR NULL", {}, False),
        ("NOT (a > 5)", {"a": "3"}, True),
        ("a > 5 and B = 'x' -- comment\n", {"a": "6", "B": "x"}, True),
        ("a /* c */ > 5", {"a": "6"}, True),
        ("a > 5 -- no newline", {"a": "6"}, True),
        ("(a > 5) = (b > 5)", {"a": "1", "b": "2"}, True),
    ],
)
def test_semantics(sql: str, props: dict[str, str], expected: bool) -> None:
    assert compile_sql92(sql).matches(props) is expected


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("a > 5 AND", "column 10"),
        ("a >> 5", "column 4"),
        ("a == 5", "column 4"),
        ("a != 5", "Lexical error at line 1, column 3"),
        ("5", "will not result in a boolean value"),
        ("'x'", "will not result in a boolean value"),
        ("a > 'x'", "cannot be compared"),
        ("a > TRUE", "cannot be compared"),
        ("(a > 1) > 2", "cannot be compared"),
        ("a = NULL", "'NULL' cannot be compared"),
        ("TRUE = 5", "cannot be compared with"),
        ("a BETWEEN NULL AND 2", "can not be null"),
        ("a BETWEEN 5 AND 1", "must less than or equal to"),
        ("5 IN ('x')", "Expected a property"),
        ("a IN (1)", "column 7"),
        ("a > 0.0", "less than"),
        ("a > 1e999", "greater than"),
        ("a > 9223372036854775808", "For input string"),
        ("a LIKE 'x%'", "column 3"),
        ("a CONTAINS 'x'", "column 3"),  # RocketMQ 5 only
        ("a NOT x", "column 7"),
        ("a > 5 b = 'x'", "column 7"),  # RocketMQ ignores text after a whole expression; refused here
        ("a > 5 --x\n)", "column 1"),
        ("a IS 5", "column 6"),
        ("a = 'x", "Lexical error"),
        ("", "<EOF>"),
        ("(" * 5000 + "a" + ")" * 5000, "nested too deeply"),
    ],
)
def test_compile_errors_name_the_problem(sql: str, fragment: str) -> None:
    with pytest.raises(Sql92Error) as info:
        compile_sql92(sql)
    assert str(info.value).startswith("Invalid MessageSelector. ")
    assert fragment in str(info.value)


def test_keywords_are_case_insensitive_and_names_are_not() -> None:
    expr = compile_sql92("a between 1 and 3 AnD b iS nOt NuLl")
    assert expr.names == ("a", "b")
    assert expr.matches({"a": "2", "b": ""}) and not expr.matches({"a": "2", "B": ""})


def test_java_number_parsers() -> None:
    assert parse_int("2147483647") == 2**31 - 1
    for bad in ("2147483648", "", "+", "1 ", "0x10", "1e3"):
        with pytest.raises(JavaError):
            parse_int(bad)
    assert parse_double("0x1.8p1") == 3.0
    assert parse_double("-Infinity") == float("-inf")
    for bad in ("inf", "nan", "1_0", "", "e5"):
        with pytest.raises(JavaError):
            parse_double(bad)


@given(st.integers(-(2**40), 2**40), st.integers(-(2**31), 2**31 - 1))
def test_integer_comparisons_agree_with_arithmetic(value: int, const: int) -> None:
    """``a > c``, ``a <= c`` and ``a = c`` for an int literal: numeric comparison within int32,
    no match at all outside it (Integer.valueOf throws), except against a Long literal."""
    props = {"a": str(value)}
    # -2147483648 is "-" applied to the Long literal 2147483648: the property is then read as a Long
    fits = -(2**31) <= value < 2**31 or const == -(2**31)
    assert match(f"a > {const}", **props) is (fits and value > const)
    assert match(f"a <= {const}", **props) is (fits and value <= const)
    assert match(f"a = {const}", **props) is (fits and value == const)


@given(st.text(max_size=8), st.lists(st.text(alphabet="abc'", max_size=3), min_size=1, max_size=4))
def test_in_and_not_in_partition_present_values(value: str, items: list[str]) -> None:
    listed = ", ".join("'" + item.replace("'", "''") + "'" for item in items)
    assert match(f"a IN ({listed})", a=value) is (value in items)
    assert match(f"a NOT IN ({listed})", a=value) is (value not in items)


def _record(props: dict[str, str], sys_flag: int = 0) -> bytes:
    hosts = {"born_host": "[::1]:5", "store_host": "[::1]:6"} if sys_flag else {}
    return encode_stored_message(
        topic="T", body=b"xyz", properties=properties_to_string(props), sys_flag=sys_flag, **hosts
    )


_PROP_NAMES = st.sampled_from(["a", "b", "ab", "TAGS", "UNIQ_KEY"])
_PROP_VALUES = st.one_of(st.integers(-20, 20).map(str), st.sampled_from(["x", "y", "", "7.5", "é"]))


@given(st.dictionaries(_PROP_NAMES, _PROP_VALUES, max_size=5), st.sampled_from([0, 0x30]))
def test_record_evaluation_equals_map_evaluation(props: dict[str, str], sys_flag: int) -> None:
    """Evaluating on a stored record's property bytes gives what the decoded map gives (IPv4 and
    IPv6 hosts; keys that are prefixes of other keys)."""
    for sql in ("a > 5 AND b = 'x'", "ab IS NULL OR a IN ('1', '2')", "TAGS = 'x' OR NOT b"):
        expr = compile_sql92(sql)
        buf = b"\0\0" + _record(props, sys_flag)
        assert record_filter(expr)(buf, 2) is expr.matches(props)


_LITERALS = st.one_of(
    st.integers(0, 2**40).map(str),
    st.floats(min_value=1e-300, max_value=1e300, allow_nan=False).map(repr),
)
_VALUES = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.floats(allow_nan=True).map(repr),
    st.sampled_from(["NaN", "Infinity", " 7 ", "+3", "7f", "0x10", "", "true", "abc", "1e3", "-0.0"]),
)


@given(_VALUES, _LITERALS, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]))
def test_fast_closures_agree_with_the_general_comparison(value: str, literal: str, op: str) -> None:
    """``a op 5`` and ``5 op a`` take the property-vs-literal closures; ``-(-5)`` is not a literal, so
    the same comparisons through it take the general ``java_compare`` path: both must agree."""
    props = {"a": value}
    assert match(f"a {op} {literal}", **props) is match(f"a {op} -(-{literal})", **props)
    assert match(f"{literal} {op} a", **props) is match(f"-(-{literal}) {op} a", **props)
    assert match(f"{literal} {op} a", **{}) is match(f"-(-{literal}) {op} a", **{})


def test_a_long_flat_chain_compiles_and_evaluates_in_linear_time() -> None:
    """``a=1 AND a=1 AND ...`` a client may send: it parsed, then compiling its left-deep tree (and
    evaluating it) recursed once per AND, a RecursionError (a traceback, not Sql92Error) past ~1000;
    and the lexer recounted the lines from the start at every token (quadratic)."""
    text = " AND ".join(["a = 1"] * 1500) + " OR b = 'x'"
    started = time.monotonic()
    expression = compile_sql92(text)
    record_filter(expression)
    assert time.monotonic() - started < 2.0
    assert expression.names == ("a", "b")
    got = [expression.matches(p) for p in ({"a": "1"}, {"a": "2"}, {"b": "x"}, {}, {"a": "x"})]
    assert got == [True, False, True, False, False]


@pytest.mark.parametrize("op", ["AND", "OR"])
def test_chains_of_three_valued_operands_match_nested_pairs(op: str) -> None:
    """Every mix of TRUE / FALSE / null over four operands: the flat chain gives what the pairs
    ((a op b) op c) op d give."""
    import itertools

    names = ["p", "q", "r", "s"]
    chain = compile_sql92(f" {op} ".join(f"{n} = 1" for n in names))
    nested = compile_sql92(f"((( p = 1 {op} q = 1) {op} r = 1) {op} s = 1)")
    paired = compile_sql92(f"(p = 1 {op} q = 1) {op} (r = 1 {op} s = 1)")
    for combo in itertools.product(["1", "0", None], repeat=4):
        values = tuple(combo)
        assert chain.evaluate_values(values) is nested.evaluate_values(values), (op, combo)
        assert paired.evaluate_values(values) is nested.evaluate_values(values), (op, combo)


def test_a_selector_longer_than_the_limit_is_refused_at_once() -> None:
    """A selector megabytes long cost seconds of the broker's loop and tens of MiB in its caches."""
    from tidemq.protocol.sql92 import MAX_SELECTOR_LENGTH

    text = " OR ".join(f"a = '{i}'" for i in range(60_000))
    started = time.monotonic()
    with pytest.raises(Sql92Error, match=f"at most {MAX_SELECTOR_LENGTH}"):
        compile_sql92(text)
    assert time.monotonic() - started < 0.1
    longest = " OR ".join(["a = 1"] * ((MAX_SELECTOR_LENGTH + 4) // 9))  # 9 characters a term
    assert len(longest) <= MAX_SELECTOR_LENGTH and compile_sql92(longest).matches({"a": "1"})
