"""``credrank search``: credibility-aware search over an index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from credrank.cli.common import console, fail, parse_params
from credrank.cli.index import (
    ApiKeyEnvOption,
    EngineOption,
    QdrantPathOption,
    QdrantUrlOption,
    check_index_option,
    store_options,
)
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.store import MAX_K, StoreError
from credrank.search import build_pipeline, describe, search_settings


def search(
    query: Annotated[str, typer.Argument(help="the query text")],
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    top_k: Annotated[int, typer.Option(
        "--top-k", min=1, help=f"results to return (at most {MAX_K:,})")] = 10,
    fetch_k: Annotated[int | None, typer.Option(
        "--fetch-k", min=1, help=f"candidate pool (default 3 × top-k; at most {MAX_K:,})")
    ] = None,
    priors: Annotated[str, typer.Option(
        help="compressed | current | aggressive | none | a TOML/YAML file")] = "current",
    mode: Annotated[str, typer.Option(help="multiply | linear | rrf")] = "multiply",
    lexical: Annotated[bool, typer.Option(help="BM25 instead of dense retrieval")] = False,
    pushdown: Annotated[bool | None, typer.Option(
        "--pushdown/--no-pushdown",
        help="score inside the engine (formula query); default: whenever the options allow")
    ] = None,
    domain_scores: Annotated[bool, typer.Option(
        help="use domain,score table scores as priors where matched")] = False,
    priors_store: Annotated[Path | None, typer.Option(
        help="use the current version of a feedback store (credrank priors) as priors")] = None,
    source_reliability: Annotated[Path | None, typer.Option(
        help="--json output of `credrank reliability estimate`: per-source reliability as the "
             "prior, shrunk toward the type prior (m = 5)")] = None,
    select: Annotated[str | None, typer.Option(
        help="selection after scoring: mmr | coverage | exposure | fair (default top-k)")] = None,
    select_param: Annotated[list[str] | None, typer.Option(
        "--select-param", "-P",
        help="selector parameter KEY=VALUE, repeatable: mmr diversity=0.5; coverage "
             "lambda_ilad=0.3 lambda_coverage=0.5 [n_clusters=4 intent_column=…]; exposure "
             "group_column=source_type rule=parity|proportional [seed=0]; fair "
             "protected_column=source_type protected_value=blog p=0.5 alpha=0.1")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    engine: EngineOption = None,
    qdrant_url: QdrantUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    qdrant_path: QdrantPathOption = None,
) -> None:
    """Credibility-aware search: score = sim × λ(source type) over an expanded pool.

    While `credrank index` writes the index, search exits 2 (retry when it has finished).
    """

    if not query.strip():
        fail("query: expected non-empty text")
    for name, value in (("--top-k", top_k), ("--fetch-k", fetch_k)):
        if value is not None and value > MAX_K:
            fail(f"{name}: expected an integer in [1, {MAX_K}], got {value}")
    if fetch_k is None and 3 * top_k > MAX_K:
        fail(f"--top-k {top_k}: the default --fetch-k (3 × top-k) would exceed {MAX_K}; give "
             f"--fetch-k (at most {MAX_K})")
    options = store_options(engine, qdrant_url, api_key_env, qdrant_path)
    check_index_option(index_dir)
    try:
        settings = search_settings(
            top_k=top_k, fetch_k=fetch_k, priors=priors, mode=mode, lexical=lexical,
            pushdown=pushdown, domain_scores=domain_scores, priors_store=priors_store,
            source_reliability=source_reliability, select=select,
            select_params=parse_params(select_param))
        idx = open_store(index_dir, **options)
        with idx:
            emb = get_embedder(idx.manifest.embedder)
            result = build_pipeline(idx, emb, settings).search(query)
            described = describe(settings, idx)
    except (ValueError, StoreError, RuntimeError) as exc:
        fail(str(exc))
    hits = result.hits()
    if as_json:
        print(json.dumps({"credrank_search": 1, "query": query, "settings": described,
                          "hits": hits, "info": result.info}, indent=2, default=str))
        return
    table = Table(title=f"{query}", show_lines=False)
    for col in ("#", "doc", "source type", "host", "sim", "prior", "final"):
        table.add_column(col)
    for h in hits:
        b = h["score_breakdown"]
        table.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]), str(h["host"]),
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      f"{b['final']:.4f}")
    console.print(table)
