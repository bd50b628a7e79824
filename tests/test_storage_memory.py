"""Where an index keeps its dense vectors and stored payload
(:func:`credrank.index.qdrant_edge.storage_memory`, the module docstring's "Storage placement").

A new index maps them from its files and reads a page when a search first needs it
(``Cold``): an open no longer reads the 2 × 32 MiB of pages the engine preallocates for a
segment. :meth:`EdgeIndex.optimize` places them by size: ``Cached`` (read into memory at every
open) from :data:`~credrank.index.qdrant_edge.CACHED_STORAGE_POINTS` points, where a served
search over ``Cold`` storage stays slower. What an open maps is read from ``/proc/self/smaps``; the
answers are the same either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import qdrant_edge as qe

from credrank.demo_corpus import build_demo_index
from credrank.index import qdrant_edge
from credrank.index.qdrant_edge import (
    CACHED_STORAGE_POINTS,
    LARGE_STORAGE_MEMORY,
    SMALL_STORAGE_MEMORY,
    EdgeIndex,
    storage_memory,
)
from demo_answers import demo_answers
from sparse_copy import copy_index

MIB = 1 << 20
#: a segment's preallocated vector chunk and payload page, each read whole by a Cached open
SEGMENT_PAGES = 2 * 32 * MIB

needs_smaps = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads the process's mappings in /proc/self/smaps")


def mapped_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` that are mapped into this process's memory (the
    ``Rss`` of their mappings in ``/proc/self/smaps``)."""
    prefix = str(folder.resolve()) + os.sep
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if fields and not fields[0].endswith(":"):  # a mapping's header: range perms … path
            inside = len(fields) == 6 and fields[5].startswith(prefix)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def answers(path: Path) -> tuple[int, list[list[tuple[str, float]]]]:
    """The bytes of ``path``'s shard an open maps, and the demo queries' answers
    (:func:`demo_answers.demo_answers`)."""
    with EdgeIndex.open(path) as index:
        return mapped_bytes(path / "shard"), demo_answers(index)


def same(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]]) -> bool:
    """The same documents in the same order, and scores equal to float32 rounding (two
    indexes of the same documents sum the engine's BM25 statistics in their own order)."""
    return ([[d for d, _ in hits] for hits in a] == [[d for d, _ in hits] for hits in b]
            and [s for hits in a for _, s in hits]
            == pytest.approx([s for hits in b for _, s in hits], rel=1e-6))


def optimize(path: Path) -> None:
    with EdgeIndex.open(path, create=True) as index:
        index.optimize()


def test_placement_by_size() -> None:
    assert storage_memory(0) is storage_memory(CACHED_STORAGE_POINTS - 1) \
        is SMALL_STORAGE_MEMORY is qe.Memory.Cold
    assert storage_memory(CACHED_STORAGE_POINTS) is LARGE_STORAGE_MEMORY is qe.Memory.Cached
    with pytest.raises(ValueError, match="points"):
        storage_memory(-1)


@needs_smaps
def test_a_new_index_maps_its_storage_on_demand(demo_index_hashing: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cold, cold_answers = answers(demo_index_hashing)
    # the control: the same index made with the placement new indexes had before (Cached)
    monkeypatch.setattr(qdrant_edge, "SMALL_STORAGE_MEMORY", qe.Memory.Cached)
    cached, cached_answers = answers(build_demo_index(tmp_path / "cached", "hashing"))
    assert cold < 16 * MIB <= SEGMENT_PAGES <= cached
    assert same(cold_answers, cached_answers)


@needs_smaps
def test_optimize_places_the_storage_by_size(demo_index_hashing: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "index"
    copy_index(demo_index_hashing, path)
    mapped, before = answers(path)
    optimize(path)  # 120 documents: far below the threshold, stays Cold
    small, after_small = answers(path)
    assert max(mapped, small) < 16 * MIB
    # the same documents past a threshold of 100 points: the optimiser rebuilds the segment
    monkeypatch.setattr(qdrant_edge, "CACHED_STORAGE_POINTS", 100)
    optimize(path)
    large, after_large = answers(path)
    assert large >= SEGMENT_PAGES
    assert same(before, after_small) and same(before, after_large)


@needs_smaps
def test_an_index_made_before_is_placed_at_its_next_optimize(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(qdrant_edge, "SMALL_STORAGE_MEMORY", qe.Memory.Cached)
        path = build_demo_index(tmp_path / "old", "hashing")
    mapped, before = answers(path)
    optimize(path)
    small, after = answers(path)
    assert small < 16 * MIB <= SEGMENT_PAGES <= mapped
    assert same(before, after)


def test_an_open_keeps_the_vectors_placement_in_the_shards_configuration(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    """The engine rewrites the shard's configuration at every load; a load that stated no
    placement wrote the dense vectors' without one (only the payload's kept), so the segments
    written after it went to the engine's default until the next optimize. Each open now
    states the shard's own (:func:`~credrank.index.qdrant_edge.stored_memory`)."""
    import json

    path = copy_index(demo_index_hashing, tmp_path / "index")
    config = path / "shard" / "edge_config.json"
    placed = json.loads(config.read_text())["payload_memory"]
    for create in (False, True):  # a reader and a writer
        with EdgeIndex.open(path, create=create):
            pass
        stated = json.loads(config.read_text())
        assert stated["vectors"]["dense"].get("memory") == placed
        assert stated["payload_memory"] == placed
    assert qdrant_edge.stored_memory(path / "shard") == getattr(qe.Memory, placed.capitalize())
    config.write_text("{not json")
    assert qdrant_edge.stored_memory(path / "shard") is None
