"""``credrank reliability estimate``: per-source agreement reliability from an ANSWERS file.

The lead mounts :data:`app` as ``credrank reliability``; run standalone with
``python -m credrank.cli.reliability estimate ANSWERS``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from credrank.cli.common import console, fail, labelled, table_console, warn
from credrank.core.cluster import ClusterError, check_cluster_options, require_dask, wants_cluster
from credrank.core.errors import FileFormatError
from credrank.core.schema import ListOf, MapOf, Text, got
from credrank.core.structured import read_structured
from credrank.core.validation import check_choice, check_int, check_positive
from credrank.reliability.answers import AnswersFileError, load_answers, load_truth
from credrank.reliability.dependence import DependenceReport, collapse, detect_dependence
from credrank.reliability.equivalence import AnswerEquivalence
from credrank.reliability.estimate import (
    ReliabilityEstimator,
    consensus_diagnostics,
    encode_answers,
)
from credrank.reliability.parallel import detect_dependence_parallel
from credrank.reliability.vote import START_RULES, majority_matrix

app = typer.Typer(help="RA-RAG source reliability from cross-source agreement.",
                  no_args_is_help=True, add_completion=False)

#: the pairwise dependence test is skipped above this many sources: its work is O(S²) pairs
#: (blocked, O(block·S) memory; S = 10,000 took 8.8 s on the shared 2-core machine)
MAX_DEPENDENCE_SOURCES = 20000


@app.callback()
def _reliability() -> None:
    """Estimate source reliability from agreement (agreement is not verified truth)."""


def _fail(message: str) -> None:
    fail(message)


#: the ``--aliases`` file: a JSON object mapping each canonical answer (a non-empty string) to
#: a list of alias strings
ALIASES_SCHEMA = MapOf(ListOf(Text(allow_empty=True)))


def _load_aliases(path: Path) -> dict[str, list[str]]:
    """The ``--aliases`` file, read by the hardened JSON reader
    (:func:`~credrank.core.structured.read_structured`) and checked against
    :data:`ALIASES_SCHEMA`; any problem exits 2 with ``error:`` naming the file and the key."""
    try:
        data = read_structured(path, what="aliases file", fmt="json")
        if not isinstance(data, dict):
            raise FileFormatError(f"{path}: expected a JSON object {{canonical: [aliases]}}, "
                                  f"got {got(data)}")
        checked = ALIASES_SCHEMA.check(data, str(path), error=FileFormatError)
        try:  # what the schema cannot say (one alias under two answers), naming the file
            AnswerEquivalence(aliases=checked)
        except ValueError as exc:
            raise FileFormatError(f"{path}: {exc}") from None
        return dict(checked)
    except FileFormatError as exc:
        _fail(f"--aliases {exc}")
        raise  # _fail exits; this line is never reached


def run_estimate(answers: Path, *, truth: Path | None = None, clip: bool = False,
                 collapse_copies: bool = False, tol: float = 1e-6, max_iter: int = 100,
                 aliases: dict[str, list[str]] | None = None,
                 start: str = "majority", workers: int = 0,
                 scheduler: Any = None) -> dict[str, Any]:
    """The computation behind ``estimate``; returns the ``--json`` document (see there).

    With ``workers`` >= 1 (a local Dask cluster) or ``scheduler`` (an address or a
    ``distributed.Client``) the pairwise dependence test runs in blocks of source pairs on the
    workers (:func:`~credrank.reliability.parallel.detect_dependence_parallel`); the document
    is identical to the one without.
    """
    table = load_answers(answers)
    eq = AnswerEquivalence(aliases=aliases)
    enc = encode_answers(table, eq)
    n_sources = len(enc.source_ids)
    report: DependenceReport | None = None
    dependence_note = None
    if n_sources <= MAX_DEPENDENCE_SOURCES:
        if wants_cluster(workers, scheduler):
            report = detect_dependence_parallel(enc, client=scheduler, workers=workers,
                                                max_sources=MAX_DEPENDENCE_SOURCES)
        else:
            report = detect_dependence(enc, max_sources=MAX_DEPENDENCE_SOURCES)
    else:
        dependence_note = (f"dependence test skipped: {n_sources} sources > "
                           f"{MAX_DEPENDENCE_SOURCES}")
        if collapse_copies:
            raise ValueError(f"--collapse-copies needs the dependence test, which is limited to "
                             f"{MAX_DEPENDENCE_SOURCES} sources; got {n_sources}")
    est = ReliabilityEstimator(tol=tol, max_iter=max_iter, clip=clip, equivalence=eq,
                               start=start)
    groups = [[i] for i in range(n_sources)]
    if collapse_copies and report is not None:
        groups = report.groups()
        est.fit(collapse(enc, groups))
    else:
        est.fit(enc)
    ballot_of = {i: b for b, g in enumerate(groups) for i in g}
    cluster_of = report.cluster_of() if report is not None else {}
    # clusters that voted as separate ballots (not collapsed): said by the diagnostics
    clusters = [] if report is None or collapse_copies else report.clusters
    diag = consensus_diagnostics(est.encoded_, est.consensus_, est.reliability_, est.known_,
                                 est.coverage_, tied=est.tied_, copies=clusters)
    sources = []
    for i, sid in enumerate(enc.source_ids):
        b = ballot_of[i]
        known = bool(est.known_[b])
        sources.append({
            "source_id": sid, "known": known,
            "reliability": float(est.reliability_[b]) if known else None,
            "weight": float(est.weights_[b]) if known else None,
            "coverage": int(est.coverage_[b]), "answered": int((enc.classes[i] >= 0).sum()),
            "cluster": cluster_of.get(sid)})
    doc: dict[str, Any] = {
        "credrank_reliability_estimate": 1,
        "answers": str(answers), "reads_labels": truth is not None,
        "n_sources": n_sources, "n_questions": len(enc.question_ids),
        "n_ballots": len(groups), "clip": clip, "collapse_copies": collapse_copies,
        "start": start, "n_iter": int(est.n_iter_), "converged": bool(est.converged_), "tol": tol,
        "max_iter": max_iter, "equivalence": eq.config(), "sources": sources,
        "clusters": report.clusters if report is not None else [],
        "dependence_pairs": [p.to_dict() for p in report.pairs] if report is not None else [],
        "dependence_note": dependence_note,
        "consensus": dict(zip(enc.question_ids, est.consensus_labels_, strict=True)),
        "diagnostics": diag.to_dict(),
    }
    if truth is not None:
        doc["truth"] = _truth_scores(load_truth(truth), enc, est, eq, sources)
    return doc


def _truth_scores(gold: dict[str, str], enc: Any, est: ReliabilityEstimator,
                  eq: AnswerEquivalence, sources: list[dict[str, Any]]) -> dict[str, Any]:
    q_index = {q: j for j, q in enumerate(enc.question_ids)}
    common = [q for q in gold if q in q_index]
    majority = majority_matrix(enc.classes, rule="all")

    def right(label: str | None, q: str) -> bool:
        return label is not None and eq.key(label) == eq.key(gold[q])

    cons = [right(est.consensus_labels_[q_index[q]], q) for q in common]
    maj = [right(enc.label(q_index[q], int(majority[q_index[q]])), q) for q in common]
    for i, src in enumerate(sources):
        hits = [right(enc.label(q_index[q], int(enc.classes[i, q_index[q]])), q)
                for q in common if enc.classes[i, q_index[q]] >= 0]
        src["truth_accuracy"] = float(np.mean(hits)) if hits else None
        src["truth_answers"] = len(hits)
    return {"questions": len(common), "missing_from_answers": len(gold) - len(common),
            "consensus_accuracy": float(np.mean(cons)) if cons else None,
            "majority_accuracy": float(np.mean(maj)) if maj else None,
            "unresolved": int(sum(est.consensus_[q_index[q]] < 0 for q in common))}


@app.command()
def estimate(
    answers: Annotated[Path, typer.Argument(help="ANSWERS file (.csv or .jsonl): question_id, "
                                            "source_id, answer; empty/IDK = abstain")],
    json_out: Annotated[bool, typer.Option("--json", help="print the stable JSON document")]
    = False,
    truth: Annotated[Path | None, typer.Option("--truth", help="TRUTH file: question_id, "
                                               "answer; adds accuracy against it")] = None,
    clip: Annotated[bool, typer.Option("--clip", help="vote weights max(S·r−1, 0)")] = False,
    collapse_copies: Annotated[bool, typer.Option(
        "--collapse-copies", help="collapse each dependence cluster to one ballot")] = False,
    tol: Annotated[float, typer.Option(help="stop when max |Δr| < tol")] = 1e-6,
    max_iter: Annotated[int, typer.Option(help="maximum weighted voting rounds")] = 100,
    aliases: Annotated[Path | None, typer.Option(
        help="JSON file {canonical: [aliases]} for the equivalence rule")] = None,
    start: Annotated[str, typer.Option(
        help="first-round questions: majority (> half) or plurality (unique top)")]
    = "majority",
    workers: Annotated[int, typer.Option(
        "--workers", min=0,
        help="run the pairwise dependence test on a local Dask cluster of N worker processes "
             "(0: in this process); needs the dask extra")] = 0,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", metavar="ADDRESS",
        help="run it on the running Dask scheduler at ADDRESS, e.g. tcp://host:8786 "
             "(excludes --workers)")] = None,
) -> None:
    """Estimate r_s (agreement with the IWMV consensus), v_s = S·r_s − 1 and coverage |J_s|.

    Agreement is not verified truth: read the diagnostics and the dependence clusters.

    ``--json`` prints one object with these keys (stable):
    ``credrank_reliability_estimate`` (the format version, 1), ``answers``, ``reads_labels``
    (true with ``--truth``: the truth file is read, to score the sources and the consensus
    only; nothing is fitted on it; false without), ``n_sources``,
    ``n_questions``, ``n_ballots`` (sources after collapsing), ``clip``, ``collapse_copies``,
    ``start``, ``n_iter``, ``converged``, ``tol``, ``max_iter``, ``equivalence`` (the rule's
    settings); ``sources``: a list in file order of
    ``{source_id, known, reliability (null if unknown), weight (null if unknown), coverage
    (|J_s|), answered, cluster (index into clusters or null)}`` plus, with ``--truth``,
    ``truth_accuracy`` (null without answers) and ``truth_answers``; ``clusters``: lists of
    source ids; ``dependence_pairs``: ``{source_a, source_b, overlap, observed, expected,
    excess, z, shared_wrong, document_overlap}``; ``dependence_note`` (null or why the test was
    skipped); ``consensus``: ``{question_id: normalised answer or null}``; ``diagnostics``:
    ``{trustworthy, warnings, resolved_share, mean_agreement, top_label_share,
    shared_label_set, biased_source_share, tie_share, n_sources, too_few_sources}``
    (``resolved_share``: questions whose consensus is not a tie and has at least 2 answers,
    the only ones that count in ``r``; ``tie_share``: of the questions with a consensus, those
    whose answer the tie rule picked; ``too_few_sources``: fewer than 3 sources answered, so
    ``trustworthy`` is false and a warning goes to stderr); with ``--truth``, ``truth``:
    ``{questions, missing_from_answers, consensus_accuracy, majority_accuracy, unresolved}``
    (``unresolved``: truth questions without any consensus answer; they count as wrong, and a
    tied question is scored by the tie rule's answer).

    ``--workers N`` / ``--scheduler ADDRESS`` run the pairwise dependence test in blocks on
    Dask workers; the output is identical to a run without them.
    """
    try:  # the options by their names (the estimator says tol:, max_iter:, start:)
        check_positive("--tol", tol)
        check_int("--max-iter", max_iter, 1)
        check_choice("--start", start, START_RULES)
    except ValueError as exc:
        _fail(str(exc))
    try:
        check_cluster_options(workers, scheduler)
        if wants_cluster(workers, scheduler):
            require_dask()
    except (ValueError, ClusterError) as exc:
        _fail(str(exc))
    alias_map = _load_aliases(aliases) if aliases is not None else None
    if truth is not None and truth.is_dir():
        _fail(f"--truth {truth}: expected a file, got a directory")
    if truth is not None and not truth.exists():
        _fail(f"--truth {truth}: no such file")
    try:
        doc = run_estimate(answers, truth=truth, clip=clip, collapse_copies=collapse_copies,
                           tol=tol, max_iter=max_iter, aliases=alias_map, start=start,
                           workers=workers, scheduler=scheduler)
    except (AnswersFileError, ValueError) as exc:
        message = str(exc)
        if truth is not None and message.startswith(f"{truth}:"):  # the option that named it
            message = f"--truth {message}"
        _fail(message)
        return
    except ClusterError as exc:
        _fail(str(exc))
        return
    diag = doc["diagnostics"]
    if diag["too_few_sources"]:
        # on stderr in both modes: a one- or two-source file gives r = 1 and a "consensus" that
        # is just those sources' answers; the JSON carries the same reason in diagnostics
        warn(f"{diag['warnings'][0]}; not trustworthy")
    if doc["n_iter"] and not doc["converged"]:  # the last round's estimates, no fixed point
        warn(f"the weighted rounds did not converge within --max-iter {doc['max_iter']} "
             f"(the last change was above --tol {doc['tol']}): the reliabilities are the "
             "last round's; raise --max-iter")
    if json_out:
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    _print(doc)


def _print(doc: dict[str, Any]) -> None:
    with_truth = "truth" in doc
    table = Table(title=f"Source reliability from agreement ({doc['n_sources']} sources, "
                        f"{doc['n_questions']} questions)")
    # a long source id folds, never cut to "…"
    for col in ("source", "r", "v", "coverage |J_s|", "answered", "cluster"):
        table.add_column(col, justify="left" if col == "source" else "right", overflow="fold")
    if with_truth:
        table.add_column("truth acc.", justify="right", overflow="fold")
    for s in doc["sources"]:
        row = [s["source_id"],
               "unknown" if s["reliability"] is None else f"{s['reliability']:.3f}",
               "—" if s["weight"] is None else f"{s['weight']:.3f}",
               str(s["coverage"]), str(s["answered"]),
               "" if s["cluster"] is None else str(s["cluster"])]
        if with_truth:
            row.append("—" if s["truth_accuracy"] is None else f"{s['truth_accuracy']:.3f}")
        table.add_row(*row)
    table_console().print(table)  # a pipe or a file: as wide as the cells
    console.print(f"IWMV: {doc['n_iter']} rounds, converged={doc['converged']}, "
                  f"clip={doc['clip']}, collapse_copies={doc['collapse_copies']}")
    if doc["n_iter"] == 0:
        console.print(f"no weighted round ran: the first vote (--start {doc['start']}) "
                      "resolved no question with at least 2 answers, so every source is "
                      "unknown")
    if doc["clusters"]:
        for i, members in enumerate(doc["clusters"]):
            console.print(f"dependence cluster {i}: {', '.join(members)}")
    else:
        console.print(doc["dependence_note"] or "no dependence clusters found")
    diag = doc["diagnostics"]
    if diag["trustworthy"]:
        console.print("consensus diagnostics: no warning (agreement is still not truth)")
    # the too-few-sources warning went to stderr already (estimate)
    for w in diag["warnings"][1 if diag["too_few_sources"] else 0:]:
        console.print(labelled("warning:", "yellow", w))
    if with_truth:
        t = doc["truth"]

        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.3f}"

        console.print(f"against truth ({t['questions']} questions): weighted consensus "
                      f"{f(t['consensus_accuracy'])}, plain majority {f(t['majority_accuracy'])}")


if __name__ == "__main__":  # pragma: no cover
    app()
