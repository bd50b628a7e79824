"""Write the demo's rankings through the Qdrant Edge index as TREC runs (see README.md).

Run at commit d0f2586 (the layout before issue 8) as
``PYTHONPATH=src python tests/data/stored_runs/make_demo_runs.py OUT_DIR hashing|minilm``;
the imports below are that commit's module paths and API (``credrank.search.SearchSettings``
and ``build_pipeline`` were removed by issue 35: the pipeline spec is the only configuration).
Today's code makes the same runs in ``demo_runs`` of ``tests/test_stored_runs.py`` (a spec of
the same options, ``credrank.pipeline.compile.compile_spec``); this script is kept as it ran.
"""

# ruff: noqa: I001  (the imports name modules of commit d0f2586, which ruff cannot place)
import sys
import tempfile
from pathlib import Path

from credrank.corpus import iter_documents, read_queries
from credrank.demo import SYSTEMS, demo_dir
from credrank.index.build import index_documents
from credrank.index.edge import EdgeIndex
from credrank.index.embed import get_embedder
from credrank.provenance import SourceTyper
from credrank.search import SearchSettings, build_pipeline


def main(out: Path, embedder_name: str) -> None:
    emb = get_embedder(embedder_name)
    data = demo_dir()
    queries = read_queries(data / "queries.jsonl")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, EdgeIndex.open(
            Path(tmp) / "i", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(iter_documents(data / "corpus.jsonl"), idx, emb,
                        SourceTyper([data / "domains.csv"]))
        for system, priors in SYSTEMS.items():
            for pushdown in ((None,) if priors is None else (True, False)):
                settings = SearchSettings(top_k=5, priors=priors, pushdown=pushdown)
                pipe = build_pipeline(idx, emb, settings)
                tag = system.replace(" ", "-") + (
                    "" if pushdown is None else ("-pushdown" if pushdown else "-python"))
                with open(out / f"{tag}.run", "w") as f:
                    for q in queries:
                        for h in pipe.search(q.text).hits():
                            f.write(f"{q.id} Q0 {h['doc_id']} {h['rank']} {h['score']:.6f} "
                                    f"{tag}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
