"""Indexing benchmark (issue 15, part 3): the old indexing path against the new defaults.

Sections, all printed as tables from one run (ratios are what to read: the machine is shared):

* ``minilm`` — MiniLM through ``index_documents`` into a Qdrant Edge index, on the same texts
  (CrAM NQ passages from ``--cram``, in file order): the old path (write batches of 64 in file
  order, one embedder call per batch, a flush after every batch: ``batch_size=64, bucket=0,
  flush_every=1``) against the new defaults (length-sorted chunks of 1,024 texts embedded 64 at a
  time, write batches of 1,000, flush every 20,000 points) with the torch embedder and with the
  ONNX one (what ``credrank index`` uses when the artifact is there), and the torch embedder
  alone over the whole list. Also the padded-token ratio of both batchings (tokens a transformer
  computes / real tokens) and the largest difference between the stored vectors of both paths.
* ``writes`` — the write-batch sweep: hashing vectors through ``index_documents`` with write
  batches of 64 / 256 / 1,000, with a flush after every batch (the old store) and with the new
  ``flush_every``; documents/s.
* ``hnsw`` — HNSW build parameters (m, ef_construct, threads) on N hashing-vector documents:
  ``optimize`` time, recall@10 against exact search (queries: 2–6 corpus words), latency.
* ``cli`` — the same at the command line: ``credrank index --embedder hashing --no-optimize``
  on a JSONL of N synthetic documents, cold ``credrank search`` processes (exact search), then
  ``credrank optimize`` and the same searches on the graph; wall time and each process's peak
  RSS.
* ``large`` — N hashing-vector documents (each N in its own process, for its own peak RSS):
  index time, exact search latency before the HNSW build (the index answers from the start),
  ``optimize`` time (with progress on stderr), HNSW search latency, peak RSS, size on disk.

    python bench/scripts/bench_index.py [--section all|minilm|writes|hnsw|large|cli]
        [--cram ../shared/data/cram/cram_nq_1000_reconstructed.jsonl] [--minilm-n 1000]
        [--writes-n 20000] [--hnsw-n 30000] [--hnsw m:ef:threads ...] [--large 100000 ...]
        [--cli 100000 ...] [--skip-build]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.documents.schema import Document
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import (
    BUCKET,
    EMBED_BATCH,
    WRITE_BATCH,
    index_documents,
    text_lengths,
)
from credrank.index.qdrant_edge import (
    FLUSH_EVERY,
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    EdgeIndex,
    hnsw_config,
)
from credrank.index.store import DENSE, point_id
from credrank.provenance import SourceTyper

ROOT = Path(__file__).resolve().parents[2]  # the checkout (bench/scripts/..)
CRAM = ROOT.parent / "shared" / "data" / "cram" / "cram_nq_1000_reconstructed.jsonl"
#: the old path, reachable by parameters
OLD = {"batch_size": 64, "bucket": 0, "flush_every": 1}
NEW = {"batch_size": WRITE_BATCH, "bucket": BUCKET, "flush_every": FLUSH_EVERY}
HOSTS = ("www.nejm.org", "www.cdc.gov", "www.reuters.com", "someone.blogspot.com",
         "www.reddit.com", "farm.example", "www.who.int", "www.bbc.co.uk", "medium.com",
         "www.nature.com")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for k, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) if i else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def index_run(docs: Sequence[Document], embedder: Any, where: Path, *, batch_size: int,
              bucket: int, flush_every: int) -> tuple[float, EdgeIndex]:
    """Seconds to index ``docs`` (documents → provenance → embeddings → Edge), open index."""
    idx = EdgeIndex.open(where, embedder=embedder.name, dim=embedder.dim, create=True,
                         flush_every=flush_every)
    t0 = time.perf_counter()
    report = index_documents(docs, idx, embedder, SourceTyper(), batch_size=batch_size,
                             bucket=bucket)
    idx.flush()
    seconds = time.perf_counter() - t0
    assert report.indexed == len(docs), report.summary()
    return seconds, idx


# -- MiniLM ----------------------------------------------------------------------------------
def cram_texts(path: Path, n: int) -> list[str]:
    texts: list[str] = []
    with path.open() as f:
        for line in f:
            texts += [d["text"] for d in json.loads(line)["docs"]]
            if len(texts) >= n:
                break
    if len(texts) < n:
        raise SystemExit(f"{path}: {len(texts)} passages, fewer than --minilm-n {n}")
    return texts[:n]


def padding_ratio(tokenizer: Any, texts: Sequence[str], batches: Sequence[Sequence[int]],
                  max_len: int) -> float:
    lengths = [min(len(ids), max_len) for ids in tokenizer(list(texts))["input_ids"]]
    padded = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    return padded / sum(lengths)


def bench_minilm(args: argparse.Namespace) -> None:
    from credrank.index.embed import MiniLMEmbedder, minilm_embedder

    texts = cram_texts(Path(args.cram), args.minilm_n)
    docs = [Document(id=f"p{i}", text=t) for i, t in enumerate(texts)]
    emb = MiniLMEmbedder()
    emb.embed(texts[:32])  # warm-up
    model = emb.model
    paths: list[tuple[str, str, Any, dict[str, int]]] = [
        ("old path", "torch, batch 64, file order, flush each batch", emb, OLD),
        ("new defaults, torch", f"bucket {BUCKET}, embed {EMBED_BATCH}, batch {WRITE_BATCH}",
         emb, NEW)]
    try:  # what `credrank index` runs when the ONNX artifact is there (make install makes it)
        onnx = minilm_embedder("onnx")
        onnx.embed(texts[:32])
        paths.append(("new defaults, ONNX", "as above, onnxruntime (what `credrank index` "
                      "uses)", onnx, NEW))
    except (RuntimeError, ImportError) as exc:
        print(f"  ONNX row left out: {exc}")
    file_order = [list(range(s, min(s + 64, len(texts)))) for s in range(0, len(texts), 64)]
    bucketed: list[list[int]] = []  # the batches embed_bucketed makes (sorted by tokens)
    sizes = text_lengths(emb)(texts)
    for c in range(0, len(texts), BUCKET):
        chunk = sorted(range(c, min(c + BUCKET, len(texts))), key=lambda i: -sizes[i])
        bucketed += [chunk[s:s + EMBED_BATCH] for s in range(0, len(chunk), EMBED_BATCH)]
    pad_old = padding_ratio(model.tokenizer, texts, file_order, model.max_seq_length)
    pad_new = padding_ratio(model.tokenizer, texts, bucketed, model.max_seq_length)
    rows, results = [], {}
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="credrank-bench-index-") as tmp:
        for rep in range(args.reps):
            for name, _, embedder, options in paths:
                where = Path(tmp) / f"{name}-{rep}".replace(" ", "_").replace(",", "")
                seconds, idx = index_run(docs, embedder, where, **options)
                results.setdefault(name, []).append(len(docs) / seconds)
                if rep == args.reps - 1:
                    ids = [d.id for d in docs]
                    got = {r.payload["doc_id"]: r.vector[DENSE] for r in idx.shard.retrieve(
                        [point_id(i) for i in ids], None, [DENSE])}
                    vectors[name] = np.array([got[i] for i in ids])
                idx.close()
            t0 = time.perf_counter()
            emb.embed(texts)
            results.setdefault("embedder alone", []).append(len(texts) / (time.perf_counter() - t0))
    old = float(np.median(results["old path"]))
    pads = {"old path": f"{pad_old:.2f}", "embedder alone": "-"}
    for name, what, _, _ in [*paths, ("embedder alone", "MiniLMEmbedder.embed(all texts), "
                                      "torch", None, None)]:
        rate = float(np.median(results[name]))
        pad = pads.get(name, f"{pad_new:.2f}")
        rows.append([name, what, f"{rate:.1f}", f"{rate / old:.2f}×", pad])
    table(f"MiniLM indexing, {len(texts)} CrAM passages, median of {args.reps} (texts/s)",
          ["path", "settings", "texts/s", "vs old", "padded tokens / tokens"], rows)
    for name in vectors:
        if name != "old path":
            diff = float(np.abs(vectors["old path"] - vectors[name]).max())
            print(f"  largest |stored vector difference| old path vs {name}: {diff:.2e}")


# -- synthetic hashing corpus ------------------------------------------------------------------
def synthetic_docs(n: int, seed: int = 0, start: int = 0) -> Iterator[Document]:
    """``n`` documents of 10–60 words (Zipf-like over 5,000 words) with URLs on ten hosts."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    p = 1.0 / np.arange(1, 5001)
    p /= p.sum()
    for block in range(start, start + n, 10_000):
        m = min(10_000, start + n - block)
        lengths = rng.integers(10, 61, size=m)
        words = rng.choice(len(vocab), size=(m, 60), p=p)
        for k in range(m):
            i = block + k
            yield Document(id=f"s{i}", text=" ".join(vocab[words[k, :lengths[k]]]),
                           url=f"https://{HOSTS[i % len(HOSTS)]}/page/{i}")


def bench_writes(args: argparse.Namespace) -> None:
    docs = list(synthetic_docs(args.writes_n))
    emb = HashingEmbedder()
    rates: dict[tuple[int, str], list[float]] = {}
    flushes = (("after every batch", 1), (f"every {FLUSH_EVERY:,} points", FLUSH_EVERY))
    with tempfile.TemporaryDirectory(prefix="credrank-bench-index-") as tmp:
        for rep in range(args.reps):
            for batch in (64, 256, 1000):
                for label, every in flushes:
                    seconds, idx = index_run(docs, emb, Path(tmp) / f"w{rep}-{batch}-{every}",
                                             batch_size=batch, bucket=BUCKET, flush_every=every)
                    idx.close()
                    rates.setdefault((batch, label), []).append(len(docs) / seconds)
    base = float(np.median(rates[(64, flushes[0][0])]))
    rows = [[f"{batch:,}", label, f"{np.median(r):.0f}", f"{np.median(r) / base:.2f}×"]
            for (batch, label), r in rates.items()]
    table(f"write batches, {len(docs):,} hashing-vector documents through index_documents, "
          f"median of {args.reps} (documents/s)", ["write batch", "flush", "docs/s", "vs 64"],
          rows)


def word_queries(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, 5001)
    p /= p.sum()
    return [" ".join(f"w{w}" for w in rng.choice(5000, size=int(rng.integers(2, 7)), p=p))
            for _ in range(n)]


def search_ms(idx: EdgeIndex, vectors: np.ndarray, exact: bool) -> tuple[float, list[list[str]]]:
    out, t0 = [], time.perf_counter()
    for q in vectors:
        out.append(list(idx.search_dense("", q, 10, exact=exact).doc_ids))
    return (time.perf_counter() - t0) / len(vectors) * 1e3, out


def recall(got: list[list[str]], truth: list[list[str]]) -> float:
    return float(np.mean([len(set(a) & set(b)) / max(1, len(b))
                          for a, b in zip(got, truth, strict=True)]))


def bench_hnsw(args: argparse.Namespace) -> None:
    docs = list(synthetic_docs(args.hnsw_n))
    emb = HashingEmbedder()
    queries = emb.embed(word_queries(100))
    configs = [tuple(int(x) for x in c.split(":")) for c in args.hnsw]
    times: dict[tuple[int, ...], list[float]] = {}
    stats: dict[tuple[int, ...], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="credrank-bench-index-") as tmp:
        for rep in range(args.reps):
            for cfg in configs:
                m, ef, threads = cfg
                where = Path(tmp) / f"h{rep}-{m}-{ef}-{threads}"
                idx = EdgeIndex.open(where, embedder=emb.name, dim=emb.dim, create=True,
                                     hnsw=hnsw_config(m, ef, threads))
                index_documents(docs, idx, emb, SourceTyper())
                t0 = time.perf_counter()
                idx.optimize()
                times.setdefault(cfg, []).append(time.perf_counter() - t0)
                if rep == 0:
                    _, truth = search_ms(idx, queries, exact=True)
                    ms, got = search_ms(idx, queries, exact=False)
                    stats[cfg] = (recall(got, truth), ms)
                idx.close()
    default = (HNSW_M, HNSW_EF_CONSTRUCT, 0)
    base = float(np.median(times.get(default, times[configs[0]])))
    rows = [[f"m={m} ef_construct={ef} threads={t or 'all'}", f"{np.median(times[c]):.1f}",
             f"{np.median(times[c]) / base:.2f}×", f"{stats[c][0]:.3f}", f"{stats[c][1]:.2f}"]
            for c in configs for m, ef, t in [c]]
    table(f"HNSW build, {len(docs):,} hashing-vector documents, median of {args.reps}",
          ["parameters", "optimize s", "vs default", "recall@10", "query ms"], rows)


def large_one(n: int, build: bool = True) -> dict[str, Any]:
    """One large-N run in this process: index, exact search, optimise, HNSW search (without
    ``build``: index and exact search only, what ``credrank index --no-optimize`` leaves)."""
    emb = HashingEmbedder()
    queries = emb.embed(word_queries(50))
    out: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(prefix="credrank-bench-index-",
                                     dir=Path(tempfile.gettempdir())) as tmp:
        where = Path(tmp) / "large"
        idx = EdgeIndex.open(where, embedder=emb.name, dim=emb.dim, create=True)
        last = [time.perf_counter()]
        done = [0]

        def tick(k: int) -> None:
            done[0] += k
            if time.perf_counter() - last[0] > 30:
                last[0] = time.perf_counter()
                print(f"  indexed {done[0]:,}/{n:,}", file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        report = index_documents(synthetic_docs(n), idx, emb, SourceTyper(), on_batch=tick)
        idx.flush()
        out["index_s"] = time.perf_counter() - t0
        assert report.indexed == n
        out["rss_after_index_mb"] = peak_rss_mb()
        out["exact_ms"], truth = search_ms(idx, queries, exact=True)
        out["before_build_ms"], _ = search_ms(idx, queries, exact=False)

        def progress(indexed: int, total: int) -> None:
            if time.perf_counter() - last[0] > 30:
                last[0] = time.perf_counter()
                print(f"  HNSW: {indexed:,}/{total:,} vectors indexed", file=sys.stderr,
                      flush=True)

        if build:
            t0 = time.perf_counter()
            idx.optimize(on_progress=progress)
            out["optimize_s"] = time.perf_counter() - t0
            out["hnsw_ms"], got = search_ms(idx, queries, exact=False)
            out["recall"] = recall(got, truth)
        idx.close()
        out["disk_mb"] = dir_mb(where)
        t0 = time.perf_counter()
        idx = EdgeIndex.open(where)
        out["open_s"] = time.perf_counter() - t0
        search_ms(idx, queries[:5], exact=False)
        idx.close()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def bench_large(args: argparse.Namespace) -> None:
    rows = []
    for n in args.large:
        proc = subprocess.run([sys.executable, __file__, "--section", "large-one",
                               "--n", str(n), *(["--skip-build"] if args.skip_build else [])],
                              stdout=subprocess.PIPE, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        built = "optimize_s" in r
        total = r["index_s"] + r.get("optimize_s", 0.0)
        rows.append([f"{n:,}", f"{r['index_s']:.0f}", f"{n / r['index_s']:.0f}",
                     f"{r['exact_ms']:.1f}", f"{r['rss_after_index_mb']:.0f}",
                     f"{r['optimize_s']:.0f}" if built else "not run", f"{total:.0f}",
                     f"{r['hnsw_ms']:.2f}" if built else "-",
                     f"{r['recall']:.3f}" if built else "-", f"{r['open_s']:.1f}",
                     f"{r['peak_rss_mb']:.0f}", f"{r['disk_mb']:.0f}"])
    table("large collections: hashing vectors (256 d) + BM25, new defaults, one process per N",
          ["N", "index s", "docs/s", "exact ms", "peak RSS after load MB", "HNSW build s",
           "total s", "HNSW ms", "recall@10", "reopen s", "peak RSS MB", "disk MB"], rows)


def run_credrank(*argv: str) -> tuple[float, float, str]:
    """One ``credrank`` subprocess: wall seconds, its own peak RSS in MB (``wait4``'s rusage
    of that child) and its stdout; a non-zero exit raises."""
    credrank = Path(sys.executable).with_name("credrank")
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(credrank), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out)
    return seconds, usage.ru_maxrss / 1024.0, out


def cold_searches(where: Path, queries: Sequence[str]
                  ) -> tuple[float, float, list[list[str]]]:
    """Median wall seconds of one cold ``credrank search --json`` process per query, the
    largest peak RSS (MB) among them, and the top 10 ids of each."""
    times, peaks, hits = [], [], []
    for q in queries:
        seconds, rss, text = run_credrank("search", q, "--index", str(where), "--top-k", "10",
                                          "--json")
        times.append(seconds)
        peaks.append(rss)
        hits.append([h["doc_id"] for h in json.loads(text)["hits"]])
    return float(np.median(times)), max(peaks), hits


def bench_cli(args: argparse.Namespace) -> None:
    """The user's path at scale: ``credrank index FILE --embedder hashing --no-optimize`` on a
    JSONL of N synthetic documents (a subprocess: wall time and its peak RSS), cold ``credrank
    search`` processes on the result (exact search), then ``credrank optimize`` and the same
    searches on the graph (unless ``--skip-build``)."""
    queries = word_queries(5)
    rows = []
    for n in args.cli:
        with tempfile.TemporaryDirectory(prefix="credrank-bench-index-cli-") as tmp:
            corpus, where = Path(tmp) / "corpus.jsonl", Path(tmp) / "idx"
            with corpus.open("w", encoding="utf-8") as fh:
                for d in synthetic_docs(n):
                    fh.write(json.dumps({"id": d.id, "text": d.text, "url": d.url}) + "\n")
            file_mb = corpus.stat().st_size / 2**20
            index_s, index_rss, out = run_credrank("index", str(corpus), "--index", str(where),
                                                   "--embedder", "hashing", "--no-optimize")
            assert f"indexed {n}, rejected 0" in out, out
            exact_s, search_rss, exact_hits = cold_searches(where, queries)
            row = [f"{n:,}", f"{file_mb:.0f}", f"{index_s:.0f}", f"{n / index_s:.0f}",
                   f"{index_rss:.0f}", f"{exact_s:.2f}", f"{search_rss:.0f}"]
            if args.skip_build:
                row += ["not run", "-", "-", "-"]
            else:
                build_s, build_rss, _ = run_credrank("optimize", "--index", str(where))
                graph_s, _, graph_hits = cold_searches(where, queries)
                same = sum(a == b for a, b in zip(exact_hits, graph_hits, strict=True))
                row += [f"{build_s:.0f}", f"{build_rss:.0f}", f"{graph_s:.2f}",
                        f"{same}/{len(queries)}"]
            row.append(f"{dir_mb(where):.0f}")
            rows.append(row)
    table("credrank index --embedder hashing --no-optimize, then cold credrank search "
          "(median of 5 processes), then credrank optimize",
          ["N", "corpus MB", "index s", "docs/s", "index peak RSS MB", "search s (exact)",
           "search peak RSS MB", "optimize s", "optimize peak RSS MB", "search s (graph)",
           "same top 10", "index MB"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--section", default="all",
                    choices=("all", "minilm", "writes", "hnsw", "large", "large-one", "cli"))
    ap.add_argument("--cram", default=str(CRAM), help="CrAM NQ JSONL (passages for MiniLM)")
    ap.add_argument("--minilm-n", type=int, default=1000)
    ap.add_argument("--writes-n", type=int, default=20_000)
    ap.add_argument("--hnsw-n", type=int, default=30_000)
    ap.add_argument("--hnsw", nargs="+", default=["16:100:0", "16:64:0", "8:64:0", "16:100:1"],
                    help="HNSW parameters to compare, m:ef_construct:threads (0 = all cores)")
    ap.add_argument("--large", type=int, nargs="+", default=[100_000])
    ap.add_argument("--cli", type=int, nargs="+", default=[100_000],
                    help="cli: corpus sizes for `credrank index` subprocesses")
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--skip-build", action="store_true",
                    help="large: index and exact search only (no HNSW build), as `credrank "
                         "index --no-optimize` leaves it")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (median)")
    args = ap.parse_args()
    if args.section == "large-one":
        print(json.dumps(large_one(args.n, build=not args.skip_build)))
        return
    if args.section in ("all", "minilm"):
        if Path(args.cram).is_file():
            bench_minilm(args)
        else:
            print(f"\nMiniLM section skipped: {args.cram} not found (--cram PATH)")
    if args.section in ("all", "writes"):
        bench_writes(args)
    if args.section in ("all", "hnsw"):
        bench_hnsw(args)
    if args.section in ("all", "large"):
        bench_large(args)
    if args.section in ("all", "cli"):
        bench_cli(args)


if __name__ == "__main__":
    main()
