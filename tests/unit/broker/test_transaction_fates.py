"""The fate file of decided transactions: sparse bytes per half queue offset, reopened, deleted
below the half queue's first offset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tidemq.broker.transaction.fates import (
    COMMITTED,
    DISCARDED,
    FLUSH_EVERY,
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


def test_fates_are_written_in_runs_when_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[tuple[int, bytes]] = []
    real = os.pwrite

    def counting(fd: int, data: bytes, offset: int) -> int:
        writes.append((offset, bytes(data)))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counting)
    fates = TransactionFates(tmp_path)
    for origin in (3, 4, 5, 9, SEGMENT_ORIGINS - 1, SEGMENT_ORIGINS):
        fates.set(origin, COMMITTED)
    fates.set(4, ROLLED_BACK)
    assert writes == [] and fates.get(4) == ROLLED_BACK  # kept in memory, answered from there
    fates.sync()
    assert writes == [(3, bytes([8, 12, 8])), (9, b"\x08"), (SEGMENT_ORIGINS - 1, b"\x08"), (0, b"\x08")]
    for origin in range(FLUSH_EVERY):  # a full buffer is written at once
        fates.set(100 + origin, DISCARDED)
    assert writes[-1] == (100, bytes([DISCARDED]) * FLUSH_EVERY)
    fates.close()
    assert TransactionFates(tmp_path).get(4) == ROLLED_BACK
