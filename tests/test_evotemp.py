"""EvoTemp with freshness and a generator in the loop: per-question T, the tables of
``credrank bench evotemp`` and the three matched contexts."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import build_batch
from credrank.cli import app
from credrank.context.render import strip_labels
from credrank.freshness.policy import parse_undated
from credrank.generate.llm import parse_prompt
from credrank.index.embed import get_embedder
from credrank_bench.datasets import load_dataset
from credrank_bench.experiments.bench import prepare
from credrank_bench.experiments.evotemp import (
    PerQueryFreshness,
    context_prompts,
    evaluation_times,
    own_pools,
)
from test_bench_json import _slice_json_list


@pytest.fixture(scope="module")
def evotemp_slice(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = shared_data / "cag" / "EvoTemp.json"
    if not src.is_file():
        pytest.skip(f"real data not available: expected {src}")
    return _slice_json_list(src, tmp_path_factory.mktemp("evotemp") / "evotemp.json", 25)


def test_per_query_now_reads_the_question_date():
    times = {"q1": datetime(2024, 1, 1, tzinfo=UTC), "q2": None}
    stage = PerQueryFreshness(365.0, times, parse_undated("neutral"))
    batch = build_batch([0.5, 0.4], published_at=["2023-01-01", "2024-01-01"])
    out = stage(batch.with_info(query_id="q1"))
    # 365 days before T: 2^−1; at T: 1
    assert out.factors["freshness"].tolist() == pytest.approx([0.5, 1.0])
    assert out.info["freshness"]["now"].startswith("2024-01-01")
    none = stage(batch.with_info(query_id="q2"))  # no T: no decay, declared
    assert none.factors["freshness"].tolist() == [1.0, 1.0]


def test_bench_tables_and_matched_contexts(evotemp_slice: Path):
    evalset = load_dataset("evotemp", evotemp_slice)
    times = evaluation_times(evalset)
    assert all(times[q] is not None for q, _ in evalset.queries)
    prepared = prepare(evalset, get_embedder("hashing"))
    pools = own_pools(evalset, prepared.index, prepared.query_vectors)
    assert all(set(b.doc_ids) == set(evalset.pools[q]) for q, b in pools.items())
    prompts = context_prompts(evalset, pools, top_k=5)
    for qid in pools:
        q_plain, plain = parse_prompt(prompts["plain context"][qid])
        q_cag, cag = parse_prompt(prompts["CAG-annotated context"][qid])
        assert q_plain == q_cag == pools[qid].query
        assert [strip_labels(p) for p in cag] == [" ".join(p.split()) for p in plain]
        assert any(label in prompts["CAG-annotated context"][qid]
                   for label in ("High credibility", "Middle credibility", "Low credibility"))
        assert len(plain) == min(5, len(pools[qid]))

    res = CliRunner().invoke(app, ["bench", "evotemp", "--path", str(evotemp_slice),
                                   "--embedder", "hashing", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    fresh = doc["tables"]["freshness"]
    names = [r["system"] for r in fresh["rows"]]
    assert names[0] == "similarity only" and len(names) == 1 + 5 + 2
    assert all(r["reads_labels"] is False for r in fresh["rows"])
    gen = doc["tables"]["generator_in_the_loop"]
    assert [r["system"] for r in gen["rows"]] == [
        "plain context", "CAG-annotated context",
        "credibility-aware ranking + annotated context"]
    for table in (fresh, gen):
        for row in table["rows"]:
            for cell in row["metrics"].values():
                assert cell["mean"] is None or math.isfinite(cell["mean"])
    assert doc["details"]["generator_in_the_loop"]["questions_scored"] > 0
