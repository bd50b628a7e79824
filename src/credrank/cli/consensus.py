"""``credrank consensus calibrate``: choose the ``contested`` threshold of ``--consensus`` on
development queries with known answers (calibrated abstention, chapter 35.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import console, fail
from credrank.cli.specs import PipelineOption, SetOption, shortcut_options, spec_of, spec_words
from credrank.consensus.calibrate import answer_matches, choose_threshold
from credrank.documents import Query, read_queries
from credrank.index.store import StoreError
from credrank.pipeline.compile import check_stages
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.searcher import Searcher

app = typer.Typer(help="Label-free answer consensus over the candidates of a query.",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _consensus() -> None:
    """Calibrate the contested threshold of `credrank search --consensus`."""


def _gold(queries: list[Query], path: Path) -> list[list[str]]:
    gold = []
    for q in queries:
        answers = q.extra.get("answers")
        if (not isinstance(answers, list) or not answers
                or not all(isinstance(a, str) and a.strip() for a in answers)):
            where = f"{path}:{q.line}" if q.line is not None else str(path)
            came = "nothing (the field is missing)" if "answers" not in q.extra else \
                repr(answers)
            raise ValueError(f"{where}: query {q.id!r}: field 'answers': expected a non-empty "
                             f"list of answer strings, got {came}")
        gold.append(answers)
    return gold


def _param(spec: PipelineSpec, stage: str, name: str, absent: Any) -> Any:
    """Parameter ``name`` of ``spec``'s stage ``stage`` (``absent`` without that stage)."""
    found = spec.stage(stage)
    return absent if found is None else found.params[name]


@app.command()
@shortcut_options()
def calibrate(
    queries: Annotated[Path, typer.Argument(
        help="development queries, JSONL: {id, query|text, answers}, answers a list of strings")],
    index_dir: Annotated[Path | None, typer.Option("--index", help="index directory")] = None,
    shortcuts: dict[str, Any] | None = None,
    pipeline: PipelineOption = None,
    set_param: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """Run the consensus on every development query and choose the threshold that
    maximises (committed correct − committed wrong) / N; pass it to `credrank search
    --consensus --consensus-param threshold=T`. The gold answers are read to score each
    query and the threshold is chosen on those scores: the output says
    ``"reads_labels": true``.

    The pipeline is that of `credrank search` (--pipeline FILE or the options, then -S), with
    the consensus stage added where it is absent and its threshold set to 0 (every share is
    recorded; the threshold is what this command chooses)."""
    if index_dir is None:
        fail("--index: required (the index directory to search)")
    if queries.is_dir():
        fail(f"{queries}: expected a queries file, got a directory")
    if not queries.is_file():
        fail(f"{queries}: no such queries file")
    try:
        batch = read_queries(queries)
        if not batch:
            raise ValueError(f"{queries}: expected at least one query with its answers, got "
                             "none")
        gold = _gold(batch, queries)
        spec = spec_of(pipeline, set_param, shortcuts)
        try:
            spec = spec.with_params("consensus", {"threshold": 0.0})
            check_stages(spec)  # the files the stages name, before the index is opened
        except SpecError as exc:
            raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
        shares: list[float | None] = []
        correct: list[bool | None] = []
        rows: list[dict[str, Any]] = []
        with Searcher.open(index_dir) as searcher:
            results = searcher.search_many(((q.id, q.text) for q in batch), spec, text="none")
            for (qid, result), answers in zip(results, gold, strict=True):
                info = result.info["consensus"]
                top = info["answers"][0]["answer"] if info["answers"] else None
                ok = None if info["share"] is None else answer_matches(top, answers)
                shares.append(info["share"])
                correct.append(ok)
                rows.append({"id": qid, "top_answer": top, "share": info["share"],
                             "correct": ok})
        choice = choose_threshold(shares, correct)
    except (ValueError, StoreError, RuntimeError, OSError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    report = {"credrank_consensus_calibration": 1, "reads_labels": True, "queries": len(batch),
              "settings": {"top_k": spec.top_k, "fetch_k": spec.resolved_fetch_k,
                           "priors": _param(spec, "prior", "priors", "none"),
                           "credibility_model": _param(spec, "credibility", "model", None)},
              "pipeline": spec.to_dict(),
              "correct_rule": "a gold answer occurs in the top answer as whole tokens after "
                              "normalisation; the threshold is fitted on these scores",
              **choice.to_dict(), "per_query": rows}
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
        return
    no_answer = sum(s is None for s in shares)
    console.print(
        f"{len(batch)} queries ({no_answer} without any answer); threshold "
        f"{choice.threshold:.3f}: commits on {choice.committed} "
        f"({choice.committed_correct} correct), utility {choice.utility:+.3f}\n"
        # the exact value (repr): 0.333 for 1/3 committed on queries the calibration left
        f"use: credrank search --consensus --consensus-param threshold={float(choice.threshold)!r}",
        highlight=False, soft_wrap=True)


if __name__ == "__main__":
    app()
