"""Fuzz counts for the docs (issues 9 and 23): the generators of the fuzz tests, larger budgets.

Runs, for a fixed seed and outside pytest, the same generators and checks as
``tests/test_fuzz.py`` (corpus loaders, the engine round trip, the URL typer) and
``tests/test_fuzz_formats.py`` (every other structured file credrank reads), counting failures
instead of stopping at the first, plus:

* **the command line**: a sample of the refused inputs of each format is given to the real
  ``credrank`` command that reads it (a fresh process, the default install: ONNX MiniLM index,
  Qdrant Edge); each must end with exit 2, ``error:`` on stderr, no traceback and no native
  abort; and the three reproductions of issue 23 (``search --priors nosuch``, ``--select mmr``
  without its parameter, ``--select coverage`` without its parameters) are each run
  ``--cli-repeats`` times;
* **the service** (``bench/scripts/fuzz_service.py``): schemathesis against a real server with the
  ``not_a_server_error`` and response-schema checks;
* concurrent-writer trials: two ``credrank index`` processes started together on one fresh
  directory; the directory lock must refuse one of them with exit 2, and the index must then
  reopen with every document.

Prints Markdown tables.

    .venv/bin/python bench/scripts/fuzz_report.py [--loaders 2000] [--engine 300] [--urls 5000]
        [--formats 300] [--cli-sample 10] [--cli-repeats 20] [--service 100]
        [--writers 20] [--seed 20261201]

This is a measurement, not a test: the numbers are counts of inputs, not timings.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]  # the checkout (bench/scripts/..)


def _load_test_module(name: str) -> Any:
    """A module of tests/ (which imports its neighbours by their bare names)."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location(f"credrank_{name}",
                                                  ROOT / "tests" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load_fuzz() -> Any:
    return _load_test_module("test_fuzz")


class Tally:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tried = self.crashes = self.drops = self.wrong_types = self.other = 0
        self.records = self.accepted = self.rejected = 0
        self.examples: list[str] = []
        self.seconds = 0.0

    def add(self, out: Any, *, wrong_type: bool = False) -> None:
        self.tried += 1
        self.records += out.records
        self.accepted += out.accepted
        self.rejected += out.rejected
        self.crashes += out.crash is not None
        self.drops += out.silent_drops
        if out.problems:
            if wrong_type:
                self.wrong_types += 1
            else:
                self.other += 1
        for text in ([out.crash] if out.crash else []) + out.problems:
            if len(self.examples) < 3:
                self.examples.append(text[:300])


def run(tally: Tally, strategy: st.SearchStrategy[Any], budget: int, the_seed: int,
        check: Callable[[Any], None]) -> None:
    @seed(the_seed)
    @settings(max_examples=budget, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def go(value: Any) -> None:
        check(value)

    start = time.perf_counter()
    go()
    tally.seconds = time.perf_counter() - start


def writer_trial(corpus: Path, n_docs: int, cli: list[str]) -> tuple[str, str]:
    """Two ``credrank index`` runs started together on one fresh directory.

    Returns (outcome, detail): outcome ``refused`` (exit codes {0, 2}), ``sequential`` (both 0:
    no overlap), or ``bad`` (anything else); detail says whether the index reopened whole.
    """
    from credrank.index import open_store

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "index"
        args = [*cli, "index", str(corpus), "--index", str(where), "--embedder", "hashing"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env) for _ in range(2)]
        results = [p.communicate(timeout=300) for p in procs]
        codes = sorted(p.returncode for p in procs)
        if codes == [0, 2]:
            outcome = "refused"
        elif codes == [0, 0]:
            outcome = "sequential"
        else:
            outcome = "bad"
        try:
            store = open_store(where)
            try:
                n = len(store)
                found = store.existing_hashes([f"d{i:05d}" for i in range(n_docs)])
            finally:
                store.close()
            whole = n == n_docs and len(found) == n_docs
            detail = "whole" if whole else f"corrupted: {n} points, {len(found)} found"
        except Exception as e:  # a load failure is what is counted
            detail = f"corrupted: {type(e).__name__}: {e}"
        if outcome == "bad":
            detail += f" (exit codes {codes}: " + " | ".join(
                r[1].decode(errors="replace").strip()[-200:] for r in results) + ")"
        return outcome, detail


@dataclass
class FormatTally:
    """Counts of one format's generated inputs (tests/test_fuzz_formats.py outcomes)."""

    name: str
    tried: int = 0
    accepted: int = 0
    refused: int = 0
    crashes: int = 0
    memory: int = 0
    unnamed: int = 0
    slowest: float = 0.0
    examples: list[str] = field(default_factory=list)
    refused_inputs: list[bytes] = field(default_factory=list)

    def add(self, out: Any, data: bytes, keep: int) -> None:
        self.tried += 1
        self.accepted += out.accepted
        self.refused += out.refused
        self.crashes += out.crash is not None
        self.memory += out.memory
        self.unnamed += out.unnamed is not None
        self.slowest = max(self.slowest, out.seconds)
        for text in out.failures():
            if len(self.examples) < 3:
                self.examples.append(text[:300])
        if out.refused and len(self.refused_inputs) < keep:
            self.refused_inputs.append(data)


@dataclass
class CliTally:
    """Exit codes of hostile inputs given to the real ``credrank`` command."""

    name: str
    runs: int = 0
    clean: int = 0          # exit 2, `error:` on stderr, no traceback, no abort
    tracebacks: int = 0
    aborts: int = 0         # exit 134 / "terminate called" (a native abort on the way out)
    other: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.runs += 1
        err = proc.stderr
        if proc.returncode in (134, -6) or "terminate called" in err:
            self.aborts += 1
        elif "Traceback" in err:
            self.tracebacks += 1
        elif proc.returncode == 2 and "error:" in err:
            self.clean += 1
        else:
            self.other += 1
        if proc.returncode != 2 or "Traceback" in err or "error:" not in err:
            if len(self.examples) < 3:
                self.examples.append(f"exit {proc.returncode}: {err.strip()[-300:]}")


def cli_workdir(where: Path) -> None:
    """``where``: a 30-document index of the default install (``idx``), its corpus
    (``small.jsonl``) and a feedback store (``store``)."""
    demo = ROOT / "src" / "credrank" / "data" / "demo" / "corpus.jsonl"
    lines = demo.read_text(encoding="utf-8").splitlines()[:30]
    (where / "small.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for args in (["index", "small.jsonl", "--index", "idx"], ["priors", "init", "store"]):
        done = run_cli(where, args)
        if done.returncode != 0:
            raise RuntimeError(f"credrank {' '.join(args)}: {done.stderr[-2000:]}")


def run_cli(where: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """``credrank *args`` in ``where`` as the tests run it (tests/cli_process.py: a fresh
    process on the default install)."""
    return _cli_process().run_cli(*args, cwd=where, timeout=600)


@functools.cache
def _cli_process() -> Any:
    return _load_test_module("cli_process")


def fuzz_formats(budget: int, keep: int, seed: int) -> tuple[list[FormatTally], Any]:
    """Every format of tests/test_fuzz_formats.py, ``budget`` generated inputs each."""
    ff = _load_test_module("test_fuzz_formats")
    tallies = []
    for fmt in ff.FORMATS:
        tally = FormatTally(fmt.name)

        def check(data: bytes, fmt: Any = fmt, tally: FormatTally = tally) -> None:
            tally.add(ff.check_format(fmt, data), data, keep)

        run(tally, ff.hostile_inputs(fmt), budget, seed, check)  # type: ignore[arg-type]
        tallies.append(tally)
    return tallies, ff


def fuzz_cli(tallies: list[FormatTally], ff: Any, where: Path) -> list[CliTally]:
    """The kept refused inputs of each format through the ``credrank`` command reading it."""
    out = []
    for fmt, tally in zip(ff.FORMATS, tallies, strict=True):
        if not fmt.cli:
            continue
        cli = CliTally(fmt.name)
        for n, data in enumerate(tally.refused_inputs):
            path = where / f"hostile-{len(out)}-{n}{fmt.suffix}"
            path.write_bytes(data)
            cli.add(run_cli(where, [a.replace("{file}", path.name) for a in fmt.cli]))
            path.unlink()
        out.append(cli)
    return out


REPRODUCTIONS = {
    "search --priors nosuch": ["search", "q", "--index", "idx", "--priors", "nosuch"],
    "search --select mmr (no diversity)": ["search", "q", "--index", "idx", "--select", "mmr"],
    "search --select coverage (no parameters)": ["search", "q", "--index", "idx", "--select",
                                                 "coverage"],
}


def repeat_reproductions(where: Path, repeats: int) -> list[CliTally]:
    out = []
    for name, args in REPRODUCTIONS.items():
        tally = CliTally(name)
        for _ in range(repeats):
            tally.add(run_cli(where, args))
        out.append(tally)
    return out


def print_format_tables(tallies: list[FormatTally], cli: list[CliTally],
                        repeats: list[CliTally], seconds: float, cli_seconds: float) -> None:
    print(f"\nStructured files ({len(tallies)} formats, tests/test_fuzz_formats.py generators),"
          f" {seconds:.0f} s:\n")
    print("| format | inputs tried | accepted | refused, error naming the file | tracebacks "
          "| MemoryError | error without the file | slowest input |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in tallies:
        print(f"| {t.name} | {t.tried} | {t.accepted} | {t.refused} | {t.crashes} | "
              f"{t.memory} | {t.unnamed} | {t.slowest * 1e3:.0f} ms |")
    total = [sum(getattr(t, k) for t in tallies) for k in
             ("tried", "accepted", "refused", "crashes", "memory", "unnamed")]
    print(f"| **all** | {total[0]} | {total[1]} | {total[2]} | {total[3]} | {total[4]} | "
          f"{total[5]} | {max((t.slowest for t in tallies), default=0) * 1e3:.0f} ms |")
    if cli or repeats:
        print(f"\nThe command line (`credrank` as a subprocess, ONNX MiniLM index, Qdrant Edge),"
              f" {cli_seconds:.0f} s:\n")
        print("| refused inputs of / reproduction | runs | exit 2 with `error:` | tracebacks "
              "| aborts (exit 134) | other |")
        print("|---|---:|---:|---:|---:|---:|")
        for t in [*cli, *repeats]:
            print(f"| {t.name} | {t.runs} | {t.clean} | {t.tracebacks} | {t.aborts} | "
                  f"{t.other} |")
    for t in tallies:
        for ex in t.examples:
            print(f"  {t.name}: {ex}")
    for c in [*cli, *repeats]:
        for ex in c.examples:
            print(f"  {c.name}: {ex}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loaders", type=int, default=2000, help="loader inputs (half JSONL, "
                    "half CSV)")
    ap.add_argument("--engine", type=int, default=300, help="engine round trips")
    ap.add_argument("--urls", type=int, default=5000)
    ap.add_argument("--writers", type=int, default=20, help="concurrent-writer trials")
    ap.add_argument("--writer-docs", type=int, default=3000,
                    help="documents per concurrent-writer corpus")
    ap.add_argument("--formats", type=int, default=300,
                    help="generated inputs per structured-file format (0: skip)")
    ap.add_argument("--cli-sample", type=int, default=10,
                    help="refused inputs per format also run through the command line")
    ap.add_argument("--cli-repeats", type=int, default=20,
                    help="runs of each issue-23 reproduction (0: skip)")
    ap.add_argument("--service", type=int, default=100,
                    help="schemathesis examples per operation of the service (0: skip)")
    ap.add_argument("--seed", type=int, default=20261201)
    opts = ap.parse_args()
    fz = _load_fuzz()
    t0 = time.perf_counter()

    formats: list[FormatTally] = []
    cli_tallies: list[CliTally] = []
    repeats: list[CliTally] = []
    f_seconds = cli_seconds = 0.0
    if opts.formats:
        t_f = time.perf_counter()
        formats, ff = fuzz_formats(opts.formats, opts.cli_sample, opts.seed)
        f_seconds = time.perf_counter() - t_f
        if opts.cli_sample or opts.cli_repeats:
            t_c = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                cli_workdir(Path(tmp))
                cli_tallies = fuzz_cli(formats, ff, Path(tmp)) if opts.cli_sample else []
                repeats = repeat_reproductions(Path(tmp), opts.cli_repeats)
            cli_seconds = time.perf_counter() - t_c
    service: dict[str, Any] | None = None
    if opts.service:
        sys.path.insert(0, str(ROOT / "bench" / "scripts"))
        import fuzz_service  # bench/scripts/fuzz_service.py

        service = fuzz_service.run(opts.service, 1)

    jsonl, csvt = Tally("loaders: JSONL files"), Tally("loaders: CSV files")
    run(jsonl, fz.jsonl_files(), opts.loaders // 2, opts.seed,
        lambda data: jsonl.add(fz.check_loader(data, ".jsonl", fz.jsonl_records(data))))
    run(csvt, fz.csv_files(), opts.loaders - opts.loaders // 2, opts.seed,
        lambda f: csvt.add(fz.check_loader(f[0], ".csv", f[1])))
    engine = Tally("engine round trip (Edge, reopen)")
    run(engine, fz.engine_corpora(), opts.engine, opts.seed,
        lambda data: engine.add(fz.check_round_trip(data)))
    urls = Tally("URL typer")
    run(urls, fz.urls(), opts.urls, opts.seed,
        lambda u: urls.add(fz.check_url(*u), wrong_type=True))

    writers: list[tuple[str, str]] = []
    t_w = time.perf_counter()
    if opts.writers:
        cli = [str(Path(sys.executable).with_name("credrank"))]
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            with corpus.open("w") as fh:
                for i in range(opts.writer_docs):
                    fh.write(json.dumps({"id": f"d{i:05d}", "text": f"fever trial {i} word",
                                         "url": f"https://www.cdc.gov/p{i}",
                                         "x_meta": {"n": i, "tags": ["a", [i]]}}) + "\n")
            for _ in range(opts.writers):
                writers.append(writer_trial(corpus, opts.writer_docs, cli))
    w_seconds = time.perf_counter() - t_w

    print(f"seed {opts.seed}; total {time.perf_counter() - t0:.0f} s\n")
    print("| check | inputs tried | records (accepted / rejected) | crashes | silent drops "
          "| wrong provenance types | other failures | time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in (jsonl, csvt, engine, urls):
        recs = (f"{t.records} ({t.accepted} / {t.rejected})" if t is not urls else "–")
        wrong = str(t.wrong_types) if t is urls else "–"
        drops = str(t.drops) if t is not urls else "–"
        other = t.other
        print(f"| {t.name} | {t.tried} | {recs} | {t.crashes} | {drops} | {wrong} | {other} "
              f"| {t.seconds:.0f} s |")
    if writers:
        refused = sum(o == "refused" for o, _ in writers)
        seq = sum(o == "sequential" for o, _ in writers)
        bad = sum(o == "bad" for o, _ in writers)
        corrupted = sum(d.startswith("corrupted") for _, d in writers)
        print(f"\nConcurrent writers ({opts.writer_docs} documents, two `credrank index` "
              f"started together on a fresh directory), {len(writers)} trials, "
              f"{w_seconds:.0f} s:\n")
        print("| trials | one refused with exit 2 | no overlap (both exit 0) | other exit codes "
              "| index corrupted after |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {len(writers)} | {refused} | {seq} | {bad} | {corrupted} of {len(writers)} |")
        for o, d in writers:
            if o == "bad" or d != "whole":
                print(f"  {o}: {d}")
    for t in (jsonl, csvt, engine, urls):
        for ex in t.examples:
            print(f"  {t.name}: {ex}")
    if formats:
        print_format_tables(formats, cli_tallies, repeats, f_seconds, cli_seconds)
    if service is not None:
        print(f"\nThe service (bench/scripts/fuzz_service.py, checks {', '.join(service['checks'])}"
              f"):\n")
        print(fuzz_service.header())
        print(fuzz_service.row(service))
        for line in service["server_5xx_examples"]:
            print(f"  server: {line[:300]}")


if __name__ == "__main__":
    main()
