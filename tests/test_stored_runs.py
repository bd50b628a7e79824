"""The restructured code ranks exactly as the code before it did.

``tests/data/stored_runs`` holds TREC runs written by commit ``d0f2586`` (see its README): the
demo through the Qdrant Edge index (Python path and pushdown) and the ``credrank bench`` systems
of the demo and of TREC 2019 HM. Each test recomputes the same runs with today's code and
requires the same documents in the same order for every query and system (and, for the demo
runs, the same final scores to the six decimals stored).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from credrank.demo import SYSTEMS
from credrank.demo_corpus import demo_dir
from credrank.documents import read_queries
from credrank.evaluate.metrics import ranked_docs
from credrank.index.embed import get_embedder
from credrank.index.qdrant_edge import EdgeIndex
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options
from credrank_bench.experiments.bench import bench_corpus

STORED = Path(__file__).parent / "data" / "stored_runs"
TOP_K = 5


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """``qid -> [(doc_id, score)]`` in the file's rank order."""
    rows: dict[str, list[tuple[int, str, float]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, doc, rank, score, _tag = line.split()
        rows.setdefault(qid, []).append((int(rank), doc, float(score)))
    return {q: [(d, s) for _, d, s in sorted(r)] for q, r in rows.items()}


def demo_runs(embedder_name: str, index_path: Path
              ) -> Iterator[tuple[str, dict[str, list[tuple[str, float]]]]]:
    """Today's demo rankings, one run per stored file name (as ``make_demo_runs.py`` does),
    searched in ``index_path``: the demo corpus indexed by today's code with its domain table
    (:func:`credrank.demo_corpus.build_demo_index`, the session fixtures
    ``demo_index_hashing`` / ``demo_index_minilm``: the same indexing ``make_demo_runs.py``
    does, built once per session for every test that searches the demo)."""
    emb = get_embedder(embedder_name)
    queries = read_queries(demo_dir() / "queries.jsonl")
    with EdgeIndex.open(index_path, embedder=emb.name, dim=emb.dim) as index:
        for system, priors in SYSTEMS.items():
            for pushdown in ((None,) if priors is None else (True, False)):
                spec = spec_from_options(top_k=TOP_K, priors="none" if priors is None else priors,
                                         pushdown=pushdown)
                pipeline = compile_spec(spec, index, emb).pipeline
                tag = system.replace(" ", "-") + (
                    "" if pushdown is None else ("-pushdown" if pushdown else "-python"))
                yield tag, {q.id: [(h["doc_id"], h["score"])
                                   for h in pipeline.search(q.text).hits()] for q in queries}


def check_demo(embedder_name: str, index_path: Path) -> None:
    folder = STORED / f"demo-edge-{embedder_name}"
    seen = 0
    for tag, run in demo_runs(embedder_name, index_path):
        stored = read_run(folder / f"{tag}.run")
        assert set(run) == set(stored), tag
        for qid, hits in run.items():
            assert [d for d, _ in hits] == [d for d, _ in stored[qid]], (tag, qid)
            # stored with 6 decimals (±5e-7) + 1e-6 for float drift across library versions
            assert [s for _, s in hits] == pytest.approx(
                [s for _, s in stored[qid]], abs=1.5e-6), (tag, qid)
        seen += 1
    assert seen == len(list(folder.glob("*.run")))


def test_demo_rankings_through_the_engine_are_unchanged(demo_index_hashing: Path) -> None:
    check_demo("hashing", demo_index_hashing)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="MiniLM needs the 'embed' extra")
def test_demo_rankings_with_minilm_are_unchanged(demo_index_minilm: Path) -> None:
    check_demo("minilm", demo_index_minilm)


def check_bench(name: str, folder: str, path: Path | None, embedder: str) -> None:
    """Every stored system run of bench ``name`` (its main systems; the experiments' sections
    are not run) equals today's run of the system whose report file name (its slug) it is."""
    result = bench_corpus(name, path, get_embedder(embedder))
    today = {_slug(system): run for system, run in result.main.runs.items()}
    stored_files = sorted((STORED / folder).glob("*.run"))
    assert stored_files
    for path in stored_files:
        assert path.stem in today, f"no system of today's {name} bench writes {path.name}"
        for qid, ranking in read_run(path).items():
            assert ranked_docs(today[path.stem][qid]) == [d for d, _ in ranking], (
                path.stem, qid)


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(filter(None, keep.split("-")))[:60]


def test_demo_bench_rankings_are_unchanged() -> None:
    check_bench("demo", "demo-hashing", None, "hashing")


def test_trec2019_hm_bench_rankings_are_unchanged(shared_data: Path) -> None:
    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    check_bench("trec2019-hm", "trec2019-hm-hashing", path, "hashing")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="MiniLM needs the 'embed' extra")
def test_trec2019_hm_bench_rankings_with_minilm_are_unchanged(shared_data: Path) -> None:
    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    check_bench("trec2019-hm", "trec2019-hm-minilm", path, "minilm")
