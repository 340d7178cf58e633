"""Tag hash codes (Java String.hashCode), subscription expressions and tag matching."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.body import SubscriptionData
from tidemq.protocol.filter import (
    build_subscription_data,
    is_tag_matched,
    is_tags_code_matched,
    parse_tags,
    tags_hash,
    to_int32,
)


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("TagA", 2598919),  # 84*31^3 + 97*31^2 + 103*31 + 65
        ("", 0),
        (None, 0),
        ("a", 97),
        ("é", 233),  # U+00E9, one UTF-16 unit
        ("中文", 646394),  # 0x4E2D * 31 + 0x6587
        ("😀", 1772899),  # surrogates 0xD83D * 31 + 0xDE00
        ("hello world", 1794106052),
        ("Hello World", -862545276),  # wraps negative
        ("polygenelubricants", -(2**31)),  # famous Integer.MIN_VALUE
    ],
)
def test_tags_hash_golden_values(tag: str | None, expected: int) -> None:
    """tags_hash equals Java's String.hashCode for ASCII, BMP, astral and overflowing strings."""
    assert tags_hash(tag) == expected


def java_hash(text: str) -> int:
    """An independent, slow String.hashCode: sum of c * 31^(n-1-i) mod 2^32, signed."""
    units = [
        int.from_bytes(text.encode("utf-16-be")[i : i + 2], "big")
        for i in range(0, len(text.encode("utf-16-be")), 2)
    ]
    n = len(units)
    total = sum(u * pow(31, n - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_tags_hash_matches_independent_formula(text: str) -> None:
    """Property: the result is a signed 32-bit int equal to the closed-form polynomial."""
    value = tags_hash(text)
    assert -(2**31) <= value < 2**31
    assert value == java_hash(text)


def test_build_subscription_all() -> None:
    """'*', '' and None subscribe to everything with empty tag sets."""
    for expr in ("*", "", None, "  * "):
        sub = build_subscription_data("T", expr, sub_version=1)
        assert (sub.sub_string, sub.tags_set, sub.code_set) == ("*", set(), set())


def test_build_subscription_tags() -> None:
    """'TagA || TagB' splits, trims and hashes."""
    sub = build_subscription_data("T", " TagA ||TagB|| ", sub_version=7)
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {tags_hash("TagA"), tags_hash("TagB")}
    assert sub.sub_version == 7 and sub.expression_type == "TAG"
    assert parse_tags("a||b") == ["a", "b"]


def test_build_subscription_sql92_kept_verbatim() -> None:
    """A SQL92 expression is not split into tags."""
    sub = build_subscription_data("T", "a > 1 || b", expression_type="SQL92", sub_version=1)
    assert sub.sub_string == "a > 1 || b" and not sub.tags_set


def test_broker_side_matching() -> None:
    """By hash: '*' and untagged entries match; otherwise the code must be in the code set."""
    sub = build_subscription_data("T", "TagA", sub_version=1)
    assert is_tags_code_matched(sub, tags_hash("TagA"))
    assert not is_tags_code_matched(sub, tags_hash("TagB"))
    assert is_tags_code_matched(sub, None)
    assert is_tags_code_matched(None, 5)
    assert is_tags_code_matched(build_subscription_data("T", "*", sub_version=1), 12345)
    # A consume-queue tags code is 8 bytes: a negative hash stored sign-extended still matches.
    neg = build_subscription_data("T", "Hello World", sub_version=1)
    assert is_tags_code_matched(neg, tags_hash("Hello World") & 0xFFFFFFFFFFFFFFFF)
    assert to_int32(2**32 + 5) == 5


def test_client_side_matching() -> None:
    """Clients re-filter by the exact tag, so a hash collision does not leak messages."""
    sub = build_subscription_data("T", "TagA || TagC", sub_version=1)
    assert is_tag_matched(sub, "TagA")
    assert not is_tag_matched(sub, "TagB")
    assert not is_tag_matched(sub, None)
    assert is_tag_matched(SubscriptionData("T"), None)
