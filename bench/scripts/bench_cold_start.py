"""Cold-start benchmark: a fresh ``credrank search`` process, ONNX query path against torch.

Builds (once; kept in ``--index DIR`` when given) a 2,000-document MiniLM index from the demo
corpus: its 120 documents, each repeated with varied text (sentences rotated, a numbered
variant note) and its own id, URL path and date, so no two texts are equal. Then it runs
``credrank search QUERY --index DIR --json`` as a new process ``--runs`` times (default 5) per
backend, interleaved (onnx, torch, onnx, …; one untimed warm-up run of each first so both
read the index and the model files from the page cache), with ``CREDRANK_EMBED_BACKEND=onnx``
or ``=torch``, and prints a table of wall times (median, min, max) side by side, with the
ratio of the medians. Both backends must return the same top-10 documents.

Before the searches, the start-up table (issue 26): ``python -c pass`` (the bare interpreter),
``python -c "import credrank"``, ``credrank --version``, ``credrank --help`` and ``credrank
search --help``, each ``--startup-runs`` times (default 20) interleaved, with each median's
ratio to the bare interpreter's; goal ``credrank --help`` ≤ 1.5 × ``import credrank``. The
search table has the same ratio column.

Goal (issue 15): the ONNX path at most 1.5 s. Needs the ``embed`` extra and the ONNX
artifact (``make install``, or ``python -m credrank.index.onnx_export``; ``CREDRANK_ONNX_DIR``
is honoured). The index is built by ``credrank index`` with whatever ``get_embedder("minilm")``
gives (ONNX when the artifact is there: the same vectors within 1e-5 cosine). A measurement, not
a test: the machine is shared, so compare the two rows of one run.

    python bench/scripts/bench_cold_start.py [--docs 2000] [--runs 5] [--index DIR]
        [--startup-runs 20] [--backends onnx,torch] [--startup-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout (bench/scripts/..)
DEMO = ROOT / "src" / "credrank" / "data" / "demo" / "corpus.jsonl"
QUERY = "Does taking vitamin D supplements prevent or treat COVID-19?"
GOAL_S = 1.5
HELP_GOAL = 1.5  # credrank --help ≤ HELP_GOAL × python -c "import credrank"


def credrank_command() -> list[str]:
    """The installed ``credrank`` script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("credrank")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "credrank.cli"]


def write_corpus(path: Path, n_docs: int) -> None:
    base = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_docs):
            doc = dict(base[i % len(base)])
            copy = i // len(base)
            if copy:
                sentences = [s for s in doc["text"].split(". ") if s]
                k = copy % len(sentences)
                doc["text"] = (". ".join(sentences[k:] + sentences[:k])
                               + f" (variant {copy} of this report.)")
                doc["url"] = f"{doc['url'].rstrip('/')}/v{copy}"
                doc["title"] = f"{doc.get('title', '')} ({copy})"
            doc["id"] = f"{doc['id']}-{copy:03d}"
            out.write(json.dumps(doc) + "\n")


def build_index(index: Path, n_docs: int) -> None:
    if (index / "manifest.json").is_file():
        print(f"index: reusing {index}", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(corpus, n_docs)
        print(f"index: building {n_docs} MiniLM documents in {index} …", file=sys.stderr)
        t0 = time.perf_counter()
        subprocess.run([*credrank_command(), "index", str(corpus), "--index", str(index),
                        "--embedder", "minilm"], check=True, stdout=subprocess.DEVNULL)
        print(f"index: built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def cold_search(index: Path, backend: str) -> tuple[float, list[str]]:
    env = dict(os.environ, CREDRANK_EMBED_BACKEND=backend)
    t0 = time.perf_counter()
    proc = subprocess.run([*credrank_command(), "search", QUERY, "--index", str(index),
                           "--json"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"credrank search ({backend}) failed:\n{proc.stderr}")
    hits = json.loads(proc.stdout)["hits"]
    return wall, [h["doc_id"] for h in hits]


def timed(command: list[str], cwd: str | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall


def startup(runs: int) -> float:
    """The start-up table; returns the bare interpreter's median (the ratio's unit)."""
    cli = credrank_command()
    rows = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import credrank"': [sys.executable, "-c", "import credrank"],
        "credrank --version": [*cli, "--version"],
        "credrank --help": [*cli, "--help"],
        "credrank search --help": [*cli, "search", "--help"],
        # typer's path (a terminal narrower than the static text): what it cost before
        "search --help (typer)": ["env", "COLUMNS=79", *cli, "search", "--help"],
    }
    # in an empty folder: a pyproject.toml that names credrank (this checkout's) may hold
    # defaults, so typer would answer every command's --help there (credrank.cli.static_help)
    cwd = tempfile.mkdtemp(prefix="bench-startup-")
    for command in rows.values():  # warm-up: page cache
        timed(command, cwd)
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(runs):
        for name, command in rows.items():
            times[name].append(timed(command, cwd))
    shutil.rmtree(cwd, ignore_errors=True)
    bare = statistics.median(times["python -c pass"])
    print(f"\nstart-up, {runs} runs each, interleaved (wall ms per process; "
          f"ratio = median / median of python -c pass)\n")
    print(f"{'command':<30} {'median':>8} {'min':>8} {'max':>8} {'ratio':>7}")
    for name, t in times.items():
        med = statistics.median(t)
        print(f"{name:<30} {1e3 * med:8.1f} {1e3 * min(t):8.1f} {1e3 * max(t):8.1f} "
              f"{med / bare:6.2f}×")
    m_help = statistics.median(times["credrank --help"])
    m_import = statistics.median(times['python -c "import credrank"'])
    print(f"\ncredrank --help / import credrank (medians): {m_help / m_import:.2f}×; goal ≤ "
          f"{HELP_GOAL}×: {'met' if m_help <= HELP_GOAL * m_import else 'NOT met'}")
    m_search = statistics.median(times["credrank search --help"])
    print(f"credrank search --help / import credrank (medians): {m_search / m_import:.2f}×; "
          f"goal ≤ {HELP_GOAL}× (issue 38): "
          f"{'met' if m_search <= HELP_GOAL * m_import else 'NOT met'}")
    return bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--index", type=Path, default=None,
                        help="index folder (built there when empty; kept)")
    parser.add_argument("--backends", default="onnx,torch")
    parser.add_argument("--startup-runs", type=int, default=20)
    parser.add_argument("--startup-only", action="store_true",
                        help="the start-up table alone (no index, no search)")
    args = parser.parse_args()
    bare = startup(args.startup_runs)
    if args.startup_only:
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    tmp = None
    if args.index is None:
        tmp = tempfile.mkdtemp(prefix="credrank-cold-")
        index = Path(tmp) / "index"
    else:
        index = args.index
    try:
        build_index(index, args.docs)
        times: dict[str, list[float]] = {b: [] for b in backends}
        tops: dict[str, list[str]] = {}
        for b in backends:  # warm-up: page cache for the index and the model files
            tops[b] = cold_search(index, b)[1]
        for _ in range(args.runs):
            for b in backends:
                wall, _ids = cold_search(index, b)
                times[b].append(wall)
        print(f"\ncold `credrank search` on a {args.docs:,}-document MiniLM index, "
              f"{args.runs} runs per backend, interleaved (wall seconds per process)\n")
        print(f"{'backend':<8} {'median':>8} {'min':>8} {'max':>8} {'ratio':>7}  runs "
              "(ratio: to python -c pass)")
        for b in backends:
            t = times[b]
            print(f"{b:<8} {statistics.median(t):8.2f} {min(t):8.2f} {max(t):8.2f} "
                  f"{statistics.median(t) / bare:6.0f}×  " + " ".join(f"{x:.2f}" for x in t))
        if "onnx" in times and "torch" in times:
            m_onnx, m_torch = statistics.median(times["onnx"]), statistics.median(times["torch"])
            print(f"\ntorch / onnx (medians): {m_torch / m_onnx:.2f}×; goal onnx ≤ {GOAL_S} s: "
                  f"{'met' if m_onnx <= GOAL_S else 'NOT met'} ({m_onnx:.2f} s)")
            same = tops["onnx"] == tops["torch"]
            print(f"same top-{len(tops['onnx'])} documents from both backends: {same}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
