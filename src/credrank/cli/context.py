"""``credrank context``: what the generator would see for a query (chapter 35.4, CAG).

The query is ranked by the same pipeline as ``credrank search``; the top-k passages are tiered
(``tier = min(S_tier, max(1, R − ⌊(T−t)/τ⌋))``, :mod:`credrank.context.tiers`) and printed as
the CAG prompt (``--format cag``), the JSON list for tool-calling generators (``json``) or the
untiered matched control (``plain``). stdout holds exactly what the generator gets; passages
left out by ``--undated exclude`` are listed on stderr (and under ``excluded`` with ``--json``).
``--json`` is shaped as ``credrank search --json`` where they share keys: ``settings``, the
ranking's ``info`` and the spec under the top-level ``pipeline`` (``--pipeline`` replays it;
``--top-k`` defaults to :data:`TOP_K` only without a ``--pipeline`` spec).
``--text`` is the option of every hit (:mod:`credrank.core.hittext`, declared once in
:mod:`credrank.cli.specs`): here ``full`` by default — the generator reads whole passages —
or ``snippet``, or ``none`` (the ``json`` form without the passages' text).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import check_text_argument, err, fail
from credrank.cli.index import check_index_option
from credrank.cli.specs import (
    PipelineOption,
    SetOption,
    Shortcuts,
    TextOption,
    shortcut_options,
    spec_of,
    spec_words,
)
from credrank.context.build import build_context, check_context_spec, check_format, parse_now
from credrank.context.render import GRANULARITIES
from credrank.core.hittext import check_text
from credrank.freshness.config import parse_duration
from credrank.freshness.policy import parse_undated
from credrank.index.store import StoreError
from credrank.pipeline.compile import check_stages
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.searcher import Searcher

#: the passages in the context when neither ``--top-k`` nor a ``--pipeline`` spec says
TOP_K = 5


@shortcut_options(helps={"top_k": f"passages in the context (default {TOP_K}); with a "
                                   "pipeline it replaces the spec's top_k"})
def context(
    query: Annotated[str, typer.Argument(help="the question")],
    index_dir: Annotated[Path | None, typer.Option("--index", help="index directory")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="cag (CAG labels) | json (for tool-calling generators) | plain "
                         "(no tiers: the matched control)")] = "cag",
    granularity: Annotated[str, typer.Option(
        help="document | sentence (sentence tiers from each sentence's own similarity, "
             "capped by the document's source tier)")] = "document",
    shortcuts: dict[str, Any] | None = None,
    source_tier: Annotated[str, typer.Option(
        "--source-tier",
        help="auto (factor credibility if ranked with it, else the source type) | type | a "
             "factor name in [0, 1], e.g. prior")] = "auto",
    half_life: Annotated[str | None, typer.Option(
        "--half-life", help="τ: one tier lost per elapsed τ — 365d, 52w, 1y, 12h or a number "
                            "of days, as --freshness half_life= (default: no time "
                            "downgrade)")] = None,
    now: Annotated[str | None, typer.Option(
        "--now", help="evaluation time T, ISO 8601 (default: now); also the now of the "
                      "pipeline's freshness stage")] = None,
    undated: Annotated[str, typer.Option(
        help="unknown age: neutral | neutral:W | penalty:W | exclude (downgrade "
             "⌊−log2 W⌋; exclude leaves the passage out, each said on stderr and under "
             "excluded, and the next dated hits of the pool take its place — after a "
             "selector other than the default, the context holds fewer)")] = "neutral",
    text: TextOption = "full",
    pipeline: PipelineOption = None,
    set_param: SetOption = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="the whole context document as JSON (policy, passages with their "
                       "inputs, excluded, the ranking's info, the rendered prompt, the spec "
                       "under pipeline)")] = False,
    cite: Annotated[bool, typer.Option(
        "--cite/--no-cite", help="each passage of the cag and plain prompts opens with its "
                                 "source type, host, URL and date where known, so that the "
                                 "generator can cite it (json: always under inputs)")] = True,
) -> None:
    """Print what the generator would see: the top-k passages with credibility tiers."""
    if index_dir is None:
        fail("--index: required (the index directory to search)")
    check_text_argument("query", query)
    if granularity not in GRANULARITIES:
        fail(f"--granularity: expected one of {', '.join(GRANULARITIES)}, got {granularity!r}")
    try:
        check_format(fmt)
        check_text(text, "--text")
        t_now = parse_now(now)
        tau = None if half_life is None else parse_duration(half_life, "--half-life")
        policy = parse_undated(undated)
    except ValueError as exc:
        fail(str(exc).replace("format:", "--format:", 1).replace("now:", "--now:", 1)
             .replace("undated:", "--undated:", 1))
    if tau is None and undated != "neutral":  # it was accepted and did nothing
        fail(f"--undated {undated}: only with --half-life (the unknown-age policy of the time "
             "downgrade, which is off without it)")
    if text == "none" and fmt != "json":
        fail(f"--text none: --format {fmt} prints the passages' text; use --format json (the "
             "passages' tiers and inputs without their text) or --text full|snippet")
    if text == "none" and granularity == "sentence":
        fail("--text none: --granularity sentence tiers the sentences of the text; use "
             "--text full|snippet")
    check_index_option(index_dir)
    if pipeline is None and (shortcuts or {}).get("top_k") is None:
        # context's own default; a --pipeline spec keeps its top_k unless --top-k is given
        shortcuts = Shortcuts.updated(shortcuts, top_k=TOP_K)
    try:
        spec = spec_of(pipeline, set_param, shortcuts)
        if now is not None:
            spec = _one_clock(spec, now, t_now)
        check_context_spec(spec)
        try:  # the files the stages name are read before the index is opened
            check_stages(spec)
            searcher = Searcher.open(index_dir)
            with searcher:
                describe = searcher.compile(spec).settings
                shown = spec
                while True:
                    ranked = searcher.search(query, shown, text=text)
                    try:
                        doc = build_context(ranked, embedder=searcher.embedder, now=t_now,
                                            half_life=tau, undated=policy,
                                            granularity=granularity, source=source_tier,
                                            text=text, describe=describe, top_k=spec.top_k)
                    except ValueError as exc:  # the tier policy's words, said as the option
                        raise ValueError(_option_words(str(exc))) from None
                    wider = _refill(spec, shown, len(doc.passages), len(doc.excluded))
                    if wider is None:
                        break
                    shown = wider
        except SpecError as exc:
            raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    if as_json:
        print(json.dumps(doc.to_json(fmt, cite), indent=2, ensure_ascii=False, default=str))
        return
    print(doc.render(fmt, cite))
    for e in doc.excluded:
        err.print(f"excluded: #{e.rank} {e.doc_id}: {e.reason}", highlight=False)


def _refill(spec: PipelineSpec, shown: PipelineSpec, kept: int, excluded: int
            ) -> PipelineSpec | None:
    """The spec of the next search when ``--undated exclude`` left fewer than ``--top-k``
    passages (``kept``; ``excluded`` left out of ``shown``'s ranking): the same pool
    (``fetch_k``), ``excluded`` more hits, so that the next dated ones fill the context as a
    longer ranking continues this one; ``None`` when it is full or the pool is spent. Only
    for the default selector (``topk``), whose longer ranking starts with the shorter one; a
    selection (``mmr``, ``exposure`` …) of more hits is another selection, and its context
    stays shorter, as the help says."""
    pool = spec.resolved_fetch_k
    if (kept >= spec.top_k or not excluded or shown.top_k >= pool
            or spec.stages[-1].name != "topk"):
        return None
    return shown.replace_top(top_k=min(pool, shown.top_k + excluded), fetch_k=pool)


def _one_clock(spec: PipelineSpec, now: str, t_now: datetime) -> PipelineSpec:
    """``spec`` with ``--now`` as the ``now`` of each freshness stage that would read the
    clock: one evaluation time ``T`` for the ranking and the tiers (the ranking weighted ages
    at the current time while the tiers used ``--now``). A stage whose own ``now`` is another
    time is an error naming both."""
    data = spec.to_dict()
    stages = data.get("stages", [])
    for i, stage in enumerate(stages):
        if not (isinstance(stage, dict) and stage.get("stage") == "freshness"):
            continue
        own = stage.get("now")
        if own is None:
            stages[i] = {**stage, "now": now}
        elif parse_now(own) != t_now:
            raise ValueError(f"--now {now}: the pipeline's freshness stage (stages[{i}]) has "
                             f"its own now {own!r}; give one evaluation time (drop one)")
    return PipelineSpec.from_dict(data)


def _option_words(message: str) -> str:
    """``message`` of :func:`build_context` with the policy's ``source:`` said as the option
    that set it, ``--source-tier:``."""
    return "--source-tier:" + message[len("source:"):] if message.startswith("source:") \
        else message
