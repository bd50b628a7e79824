"""MiniLM (ONNX) batches capped by word pieces against batches of 64 texts whatever their length
(``credrank.index.onnx_embed.BATCH_TOKENS``, docs/results.md "MiniLM batches by tokens").

Each row embeds one corpus in a fresh process (so that its peak memory is its own), with the
embedder's 64-row cap and a ``batch_tokens`` cap on rows × the batch's longest text:

* ``trec`` — the TREC 2019 HM dev pages (``../shared/data/trec2019_hm``; most cut at 256
  pieces), skipped with a message when the data folder is absent;
* ``demo`` — the demo corpus's 120 passages (≈ 95 pieces), ``--repeat`` times.

``--tokens`` lists the caps; ``16384`` (64 × 256) is the 64-row batch of before, the baseline.
``--threads``: onnxruntime's intra-op threads (``0``: one per core, the default of a process
alone; ``1``: what a pytest-xdist worker or a process per core runs). Per row: the median wall
and CPU time of ``--rounds`` runs (configurations interleaved), the peak RSS of the process
(``VmHWM``, MB of 10⁶ bytes), and the largest difference of any vector component from the
baseline's. Not a test: the machine is shared; the load average is printed.

    python bench/scripts/bench_embed_batches.py [--tokens 16384,512,1024,2048,4096]
        [--threads 1,0] [--rounds 3] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_sizing import status_mb
from credrank_bench.scripting import SHARED_DATA

BASELINE = 16384  # 64 rows × 256 pieces: the token cap never binds
TREC_DEV = SHARED_DATA / "trec2019_hm" / "trec2019_hm_dev.csv"


def corpus(name: str, repeat: int) -> list[str]:
    """The texts of ``name`` (see the module docstring)."""
    if name == "trec":
        from credrank_bench.datasets import load_dataset

        return [d.text for d in load_dataset("trec2019-hm", TREC_DEV).documents]
    from credrank.demo_corpus import demo_dir

    lines = (demo_dir() / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()] * repeat


def child(name: str, tokens: int, threads: int, repeat: int, out: str) -> None:
    """One row's run, in this (fresh) process: its timings as JSON on stdout, its vectors to
    ``out`` (``.npy``)."""
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    texts = corpus(name, repeat)
    emb = OnnxMiniLMEmbedder(threads=threads, batch_tokens=tokens)
    emb.embed(texts[:8])  # the session's first run allocates its buffers
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = emb.embed(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    np.save(out, vectors)
    print(json.dumps({"texts": len(texts), "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mb": status_mb(os.getpid())["VmHWM"]}))


def run_row(name: str, tokens: int, threads: int, repeat: int, out: Path
            ) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", name, str(tokens),
                           str(threads), str(repeat), str(out)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", default=f"{BASELINE},512,1024,2048,4096")
    parser.add_argument("--threads", default="1,0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, tokens, threads, repeat, out = args.child
        child(name, int(tokens), int(threads), int(repeat), out)
        return
    caps = [int(t) for t in args.tokens.split(",")]
    if BASELINE not in caps:
        caps.insert(0, BASELINE)
    names = ["trec", "demo"] if TREC_DEV.is_file() else ["demo"]
    if "trec" not in names:
        print(f"trec skipped: {TREC_DEV} is absent", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for threads in (int(t) for t in args.threads.split(",")):
                runs: dict[int, list[dict[str, Any]]] = {cap: [] for cap in caps}
                for _ in range(args.rounds):
                    for cap in caps:
                        out = Path(tmp) / f"{name}-{threads}-{cap}.npy"
                        runs[cap].append(run_row(name, cap, threads, args.repeat, out))
                base = np.load(Path(tmp) / f"{name}-{threads}-{BASELINE}.npy")
                for cap in caps:
                    got = np.load(Path(tmp) / f"{name}-{threads}-{cap}.npy")
                    cpu = statistics.median(r["cpu_s"] for r in runs[cap])
                    rows.append({
                        "corpus": name, "texts": runs[cap][0]["texts"], "threads": threads,
                        "batch_tokens": cap, "baseline": cap == BASELINE,
                        "wall_s": statistics.median(r["wall_s"] for r in runs[cap]),
                        "cpu_s": cpu,
                        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs[cap]),
                        "max_abs_diff": float(np.abs(got - base).max())})
    for row in rows:
        base = next(r for r in rows if r["corpus"] == row["corpus"]
                    and r["threads"] == row["threads"] and r["baseline"])
        row["cpu_vs_baseline"] = row["cpu_s"] / base["cpu_s"] if base["cpu_s"] > 0 else None
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"rounds": args.rounds, "repeat": args.repeat,
                          "load_average": list(load), "rows": rows}, indent=2))
        return
    print(f"rounds {args.rounds}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'corpus':6} {'texts':>5} {'thr':>3} {'batch_tokens':>12} {'wall s':>7} "
          f"{'CPU s':>7} {'vs base':>7} {'peak MB':>8} {'max |Δ|':>8}")
    for r in rows:
        cap = f"{r['batch_tokens']}" + (" (base)" if r["baseline"] else "")
        ratio = "" if r["cpu_vs_baseline"] is None else f"{r['cpu_vs_baseline']:.2f}"
        print(f"{r['corpus']:6} {r['texts']:5d} {r['threads']:3d} {cap:>12} "
              f"{r['wall_s']:7.2f} {r['cpu_s']:7.2f} {ratio:>7} {r['peak_rss_mb']:8.0f} "
              f"{r['max_abs_diff']:8.1e}")


if __name__ == "__main__":
    main()
