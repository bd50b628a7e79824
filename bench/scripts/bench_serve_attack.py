"""The ``/rerank`` coverage attack on ``credrank serve``, before and after the work budget.

The attack (issue 23): public ``POST /rerank`` with ``select: "coverage"`` over 1,000
candidates of about 1,000 characters (≈ 1 MB, no key needed), 8 requests at once. Each costs
20–30 s of CPU and over a gigabyte in the coverage MILP. For each configuration a real server
(``python -m credrank.cli serve``, demo index, hashing embedder: the cost is the selector's)
is started; a prober sends ``POST /search`` one after another (idle first, for a baseline),
the 8 attack requests go out together, and the prober goes on until every attack request has
been answered *and* the server's CPU has gone quiet (work that outlives its 504 counts). We
report the attack's answers, how long the server stayed busy, ``/search`` p50/p95 during that
window, the server's peak RSS (``VmHWM``) and its RSS afterwards.

Configurations, side by side in one run:

* **before** — ``--max-request-cost 0 --max-heavy-requests 0 --heavy-cost 1e12``: no work
  budget, no limit on heavy requests and nothing counted heavy (so no memory given back
  after heavy work), as before issue 23 (the other changes — cancellation at stage
  boundaries, the MILP's time limit capped by ``--timeout`` — stay on: the selector stage
  itself cannot be interrupted either way, and queued requests whose time is up never
  start);
* **after** — the defaults (budget 2,000 work units, 2 heavy requests at once);
* **after, largest allowed pool** — the defaults, 8 coverage requests over the largest pool
  the budget allows (281 passages of 1,000 characters: coverage 1,967 units + embedding
  28): the concurrency limit at work.

``--section priors`` measures the feedback store instead: 20 rounds of 10,000 new sources,
the file in the old full-table format (1) and in the delta format (2), the cost of opening
and resolving it uncached (what every ``/search`` with ``"priors": "feedback"`` paid before)
and cached, and ``/search`` p50/p95 with ``"priors": "feedback"`` on a live server.

    .venv/bin/python bench/scripts/bench_serve_attack.py [--candidates 1000] [--concurrency 8]
        [--timeout 30] [--section attack|priors|all] [--json]

This is a measurement, not a test: the load generator shares the machine with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench_serve import QUERY, Server
from credrank.demo_corpus import build_demo_index, demo_dir
from credrank.documents import read_corpus
from credrank.pipeline.shortcuts import HTTP_RERANK, spec_from_options
from credrank.serve.config import DEFAULT_MAX_REQUEST_COST
from credrank.serve.cost import largest_pool
from credrank.signals import feedback
from credrank.signals.feedback import FeedbackPriors

COVERAGE = {"lambda_ilad": 0.5, "lambda_coverage": 0.5}
TICKS = os.sysconf("SC_CLK_TCK")


def attack_candidates(n: int, chars: int = 1_000, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` passages of about ``chars`` characters from the demo corpus's words."""
    words = sorted({w for d in read_corpus(demo_dir() / "corpus.jsonl").documents
                    for w in d.text.lower().split() if w.isalpha()})
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        text = ""
        while len(text) < chars:
            text += " ".join(rng.choice(words, 20)) + ". "
        out.append({"id": f"a{i}", "text": text[:chars], "url": f"https://site{i % 97}.org/p"})
    return out


def proc_status(pid: int) -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` (kB) and the CPU ticks of process ``pid``."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out["cpu_ticks"] = int(fields[11]) + int(fields[12])
    return out


def ms(samples: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(samples) * 1e3, q)), 1) if samples else \
        float("nan")


async def attack(url: str, pid: int, body: bytes, concurrency: int,
                 quiet_cpu_share: float = 0.3, cap_s: float = 900) -> dict[str, Any]:
    """Send ``concurrency`` copies of ``body`` to /rerank while probing /search (module
    docstring); the window ends when all are answered and the server's CPU is quiet (less
    than ``quiet_cpu_share`` of a core over a second) or after ``cap_s``."""
    search = json.dumps({"query": QUERY, "top_k": 10}).encode()
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=cap_s,
                                 limits=httpx.Limits(max_connections=concurrency + 4)) as c:
        idle = []
        for _ in range(30):  # the baseline, before the attack
            t = time.perf_counter()
            await c.post("/search", content=search, headers=headers)
            idle.append(time.perf_counter() - t)
        start = time.perf_counter()
        sent = [asyncio.create_task(c.post("/rerank", content=body, headers=headers))
                for _ in range(concurrency)]
        answered_at: list[float] = []
        for task in sent:
            task.add_done_callback(lambda _: answered_at.append(time.perf_counter() - start))
        probes: list[float] = []
        failed = 0
        last = proc_status(pid)
        last_t = time.perf_counter()
        quiet = False
        while not (quiet and all(t.done() for t in sent)):
            if time.perf_counter() - start > cap_s:
                break
            t = time.perf_counter()
            try:
                r = await c.post("/search", content=search, headers=headers)
                failed += r.status_code != 200
            except httpx.HTTPError:
                failed += 1
            probes.append(time.perf_counter() - t)
            now = time.perf_counter()
            if now - last_t >= 1.0:
                status = proc_status(pid)
                share = (status["cpu_ticks"] - last["cpu_ticks"]) / TICKS / (now - last_t)
                quiet = share < quiet_cpu_share
                last, last_t = status, now
            else:
                await asyncio.sleep(0.05)
        answers = []
        for task in sent:
            try:
                answers.append(str(task.result().status_code) if task.done() else "pending")
            except httpx.HTTPError as exc:
                answers.append(type(exc).__name__)
    counts = {a: answers.count(a) for a in sorted(set(answers))}
    status = proc_status(pid)
    return {"answers": counts, "answered_s": round(max(answered_at, default=float("nan")), 1),
            "busy_s": round(time.perf_counter() - start, 1),
            "idle_search_p50_ms": ms(idle, 50),
            "search_p50_ms": ms(probes, 50), "search_p95_ms": ms(probes, 95),
            "search_max_ms": ms(probes, 100), "searches": len(probes), "search_errors": failed,
            "peak_rss_mb": round(status["VmHWM"] / 1024), "rss_after_mb":
                round(status["VmRSS"] / 1024)}


def section_attack(index: Path, n: int, concurrency: int, timeout: float
                   ) -> list[dict[str, Any]]:
    records = attack_candidates(n)
    body = json.dumps({"query": QUERY, "top_k": 10, "candidates": records,
                       "select": "coverage", "params": COVERAGE}).encode()
    spec = spec_from_options(door=HTTP_RERANK, top_k=10, select="coverage",
                             select_params=COVERAGE)
    fits = largest_pool(DEFAULT_MAX_REQUEST_COST, pool=n, top_k=10,
                        stages=[(s.name, dict(s.params)) for s in spec.stages],
                        embedder="hashing",
                        embed_lengths=[len(r["text"]) + 1 for r in records])
    allowed = attack_candidates(fits)
    allowed_body = json.dumps({"query": QUERY, "top_k": 10, "candidates": allowed,
                               "select": "coverage", "params": COVERAGE}).encode()
    configs = [
        ("before", ["--max-request-cost", "0", "--max-heavy-requests", "0", "--heavy-cost",
                    "1e12"], body, n),
        ("after", [], body, n),
        ("after, largest allowed pool", [], allowed_body, len(allowed)),
    ]
    rows = []
    for name, options, payload, pool in configs:
        server = Server(index, extra=["--timeout", f"{timeout:g}", *options])
        try:
            result = asyncio.run(attack(server.url, server.proc.pid, payload, concurrency))
        finally:
            server.stop()
        rows.append({"config": name, "options": " ".join(options) or "(defaults)",
                     "candidates": pool, "body_kb": round(len(payload) / 1024), **result})
        print(f"{name}: {rows[-1]}", file=sys.stderr)
    return rows


def section_priors(index: Path, rounds: int = 20, sources: int = 10_000) -> dict[str, Any]:
    """The feedback store after ``rounds`` of ``sources`` new sources (module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-priors-"))
    try:
        store = FeedbackPriors(tmp / "priors", "current")
        for r in range(rounds):
            store.update([("blog", f"site-{r}-{i}.org", i % 2 == 0) for i in range(sources)])
        v2 = (tmp / "priors" / feedback.STORE_FILE).stat().st_size
        old = tmp / "old"
        old.mkdir()
        data = json.loads((tmp / "priors" / feedback.STORE_FILE).read_text())
        data["format"] = feedback.FORMAT_V1
        data["versions"] = [{k: v for k, v in rec.items() if k != "request_id"}
                            for rec in store.history()]
        (old / feedback.STORE_FILE).write_text(json.dumps(data, indent=1))
        v1 = (old / feedback.STORE_FILE).stat().st_size

        def opened(where: Path, cached: bool) -> float:
            times = []
            for _ in range(5):
                if not cached:
                    feedback._SHARED.clear()
                t = time.perf_counter()
                FeedbackPriors(where).record()["sources"].get("x")
                times.append(time.perf_counter() - t)
            return round(float(np.median(times)) * 1e3, 2)

        result = {"rounds": rounds, "sources_per_round": sources,
                  "format1_mb": round(v1 / 2**20, 1), "format2_mb": round(v2 / 2**20, 1),
                  "open_uncached_format1_ms": opened(old, False),
                  "open_uncached_format2_ms": opened(tmp / "priors", False),
                  "open_cached_ms": opened(tmp / "priors", True)}
        server = Server(index, extra=["--priors-store", str(tmp / "priors")])
        try:
            result.update(asyncio.run(_search_with_feedback(server.url)))
        finally:
            server.stop()
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _search_with_feedback(url: str, n: int = 100) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        for priors in ("current", "feedback"):
            times = []
            for i in range(n + 5):
                t = time.perf_counter()
                r = await c.post("/search", json={"query": QUERY, "priors": priors})
                r.raise_for_status()
                if i >= 5:
                    times.append(time.perf_counter() - t)
            out[f"search_{priors}_p50_ms"] = ms(times, 50)
            out[f"search_{priors}_p95_ms"] = ms(times, 95)
    return out


def print_attack(rows: list[dict[str, Any]], n: int, concurrency: int, timeout: float) -> None:
    print(f"{concurrency} concurrent POST /rerank, select coverage (lambda_ilad 0.5, "
          f"lambda_coverage 0.5), top_k 10, passages of 1,000 characters; --timeout "
          f"{timeout:g}; /search probed one at a time (top_k 10, current priors)\n")
    print("| config | serve options | candidates | body KB | answers | all answered (s) | "
          "server busy (s) | /search idle p50 ms | /search p50 ms | /search p95 ms | "
          "/search max ms | peak RSS MB | RSS after MB |")
    print("|" + "---|" * 13)
    for r in rows:
        answers = ", ".join(f"{v}×{k}" for k, v in r["answers"].items())
        print(f"| {r['config']} | {r['options']} | {r['candidates']} | {r['body_kb']} | "
              f"{answers} | {r['answered_s']} | {r['busy_s']} | {r['idle_search_p50_ms']} | "
              f"{r['search_p50_ms']} | {r['search_p95_ms']} | {r['search_max_ms']} | "
              f"{r['peak_rss_mb']} | {r['rss_after_mb']} |")


def print_priors(p: dict[str, Any]) -> None:
    print(f"\nfeedback store after {p['rounds']} rounds of {p['sources_per_round']:,} new "
          "sources\n")
    print("| measure | format 1 (full table per version) | format 2 (deltas) |")
    print("|---|---|---|")
    print(f"| priors.json MB | {p['format1_mb']} | {p['format2_mb']} |")
    print(f"| open + resolve, uncached (ms; before: every search) | "
          f"{p['open_uncached_format1_ms']} | {p['open_uncached_format2_ms']} |")
    print(f"| open + resolve, cached (ms; after: every search) | – | {p['open_cached_ms']} |")
    print(f"\n/search p50/p95 ms on a live server: priors current "
          f"{p['search_current_p50_ms']}/{p['search_current_p95_ms']}, priors feedback "
          f"{p['search_feedback_p50_ms']}/{p['search_feedback_p95_ms']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidates", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=30.0, help="credrank serve --timeout")
    ap.add_argument("--section", choices=("attack", "priors", "all"), default="all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-attack-"))
    try:
        index = build_demo_index(tmp / "index", "hashing")
        result: dict[str, Any] = {
            "bench": "serve_attack", "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                       f"Python {platform.python_version()}"}
        if args.section in ("attack", "all"):
            result["attack"] = section_attack(index, args.candidates, args.concurrency,
                                              args.timeout)
        if args.section in ("priors", "all"):
            result["priors"] = section_priors(index)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['date']}, {result['machine']}\n")
    if "attack" in result:
        print_attack(result["attack"], args.candidates, args.concurrency, args.timeout)
    if "priors" in result:
        print_priors(result["priors"])


if __name__ == "__main__":
    main()
