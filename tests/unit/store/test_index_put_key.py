"""``IndexFile.put_key`` is ``put_keys`` of one hash, unrolled for the common record (a UNIQ_KEY and
no KEYS): the same puts give byte-identical files and the same answers, full files included."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.store.index import IndexFile

SLOTS, ENTRIES = 7, 24

puts = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**40), st.integers(0, 2**41)), max_size=30
)


@settings(max_examples=60, deadline=None)
@given(puts)
def test_put_key_is_put_keys_of_one_hash(ops: list[tuple[int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        one = IndexFile(Path(tmp) / "one", SLOTS, ENTRIES)
        many = IndexFile(Path(tmp) / "many", SLOTS, ENTRIES)
        try:
            for h, phy, ts in ops:
                assert one.put_key(h, phy, ts) == many.put_keys([h], phy, ts)  # False once full
                assert one.index_count == many.index_count
            for h in {h for h, _, _ in ops}:
                a: list[int] = []
                b: list[int] = []
                one.select_phy_offsets(a, h, 64, 0, 2**62)
                many.select_phy_offsets(b, h, 64, 0, 2**62)
                assert a == b
        finally:
            one.close()  # writes the header
            many.close()
        assert (Path(tmp) / "one").read_bytes() == (Path(tmp) / "many").read_bytes()
