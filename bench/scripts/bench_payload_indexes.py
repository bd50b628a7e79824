"""Payload indexes by size: what the nine sized indexes cost at every open, and what they save.

For each size in ``--sizes`` (default 120, 1,000, 5,000 and 20,000 documents) it builds a Qdrant
Edge index of the demo corpus repeated (each copy its own id and URL path; the hashing
embedder: the vectors do not matter here) and measures it side by side in two states: with
the one payload index every index has (keyword on ``source_type``), and with all ten that
``credrank.index.qdrant_edge.index_payload`` makes from ``PAYLOAD_INDEX_POINTS`` points on
(keyword also on ``doc_id``, ``host``, ``registered_domain``, ``source_id``; datetime on the
five dates). Then, ``--runs`` times each (default 15; medians; the two states alternated):

* **open**: ``EdgeIndex.open`` + ``close`` of the index, wall and process CPU (ms);
* **filtered**: a dense search of 10 with ``where={"host": "www.cdc.gov"}`` (a field only
  the full set indexes);
* **doc_id read**: ``read_payloads`` of 5 ids;
* **search**: the default pipeline (priors pushed down), no filter;
* **+ freshness**: the same with freshness pushed down (it reads each candidate's dates).

It also prints the time ``index_payload`` took to make the nine on the built index. A third
state, "all ten, engine's memory", makes them with the engine's default placement
(``PAYLOAD_INDEX_MEMORY = None``: each index rebuilt in the engine's own memory at every open)
instead of credrank's (``Memory.Cached``: mapped from its files). ``--optimize`` builds the
HNSW graph after the load, as ``credrank index`` does (the rows above 10,000 documents then
describe the index a user has; without it the points stay in the plain segments of the load).
A measurement, not a test (the machine is shared): compare the rows of one run.

    python bench/scripts/bench_payload_indexes.py [--sizes 120,1000,5000,20000] [--runs 15]
        [--optimize]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents
from credrank.index import open_store, qdrant_edge
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_edge import EdgeIndex, index_payload
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options
from credrank.provenance import SourceTyper

EMB = get_embedder("hashing")
QUERY = "Does taking vitamin D supplements prevent or treat COVID-19?"
FRESHNESS = "half_life=365,now=2025-06-01T00:00:00+00:00,undated=penalty:0.5"


def write_corpus(path: Path, n_docs: int) -> None:
    """``n_docs`` documents: the demo corpus repeated, each copy with its own id and URL."""
    base = [json.loads(line) for line in (demo_dir() / "corpus.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_docs):
            doc = dict(base[i % len(base)])
            copy = i // len(base)
            doc.pop("cites", None)
            if copy:
                doc["id"] = f"{doc['id']}-{copy}"
                doc["url"] = f"{doc['url'].rstrip('/')}/copy-{copy}"
            out.write(json.dumps(doc) + "\n")


def build(where: Path, n_docs: int, optimize: bool) -> Path:
    """The index with only the ranking's payload index (the floor lifted above ``n_docs``
    while writing), optimised when ``optimize``."""
    corpus = where / "corpus.jsonl"
    write_corpus(corpus, n_docs)
    floor = qdrant_edge.PAYLOAD_INDEX_POINTS
    qdrant_edge.PAYLOAD_INDEX_POINTS = n_docs + 1
    try:
        with open_store(where / "plain", "edge", embedder=EMB.name, dim=EMB.dim,
                        create=True) as store:
            index_documents(iter_documents(corpus), store, EMB,
                            SourceTyper([demo_dir() / "domains.csv"]))
            if optimize:
                store.optimize()
    finally:
        qdrant_edge.PAYLOAD_INDEX_POINTS = floor
    return where / "plain"


def with_all_ten(plain: Path, target: Path, memory: Any) -> float:
    """A copy of ``plain`` given the nine sized indexes, placed as ``memory`` says; the ms
    ``index_payload`` took."""
    shutil.copytree(plain, target)
    kept = qdrant_edge.PAYLOAD_INDEX_MEMORY
    qdrant_edge.PAYLOAD_INDEX_MEMORY = memory
    try:
        with EdgeIndex.open(target, create=True) as index:
            return timed(lambda: index_payload(index.shard, 0))[0]
    finally:
        qdrant_edge.PAYLOAD_INDEX_MEMORY = kept


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and process CPU of one call, ms."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def measure(paths: dict[str, Path], runs: int) -> dict[str, dict[str, float]]:
    """Opens first (a shard opens once at a time), then the searches on open handles."""
    qv = EMB.embed([QUERY])[0]
    ids = ["d001", "d031", "d050", "d090", "d120"]
    where = {"host": "www.cdc.gov"}
    spec = spec_from_options(top_k=10, priors="current")
    fresh = spec_from_options(top_k=10, priors="current", freshness=FRESHNESS)
    got: dict[str, dict[str, list[float]]] = {
        name: {k: [] for k in ("open", "open_cpu", "filtered", "read", "search", "fresh")}
        for name in paths}
    for _ in range(runs):
        for name, path in paths.items():
            wall, cpu = timed(lambda p=path: EdgeIndex.open(p).close())
            got[name]["open"].append(wall)
            got[name]["open_cpu"].append(cpu)
    opened = {name: EdgeIndex.open(path) for name, path in paths.items()}
    try:
        pipes = {name: compile_spec(spec, index, EMB).pipeline for name, index in opened.items()}
        aged = {name: compile_spec(fresh, index, EMB).pipeline for name, index in opened.items()}
        for _ in range(runs):
            for name, index in opened.items():
                got[name]["filtered"].append(timed(
                    lambda i=index: i.search_dense(QUERY, qv, 10, where=where))[0])
                got[name]["read"].append(timed(lambda i=index: i.read_payloads(ids))[0])
                got[name]["search"].append(timed(lambda n=name: pipes[n].search(QUERY))[0])
                got[name]["fresh"].append(timed(lambda n=name: aged[n].search(QUERY))[0])
    finally:
        for index in opened.values():
            index.close()
    return {name: {k: statistics.median(v) for k, v in cells.items()}
            for name, cells in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="120,1000,5000,20000",
                    help="documents per index, comma-separated")
    ap.add_argument("--runs", type=int, default=15, help="measurements per cell (medians)")
    ap.add_argument("--optimize", action="store_true",
                    help="build the HNSW graph after the load (as credrank index does)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"payload indexes by size: hashing embedder, demo corpus repeated, {args.runs} runs "
          f"a cell, medians (ms); the HNSW graph {'built' if args.optimize else 'not built'}")
    print("| documents | payload indexes | open (wall) | open (CPU) | filtered search | "
          "doc_id read | search (pushdown) | + freshness | making the nine |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="credrank-payload-") as tmp:
            plain = build(Path(tmp), n, args.optimize)
            made = {"all ten": with_all_ten(plain, Path(tmp) / "cached",
                                            qdrant_edge.PAYLOAD_INDEX_MEMORY),
                    "all ten, engine's memory": with_all_ten(plain, Path(tmp) / "engine",
                                                             None)}
            rows = measure({"source_type": plain, "all ten": Path(tmp) / "cached",
                            "all ten, engine's memory": Path(tmp) / "engine"}, args.runs)
            for name, row in rows.items():
                making = f"{made[name]:.0f}" if name in made else ""
                print(f"| {n:,} | {name} | {row['open']:.1f} | {row['open_cpu']:.1f} | "
                      f"{row['filtered']:.2f} | {row['read']:.2f} | {row['search']:.2f} | "
                      f"{row['fresh']:.2f} | {making} |")


if __name__ == "__main__":
    main()
