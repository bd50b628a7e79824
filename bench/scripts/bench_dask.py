"""Dask workers vs one process: ``credrank reliability estimate`` and ``credrank index``.

Generates (seeded) an answers file of S sources × Q questions (60% answered, reliabilities
uniform in [0.3, 0.95], every 40th source a 95% copy of the one before it) and a corpus of N
synthetic documents, then times the CLI commands as new processes with ``--workers 0`` (one
process) and ``--workers W`` (a local Dask cluster, its start-up included), checks that the
outputs are identical, and prints a table. Wall-clock on a shared machine: a measurement, not
a test.

    python bench/scripts/bench_dask.py [--sources 2000] [--questions 300] [--documents 20000]
                                    [--workers 2] [--embedder hashing] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [str(Path(sys.executable).with_name("credrank"))]


def write_answers(path: Path, sources: int, questions: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    truth = [f"a{rng.randrange(1000)}" for _ in range(questions)]
    reliability = [rng.uniform(0.3, 0.95) for _ in range(sources)]
    rows, previous = 0, {}
    with path.open("w", encoding="utf-8") as f:
        f.write("question_id,source_id,answer\n")
        for s in range(sources):
            if s % 40 == 39:  # a copier of the source before it
                row = {q: (a if rng.random() < 0.95 else "x") for q, a in previous.items()}
            else:
                row = {q: (truth[q] if rng.random() < reliability[s] else f"w{rng.randrange(4)}")
                       for q in range(questions) if rng.random() >= 0.4}
            for q, a in row.items():
                f.write(f"q{q},src{s},{a}\n")
            rows += len(row)
            previous = row
    return rows


def write_corpus(path: Path, documents: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    hosts = ["www.cdc.gov", "www.nytimes.com", "medium.com", "reddit.com", "example.org"]
    words = [f"w{i}" for i in range(2000)]
    with path.open("w", encoding="utf-8") as f:
        for i in range(documents):
            text = " ".join(rng.choices(words, k=rng.randint(20, 120)))
            f.write(json.dumps({"id": f"d{i}", "text": text,
                                "url": f"https://{rng.choice(hosts)}/p/{i}"}) + "\n")


def timed(cmd: list[str], stdout: Path) -> float:
    t0 = time.perf_counter()
    with stdout.open("w", encoding="utf-8") as out:
        subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", type=int, default=2000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--documents", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--embedder", default="hashing", choices=("hashing", "minilm"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="credrank-dask-") as tmp:
        t = Path(tmp)
        answers = t / "answers.csv"
        n_rows = write_answers(answers, args.sources, args.questions)
        outputs = {}
        for w in (0, args.workers):
            out = t / f"rel{w}.json"
            secs = timed([*CLI, "reliability", "estimate", str(answers), "--json",
                          "--collapse-copies", "--workers", str(w)], out)
            outputs[w] = out.read_text(encoding="utf-8")
            rows.append({"job": f"reliability estimate ({args.sources} sources × "
                                f"{args.questions} questions, {n_rows:,} rows)",
                         "workers": w, "seconds": round(secs, 2)})
        same_reliability = outputs[0] == outputs[args.workers]
        corpus = t / "corpus.jsonl"
        write_corpus(corpus, args.documents)
        for w in (0, args.workers):
            secs = timed([*CLI, "index", str(corpus), "--index", str(t / f"idx{w}"),
                          "--embedder", args.embedder, "--workers", str(w)], t / f"idx{w}.txt")
            rows.append({"job": f"index ({args.documents:,} documents, {args.embedder})",
                         "workers": w, "seconds": round(secs, 2)})
        same_index_report = ((t / "idx0.txt").read_text().split(";")[0]
                             == (t / f"idx{args.workers}.txt").read_text().split(";")[0])
    result = {"bench": "dask", "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "rows": rows, "reliability_json_identical": same_reliability,
              "index_report_identical": same_index_report}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print("| job | workers | wall time (s) |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['job']} | {r['workers'] or '0 (one process)'} | {r['seconds']} |")
    print(f"reliability JSON identical: {same_reliability}; index report identical: "
          f"{same_index_report}")


if __name__ == "__main__":
    main()
