"""``tidemq.cli.freeze_startup_heap``: what a server made before it is ready leaves the collector's scans."""

from __future__ import annotations

import gc
import itertools

from tidemq.cli import freeze_startup_heap


def test_freeze_startup_heap_takes_existing_objects_out_of_full_collections() -> None:
    class Node:
        def __init__(self) -> None:
            self.peer: Node | None = None

    made_at_startup = [Node() for _ in range(1000)]
    for a, b in itertools.pairwise(made_at_startup):
        a.peer = b
    try:
        freeze_startup_heap()
        scanned = {id(o) for o in gc.get_objects()}  # what a full collection now looks at
        assert gc.get_freeze_count() > len(made_at_startup)
        assert not any(id(n) in scanned for n in made_at_startup)
        made_after = [Node() for _ in range(10)]
        scanned = {id(o) for o in gc.get_objects()}
        assert all(id(n) in scanned for n in made_after)  # new objects are collected as usual
        assert made_at_startup[0].peer is made_at_startup[1]  # frozen objects stay alive and usable
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
