"""`credrank credibility fit` on the 5,000 CrAM NQ pages (issue 26, item 5): wall and CPU time.

The recipe (the same pages as the label-free bench, all 1,000 questions instead of the
development half): every passage of ``cram_nq_1000_reconstructed.jsonl`` is one record of a
JSONL corpus (``id`` = ``<qid>/d<position>``, as :func:`credrank_bench.datasets.read_cram_nq` names
them, and ``text``; no URL: these passages carry no provenance), indexed with
``credrank index --embedder minilm``; the labels file has one row per passage: ``doc_id``,
``credible`` = not ``is_misinformation``, ``topic`` = the question. So 5,000 labelled pages in
1,000 groups (10 folds of questions).

    python bench/scripts/bench_credibility_fit.py \
        --cram ../shared/data/cram/cram_nq_1000_reconstructed.jsonl --work /tmp/credfit \
        [--src PATH] [--jobs N] [--cache DIR] [--repeat 1] [--label NAME] [--out runs.jsonl]

``--work`` keeps the corpus, the labels and the index between runs (built once). Each fit runs
``credrank credibility fit labels.csv --index … --out … --json`` as a child process; its wall
time and its CPU time (user + system of the child and every process it started, from
``getrusage(RUSAGE_CHILDREN)``) are printed with the machine's load average before and after
(the machine is shared: read the CPU time beside the wall time). ``--src PATH`` runs another
source tree's ``credrank`` (``PYTHONPATH=PATH``: e.g. ``git archive HEAD`` unpacked, for the
before/after comparison) with the same interpreter. ``--cache DIR`` passes ``--cache`` (the
feature-row cache, new in this issue); a second ``--repeat`` then reads the cache.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def prepare(cram: Path, work: Path) -> tuple[Path, Path]:
    """Write ``corpus.jsonl`` and ``labels.csv`` under ``work`` (once)."""
    from credrank_bench.datasets import read_cram_nq

    corpus, labels = work / "corpus.jsonl", work / "labels.csv"
    if corpus.is_file() and labels.is_file():
        return corpus, labels
    work.mkdir(parents=True, exist_ok=True)
    ev = read_cram_nq(cram)
    docs = {d.id: d for d in ev.documents}
    with open(corpus.with_suffix(".tmp"), "w", encoding="utf-8") as f:
        for d in ev.documents:
            f.write(json.dumps({"id": d.id, "text": d.text}) + "\n")
    with open(labels.with_suffix(".tmp"), "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["doc_id", "credible", "topic"])
        for qid, ids in (ev.pools or {}).items():
            for d in ids:
                assert d in docs
                w.writerow([d, int(d not in ev.bad.get(qid, set())), qid])
    os.replace(corpus.with_suffix(".tmp"), corpus)
    os.replace(labels.with_suffix(".tmp"), labels)
    return corpus, labels


def timed(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; its wall and CPU seconds, the load average around it, its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{' '.join(cmd[:4])}…: exit {proc.returncode}")
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": [round(v, 2) for v in load0],
            "load_after": [round(v, 2) for v in os.getloadavg()], "stdout": proc.stdout}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cram", type=Path,
                    default=Path("../shared/data/cram/cram_nq_1000_reconstructed.jsonl"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/credrank-credfit"))
    ap.add_argument("--src", type=Path, default=None,
                    help="run the credrank of this source tree (PYTHONPATH)")
    ap.add_argument("--jobs", type=int, default=None, help="--jobs of the fit (default: its "
                                                           "own default)")
    ap.add_argument("--cache", type=Path, default=None, help="--cache of the fit")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--label", default="fit")
    ap.add_argument("--out", type=Path, default=None, help="append the result (JSON lines)")
    args = ap.parse_args(argv)
    corpus, labels = prepare(args.cram, args.work)
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    cli = [sys.executable, "-c", "from credrank.cli import main; main()"]
    index = args.work / "idx"
    if not index.is_dir():
        r = timed([*cli, "index", str(corpus), "--index", str(index), "--embedder", "minilm"],
                  env)
        print(f"index: {r['wall_s']} s wall, {r['cpu_s']} s CPU")
    for k in range(args.repeat):
        model = args.work / f"{args.label}-{k}.json"
        cmd = [*cli, "credibility", "fit", str(labels), "--index", str(index), "--out",
               str(model), "--json"]
        if args.jobs is not None:
            cmd += ["--jobs", str(args.jobs)]
        if args.cache is not None:
            cmd += ["--cache", str(args.cache)]
        r = timed(cmd, env)
        report = json.loads(r.pop("stdout"))
        row = {"label": args.label, "run": k, "src": str(args.src or "working tree"),
               "jobs": args.jobs, "cache": str(args.cache) if args.cache else None, **r,
               "cv_auc": report["cv_auc"], "cv_auc_interval": report["cv_auc_interval"],
               "cv": report["cv"], "n_pages": report["n_pages"],
               "n_groups": report["n_groups"], "chosen_config": report["chosen_config"],
               "fold_configs": [f["config"] for f in report["fold_configs"]]}
        print(json.dumps({k: v for k, v in row.items() if k != "fold_configs"}))
        if args.out is not None:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
