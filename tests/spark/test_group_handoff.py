"""Hand-off of a group's committed offsets between streaming queries (``group_handoff.py``): the
committer's locks make ``startingOffsets=group`` wait for a stopped query's last offsets (bounded).
A query restarted at once from the group's offsets reading each message once was checked with a
real SparkSession (25 s: too long for the suite; ``test_streaming.py`` covers the committer path)."""

from __future__ import annotations

import time
from typing import Any

from tests.spark.helpers import create_topic
from tidemq.admin.client import AdminClient
from tidemq.spark.group_handoff import client_id, lock_queues, unlock_queues, wait_group_released


def test_group_offsets_are_read_once_their_writer_releases_them(cluster: Any) -> None:
    mqs = create_topic(cluster.namesrv_addr, "SparkHandoffLocks", 2)
    with AdminClient(cluster.namesrv_addr) as admin:
        writer = client_id("committer")
        assert lock_queues(admin, "spark-handoff-g", writer, mqs) == set(mqs)
        began = time.monotonic()
        assert not wait_group_released(admin, "spark-handoff-g", mqs, timeout=0.2)  # bounded
        assert time.monotonic() - began < 5
        unlock_queues(admin, "spark-handoff-g", writer, mqs)
        assert wait_group_released(admin, "spark-handoff-g", mqs, timeout=0.2)
