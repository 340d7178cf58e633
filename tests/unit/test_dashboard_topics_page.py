"""The dashboard Topics page's paging and filter (pure parts of tidemq.admin.dashboard.topics_page)."""

from __future__ import annotations

import pytest

from tidemq.admin.dashboard.topics_page import PAGE_SIZE, TopicQuery, select_page

TOPICS = [f"T{i:04d}" for i in range(2500)] + ["alpha", "Beta"]


def test_pages_sorted_with_counts() -> None:
    chosen, total, page, pages = select_page(TOPICS, TopicQuery())
    assert (total, page, pages, len(chosen)) == (2502, 1, 3, PAGE_SIZE)
    assert chosen[0] == "Beta" and chosen == sorted(chosen)  # sorted as topicList sorts (by code point)
    chosen, _, page, _ = select_page(TOPICS, TopicQuery(page=99))  # past the end: the last page
    assert page == 3 and chosen[-1] == "alpha" and len(chosen) == 502


def test_filter_is_a_case_insensitive_substring() -> None:
    chosen, total, _, pages = select_page(TOPICS, TopicQuery(q="t12", size=30))
    assert total == 100 and pages == 4 and chosen[0] == "T1200" and len(chosen) == 30
    assert select_page(TOPICS, TopicQuery(q="nothing")) == ([], 0, 1, 1)


def test_parse_and_links() -> None:
    q = TopicQuery.parse({"q": " ten ", "page": "2", "size": "5000", "all": "1"})
    assert q == TopicQuery(q="ten", page=2, size=PAGE_SIZE, show_all=True)
    assert q.link(3) == "/topics?page=3&q=ten&all=1"
    assert q.link(1, keep_filter=False) == "/topics?page=1&all=1"
    assert TopicQuery.parse({}) == TopicQuery()
    for bad, message in (({"page": "x"}, "page must be a whole number"), ({"size": "0"}, "size must be 1")):
        with pytest.raises(ValueError, match=message):
            TopicQuery.parse(bad)
