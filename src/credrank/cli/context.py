"""``credrank context``: what the generator would see for a query (chapter 35.4, CAG).

The query is ranked by the same pipeline as ``credrank search``; the top-k passages are tiered
(``tier = min(S_tier, max(1, R − ⌊(T−t)/τ⌋))``, :mod:`credrank.context.tiers`) and printed as
the CAG prompt (``--format cag``), the JSON list for tool-calling generators (``json``) or the
untiered matched control (``plain``), by :func:`credrank.context.build.search_context` (the
path of ``POST /context`` too). stdout holds exactly what the generator gets; stderr says what
the prompt alone does not (:meth:`~credrank.context.build.ContextDocument.notes`): passages
left out by ``--undated exclude`` (under ``excluded`` with ``--json``), labels written inside
a passage's text (neutralised in the prompt; ``info.context``), dates after ``T`` and an
empty context.
``--json`` is shaped as ``credrank search --json`` where they share keys: ``settings``, the
ranking's ``info`` and the spec under the top-level ``pipeline`` (``--pipeline`` replays it;
``--top-k`` defaults to :data:`TOP_K` only without a ``--pipeline`` spec).
``--text`` is the option of every hit (:mod:`credrank.core.hittext`, declared once in
:mod:`credrank.cli.specs`): here ``full`` by default — the generator reads whole passages —
or ``snippet``, or ``none`` (the ``json`` form without the passages' text).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import check_index_option, check_text_argument, err, fail
from credrank.cli.specs import (
    PipelineOption,
    SetOption,
    Shortcuts,
    TextOption,
    shortcut_options,
    spec_of,
    spec_words,
)
from credrank.context.build import (
    TOP_K,
    check_context_options,
    check_format,
    check_granularity,
    parse_now,
    search_context,
)
from credrank.core.hittext import check_text
from credrank.freshness.config import parse_duration
from credrank.freshness.policy import parse_undated
from credrank.index.store import StoreError
from credrank.pipeline.compile import check_stages
from credrank.pipeline.spec import SpecError
from credrank.searcher import Searcher


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
        help="auto (factor credibility if ranked with it; else the prior factor the ranking "
             "applied, unless it is the current type preset; else the source type) | type | "
             "a factor name in [0, 1], e.g. prior")] = "auto",
    half_life: Annotated[str | None, typer.Option(
        "--half-life", help="τ: one tier lost per elapsed τ — 365d, 52w, 1y, 12h or a number "
                            "of days, as --freshness half_life= (default: no time "
                            "downgrade)")] = None,
    now: Annotated[str | None, typer.Option(
        "--now", help="evaluation time T, ISO 8601 (default: the now of the pipeline's "
                      "freshness stage, else the current time); also the now of that "
                      "stage")] = None,
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
                                 "source type, host, URL, date and passage number where "
                                 "known, so that the generator can cite it (the default of "
                                 "every door; json: always under inputs)")] = True,
) -> None:
    """Print what the generator would see: the top-k passages with credibility tiers."""
    if index_dir is None:
        fail("--index: required (the index directory to search)")
    check_text_argument("query", query)
    try:
        check_granularity(granularity)
        check_format(fmt)
        check_text(text, "--text")
        if now is not None:
            parse_now(now)
        tau = None if half_life is None else parse_duration(half_life, "--half-life")
        policy = parse_undated(undated)
    except ValueError as exc:
        fail(flag_words(str(exc), pipeline))
    try:
        check_context_options(fmt, text, granularity, tau, undated,
                              words=lambda name: _FLAGS.get(name, name))
    except ValueError as exc:
        fail(str(exc))
    check_index_option(index_dir)
    if pipeline is None and (shortcuts or {}).get("top_k") is None:
        # context's own default; a --pipeline spec keeps its top_k unless --top-k is given
        shortcuts = Shortcuts.updated(shortcuts, top_k=TOP_K)
    try:
        spec = spec_of(pipeline, set_param, shortcuts)
        try:  # the files the stages name are read before the index is opened
            check_stages(spec)
            with Searcher.open(index_dir) as searcher:
                doc = search_context(searcher, query, spec, now=now, half_life=tau,
                                     undated=policy, granularity=granularity,
                                     source_tier=source_tier, text=text)
        except SpecError as exc:
            raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(flag_words(str(exc), pipeline))
    if as_json:
        print(json.dumps(doc.to_json(fmt, cite), indent=2, ensure_ascii=False, default=str))
    else:
        prompt = doc.render(fmt, cite)
        if sys.stdout.isatty():  # a person reads it: a page's control sequences shown, not
            from credrank.cli.visible import visible_text  # sent (a pipe gets the data)

            prompt = visible_text(prompt)
        print(prompt)
    for line in doc.notes():  # what the prompt alone does not say: stderr, never stdout
        err.print(line, highlight=False, markup=False)


#: the library's keyword (an error's head, :mod:`credrank.context.build`) → this command's flag
_FLAGS = {"now": "--now", "half_life": "--half-life", "undated": "--undated",
          "source_tier": "--source-tier", "granularity": "--granularity", "format": "--format",
          "top_k": "--top-k", "text": "--text"}


def flag_words(message: str, pipeline: Path | None = None) -> str:
    """``message`` of the context library said in this command's words: its head keyword
    (``source: …``, ``undated: …``, ``text none: …``) as the flag that set it
    (``--source-tier: …``); a refused ``retrieval`` as the ``--pipeline`` file or the
    ``--lexical`` flag that asked for it."""
    head, sep, rest = message.partition(":")
    word, space, value = head.partition(" ")
    if sep and word == "retrieval":
        if pipeline is not None:
            return f"--pipeline {pipeline}: {message}"
        return (f"--lexical:{rest.replace('expected dense', 'context needs dense retrieval', 1)}"
                "; drop --lexical")
    if sep and word in _FLAGS:
        return f"{_FLAGS[word]}{space}{value}{sep}{rest}"
    return message
