"""Every stage has a declared price (issue 37, N1): the catalog's :class:`Cost`, read by the
service's budget and heavy gate; embedding priced by every chunk (N3)."""

from __future__ import annotations

import dataclasses

import pytest

from credrank.pipeline.catalog import CATALOG, Cost, Entry
from credrank.pipeline.spec import PipelineSpec
from credrank.serve.cost import chunks, embed_units, estimate, largest_pool, pool_caps


def test_every_catalog_stage_declares_a_price_that_grows_with_the_pool() -> None:
    for name, item in CATALOG.items():
        assert isinstance(item.cost, Cost), name
        assert item.cost.units(100, 10) > 0 or item.cost.embeds > 0, name
        assert item.cost.units(1_000, 10, passage=1.0) > item.cost.units(100, 10, passage=1.0)
        assert item.cost.formula(), name
    # a catalog line without a price is not an Entry: it fails where it is written
    with pytest.raises(TypeError):
        Entry("new", "x:Y", "signal", 30, "a new stage")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="cost: expected a Cost"):
        Entry("new", "x:Y", "signal", 30, "a new stage", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no stage is free"):
        Cost()
    with pytest.raises(ValueError, match="coefficients >= 0"):
        Cost(n=-1.0)
    assert "cost" in {f.name for f in dataclasses.fields(Entry)}


def test_super_linear_stages_are_priced_and_capped() -> None:
    planted = CATALOG["planted"].cost
    assert planted.units(10_000, 10) > 2_000  # the N1 request is over the default budget
    assert planted.units(30, 10) < 10
    rag = planted.units(1_000, 10, {"mode": "ragdefender"})
    assert rag > planted.units(1_000, 10, {"mode": "planted"})
    assert pool_caps([("planted", {"mode": "planted"})]) == [("planted", 5_000)]
    assert pool_caps([("planted", {"mode": "grada"})]) == [("planted", 3_000)]
    assert pool_caps([("planted", {"mode": "ragdefender"})]) == [("planted", 1_000)]
    smoothing = CATALOG["smoothing"].cost
    assert smoothing.units(1_000, 10, {"m": 10**6}) == pytest.approx(
        1e-4 * 1_000**2 + 1e-5 * 1_000 * 1_000)  # m beyond the pool costs as m = N
    assert smoothing.max_pool == 3_000


def test_estimate_prices_every_stage_of_a_spec() -> None:
    spec = PipelineSpec.from_dict({"fetch_k": 10_000, "stages": ["prior", "planted"]})
    stages = [(s.name, dict(s.params)) for s in spec.stages]
    got = estimate(pool=10_000, top_k=10, stages=stages)
    assert [k.split(" ")[0] for k in got.parts] == [s.name for s in spec.stages]
    assert got.costliest == "planted"
    fits = largest_pool(2_000.0, pool=10_000, top_k=10, stages=stages)
    assert estimate(pool=fits, top_k=10, stages=stages).total <= 2_000
    assert estimate(pool=fits + 1, top_k=10, stages=stages).total > 2_000


def test_embedding_is_priced_by_every_chunk() -> None:
    assert [chunks(c) for c in (1, 1_000, 1_001, 1_900, 1_901, 10_000)] == [1, 1, 2, 2, 3, 11]
    assert embed_units("minilm", [1_000]) == pytest.approx(50.0)
    # 10,000 characters: 11 chunks of which 10 overlap the previous by 100 characters
    assert embed_units("minilm", [10_000]) == pytest.approx(50.0 * 11_000 / 1_000)
    assert embed_units("hashing", [500, 500]) == pytest.approx(0.1)
