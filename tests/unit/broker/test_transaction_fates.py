"""The fate file of decided transactions: sparse bytes per half queue offset, reopened, deleted
below the half queue's first offset."""

from __future__ import annotations

from pathlib import Path

from tidemq.broker.transaction.fates import (
    COMMITTED,
    DISCARDED,
    ROLLED_BACK,
    SEGMENT_ORIGINS,
    UNKNOWN,
    TransactionFates,
    fate_name,
)


def test_fates_survive_a_reopen_and_go_with_their_half_records(tmp_path: Path) -> None:
    fates = TransactionFates(tmp_path / "fates")
    assert fates.get(5) == UNKNOWN and not (tmp_path / "fates").exists()  # nothing written yet
    fates.set(5, COMMITTED)
    fates.set(SEGMENT_ORIGINS + 3, DISCARDED)
    fates.set(-1, ROLLED_BACK)  # ignored
    assert (fates.get(5), fates.get(6), fates.get(SEGMENT_ORIGINS + 3)) == (COMMITTED, UNKNOWN, DISCARDED)
    fates.close()
    again = TransactionFates(tmp_path / "fates")
    assert (again.get(5), again.get(SEGMENT_ORIGINS + 3), again.get(-1)) == (COMMITTED, DISCARDED, UNKNOWN)
    assert again.delete_below(SEGMENT_ORIGINS) == 1  # every origin of the first file is below
    assert again.get(5) == UNKNOWN and again.get(SEGMENT_ORIGINS + 3) == DISCARDED
    assert again.delete_below(SEGMENT_ORIGINS + 4) == 0  # the second file still has later origins
    assert [fate_name(f) for f in (COMMITTED, ROLLED_BACK, DISCARDED, UNKNOWN)] == [
        "committed",
        "rolled back",
        "discarded",
        "unknown",
    ]
    again.close()
