"""What a hit's snippet costs: the snippet rule's matcher, before and after, side by side.

Every hit carries a snippet by default (``text="snippet"``, :mod:`credrank.core.hittext`), and
on the service-overhead bench the snippets of ten hits were about half of a cheap in-process
search. The rule finds the words of the text that a query word starts. It was written word by
word (each word of the text lower-cased, then tested against each query word in Python); it is
now one regular-expression scan per text, the pattern built once per query. This script times
the snippets of one result list — ``snippet(text, query)`` for ``--hits`` texts and one query,
the pattern caches (credrank's and ``re``'s) emptied first, so each list pays for building its
query's pattern as a new query does — with each matcher on the same lists, alternating them
in rounds, and checks that both give the same snippet and the same highlights for every text:

* the demo corpus (120 short passages) with the demo queries — always;
* CrAM NQ passages (Wikipedia, ≈ 600 characters) with their questions and TREC 2019 HM dev
  web pages (median ≈ 5,000 characters, up to ≈ 100,000) with their topics — where
  ``--data`` holds them (``../shared/data``), else those rows say they were skipped.

Prints a Markdown table (µs per result list: median over lists of the best of ``--rounds``
rounds, and mean), or ``--json``.

    python bench/scripts/bench_snippets.py [--data ../shared/data] [--rounds 5] [--lists 300]
        [--hits 10] [--json]

A measurement, not a test: timings of one shared machine; the equality counts are exact.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core import hittext

_WORD = re.compile(r"\w+")


def word_by_word(text: str, query: str) -> list[tuple[int, int, str]]:
    """The matcher as it was (the baseline): every word of ``text``, lower-cased, tested
    against each query word in turn."""
    words = hittext.query_words(query)
    out = []
    for m in _WORD.finditer(text):
        token = m.group().lower()
        for w in words:
            if token.startswith(w):
                out.append((m.start(), m.end(), w))
                break
    return out


@contextmanager
def matcher(match: Callable[[str, str], list[tuple[int, int, str]]] | None) -> Iterator[None]:
    """``hittext.snippet`` and ``hittext.highlights`` with ``match`` as their matcher
    (``None``: the module's own)."""
    own = hittext._matches
    if match is not None:
        hittext._matches = match  # type: ignore[assignment]
    try:
        yield
    finally:
        hittext._matches = own  # type: ignore[assignment]


def lists_of(data: Path | None, n: int, hits: int, seed: int
             ) -> dict[str, list[tuple[str, list[str]]] | str]:
    """``set -> [(query, its hits' texts)]`` (or the reason the set was skipped): ``n`` lists
    of ``hits`` texts drawn at random (the demo: every demo query with ``hits`` demo texts)."""
    from credrank.demo_corpus import demo_dir
    from credrank_bench.datasets import load_dataset

    rng = random.Random(seed)
    demo = [json.loads(line)["text"] for line in
            (demo_dir() / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [json.loads(line)["text"] for line in
               (demo_dir() / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    out: dict[str, list[tuple[str, list[str]]] | str] = {
        "demo corpus": [(q, rng.sample(demo, min(hits, len(demo)))) for q in queries]}
    for name, rel in (("cram-nq", "cram/cram_nq_1000_reconstructed.jsonl"),
                      ("trec2019-hm", "trec2019_hm/trec2019_hm_dev.csv")):
        path = None if data is None else data / rel
        if path is None or not path.exists():
            out[name] = f"skipped: {path or rel} not found (--data)"
            continue
        ev = load_dataset(name, path)
        texts = [d.text for d in ev.documents]
        asked = [q for _, q in ev.queries]
        out[name] = [(rng.choice(asked), rng.sample(texts, min(hits, len(texts))))
                     for _ in range(n)]
    return out


def time_lists(lists: Sequence[tuple[str, list[str]]], rounds: int,
               systems: dict[str, Any]) -> dict[str, np.ndarray]:
    """``system -> µs per result list`` (its pattern built afresh), the best of ``rounds``
    (rounds alternate the systems)."""
    best = {name: np.full(len(lists), np.inf) for name in systems}
    for _ in range(rounds):
        for name, match in systems.items():
            with matcher(match):
                for i, (query, texts) in enumerate(lists):
                    hittext._word_matcher.cache_clear()
                    re.purge()  # and re's own cache of compiled patterns
                    start = time.perf_counter()
                    for text in texts:
                        hittext.snippet(text, query)
                    best[name][i] = min(best[name][i], time.perf_counter() - start)
    return {name: v * 1e6 for name, v in best.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lists", type=int, default=300,
                    help="result lists drawn from each shared data set")
    ap.add_argument("--hits", type=int, default=10, help="texts per result list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if min(args.rounds, args.lists, args.hits) < 1:
        ap.error("--rounds, --lists and --hits: expected integers >= 1")
    systems = {"word by word (before)": word_by_word, "one pattern per query (now)": None}
    rows: list[dict[str, Any]] = []
    for name, lists in lists_of(args.data, args.lists, args.hits, args.seed).items():
        if isinstance(lists, str):
            rows.append({"set": name, "skipped": lists})
            print(f"{name}: {lists}", file=sys.stderr)
            continue
        differ = texts = 0
        for query, hit_texts in lists:
            for text in hit_texts:
                texts += 1
                with matcher(word_by_word):
                    before = (hittext.snippet(text, query), hittext.highlights(text, query))
                if before != (hittext.snippet(text, query), hittext.highlights(text, query)):
                    differ += 1
        micros = time_lists(lists, args.rounds, systems)
        chars = np.array([len(text) for _, hit_texts in lists for text in hit_texts])
        base = float(np.median(micros["word by word (before)"]))
        for system, us in micros.items():
            rows.append({"set": name, "system": system, "lists": len(lists),
                         "texts": texts, "median_chars": int(np.median(chars)),
                         "median_us_per_list": round(float(np.median(us)), 1),
                         "mean_us_per_list": round(float(us.mean()), 1),
                         "speedup_median": round(base / float(np.median(us)), 2),
                         "texts_differing": differ})
    if args.json:
        print(json.dumps({"bench": "snippets", "rounds": args.rounds, "hits": args.hits,
                          "rows": rows}, indent=1))
        return
    print(f"| set | matcher | lists of {args.hits} hits | median characters of a text | "
          "median µs per list | mean µs per list | speed-up (median) | texts whose snippet "
          "or highlights differ |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['set']} | {r['skipped']} | | | | | | |")
            continue
        print(f"| {r['set']} | {r['system']} | {r['lists']} | {r['median_chars']:,} | "
              f"{r['median_us_per_list']:,} | {r['mean_us_per_list']:,} | "
              f"{r['speedup_median']}× | {r['texts_differing']} of {r['texts']} |")


if __name__ == "__main__":
    main()
