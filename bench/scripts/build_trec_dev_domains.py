"""Build docs/trec_dev_domains.csv: a domain table for the TREC 2019 HM dev pages, from the
page URLs alone, by rules written down here (no TREC label is read).

Input: the ``url`` column of ``trec2019_hm_dev.csv`` (the reader takes that one column by name
and nothing else: no stance, credibility, usefulness or text) and, for R6, the domain-quality
ratings of Lin et al. (2023, PNAS Nexus; ``domain_ratings.csv``, ``domain`` and ``pc1`` only).
Each URL the built-in rules leave ``unknown`` (:class:`credrank.provenance.SourceTyper`, no
table) is tested against the rules below, in order, the first match typing it. The rules were
fixed by reading the hosts that ``credrank provenance hosts --unknown`` lists:

R1 government: a health institution, the registered domain's name contains "hospital";
R2 government: a university whose domain is not under .edu, written out: ubc.ca;
R3 user_generated: a Q&A, wiki or forum subdomain (first label ask, answers, wiki, forum,
   forums or community);
R4 user_generated: a forum archive (a path under /archive/index.php, vBulletin's archive);
R5 blog: a host under a blog-hosting domain named for blogs (blogs.com), or a page under a
   path segment named blog or blogs (the key is the host and the path up to that segment);
R6 established_news: the registered domain (or a parent of the host) is rated by Lin et al.
   with pc1 >= 0.5 (the middle of their [0, 1] scale, fixed before any run).

The taxonomy has no commercial type: clinic, shop and product pages match no rule and stay
``unknown`` (they are not in the table). Usage::

    python bench/scripts/build_trec_dev_domains.py ../shared/data/trec2019_hm/trec2019_hm_dev.csv \\
        ../shared/data/domain_ratings/domain_ratings.csv --out docs/trec_dev_domains.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
import textwrap
from collections import Counter
from pathlib import Path

from credrank.provenance import SourceTyper, parse_url
from credrank.provenance.hosts import bare_host, parent_domains

UNIVERSITIES = ("ubc.ca",)
UGC_LABELS = ("ask", "answers", "wiki", "forum", "forums", "community")
BLOG_HOSTING = ("blogs.com",)
BLOG_SEGMENTS = ("blog", "blogs")
FORUM_ARCHIVE = "/archive/index.php"
NEWS_MIN_PC1 = 0.5

RULES = {
    "R1": ("government", "a health institution: the registered domain's name contains "
                         "'hospital'"),
    "R2": ("government", f"a university outside .edu, written out: {', '.join(UNIVERSITIES)}"),
    "R3": ("user_generated", "a Q&A, wiki or forum subdomain (first label "
                             f"{', '.join(UGC_LABELS)})"),
    "R4": ("user_generated", f"a forum archive: a path under {FORUM_ARCHIVE} (vBulletin)"),
    "R5": ("blog", f"a host under {', '.join(BLOG_HOSTING)}, or a page under a path segment "
                   f"named {' or '.join(BLOG_SEGMENTS)} (key: host/path to that segment)"),
    "R6": ("established_news", "the registered domain or a parent of the host is rated by Lin "
                               f"et al. (2023) with pc1 >= {NEWS_MIN_PC1}"),
}


def read_urls(path: Path) -> list[str]:
    """The ``url`` column of a CSV file, and nothing else."""
    csv.field_size_limit(sys.maxsize)
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if "url" not in header:
            raise SystemExit(f"{path}: no 'url' column in the header")
        i = header.index("url")
        return [row[i] for row in reader if row]


def read_ratings(path: Path) -> dict[str, float]:
    """``domain -> pc1`` of Lin et al.'s ratings."""
    with path.open(encoding="utf-8", newline="") as f:
        return {row["domain"].strip().lower(): float(row["pc1"]) for row in csv.DictReader(f)}


def classify(url: str, ratings: dict[str, float]) -> tuple[str, str] | None:
    """``(rule, key)`` of the first rule matching ``url``, or ``None``."""
    parsed = parse_url(url)
    if parsed.host is None:
        return None
    host, registered = parsed.host, parsed.registered_domain
    bare = bare_host(host, registered)
    chain = parent_domains(bare, registered) or [bare]
    name = registered.split(".", 1)[0] if registered else ""
    if "hospital" in name:
        return "R1", registered or bare
    for uni in UNIVERSITIES:
        if uni in chain:
            return "R2", uni
    if registered and bare != registered and bare.split(".", 1)[0] in UGC_LABELS:
        return "R3", bare
    path = parsed.path.lower()
    if path == FORUM_ARCHIVE or path.startswith(FORUM_ARCHIVE + "/"):
        return "R4", bare + FORUM_ARCHIVE
    for hosting in BLOG_HOSTING:
        if hosting in chain and bare != hosting:
            return "R5", bare
    segments = [s for s in path.split("/") if s]
    for j, segment in enumerate(segments):
        if segment in BLOG_SEGMENTS:
            return "R5", bare + "/" + "/".join(segments[:j + 1])
    for domain in chain:
        if ratings.get(domain, -1.0) >= NEWS_MIN_PC1:
            return "R6", domain
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="trec2019_hm_dev.csv (only 'url' is read)")
    parser.add_argument("ratings", type=Path, help="domain_ratings.csv (Lin et al. 2023)")
    parser.add_argument("--out", type=Path, default=Path("docs/trec_dev_domains.csv"))
    args = parser.parse_args(argv)
    urls = read_urls(args.data)
    ratings = read_ratings(args.ratings)
    typer = SourceTyper()
    unknown = [u for u in urls if typer.classify(u).source_type == "unknown"]
    keys: dict[str, str] = {}
    pages: Counter[str] = Counter()
    for url in unknown:
        hit = classify(url, ratings)
        if hit is not None:
            rule, key = hit
            if keys.setdefault(key, rule) != rule:
                raise SystemExit(f"{key}: matched by {keys[key]} and {rule}")
            pages[rule] += 1
    lines = [
        "# Domain table for the TREC 2019 HM dev pages (credrank bench trec2019-hm --table).",
        "# Built by bench/scripts/build_trec_dev_domains.py from the page URLs alone: no TREC",
        "# label (stance, credibility, usefulness) was read. It types the URLs the built-in",
        f"# rules leave unknown ({len(unknown)} of {len(urls)} pages) by these rules, the",
        "# first match winning; pages matching none stay unknown and are not listed:",
    ]
    for rule, (stype, text) in RULES.items():
        n = pages[rule]
        lines += textwrap.wrap(f"{rule} {stype}: {text} ({n} page{'' if n == 1 else 's'})",
                               width=96, initial_indent="#   ", subsequent_indent="#      ")
    lines.append("# R6 reads Lin et al. 2023 (PNAS Nexus), hauselin/domain-quality-ratings.")
    lines.append("domain,source_type")
    for rule, (stype, _text) in RULES.items():
        chosen = sorted(k for k, r in keys.items() if r == rule)
        if chosen:
            lines.append(f"# {rule}")
            lines += [f"{k},{stype}" for k in chosen]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    typed = sum(pages.values())
    print(f"{args.out}: {len(keys)} keys typing {typed} of the {len(unknown)} unknown pages "
          f"({len(urls)} pages); by rule: "
          + ", ".join(f"{r} {pages[r]}" for r in RULES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
