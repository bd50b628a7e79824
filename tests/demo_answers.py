"""The demo queries' answers through an open index, for tests that compare two indexes of the
demo corpus (not a test file): the same documents in the same order, with their scores."""

from __future__ import annotations

from credrank.demo_corpus import demo_dir
from credrank.documents import read_queries
from credrank.index.embed import get_embedder
from credrank.index.qdrant_edge import EdgeIndex
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options

#: four pipelines that read the index differently: pushdown (the default), the Python path,
#: BM25, and a larger pool
PIPELINES = ({}, {"pushdown": False}, {"lexical": True}, {"fetch_k": 60})


def demo_answers(index: EdgeIndex) -> list[list[tuple[str, float]]]:
    """``(doc_id, score)`` of the top 10 of each demo query, for each of :data:`PIPELINES`
    (the hashing embedder: the demo indexes the tests build)."""
    emb = get_embedder("hashing")
    queries = [q.text for q in read_queries(demo_dir() / "queries.jsonl")]
    run = []
    for options in PIPELINES:
        pipeline = compile_spec(spec_from_options(top_k=10, **options), index, emb).pipeline
        run += [[(h["doc_id"], h["score"]) for h in pipeline.search(q).hits()]
                for q in queries]
    return run
