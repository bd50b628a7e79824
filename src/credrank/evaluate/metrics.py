"""Ranking metrics per query: P@k, nDCG@k and RR through ``ir_measures``, plus harmful@k.

Data shapes (the ``ir_measures`` / ``pytrec_eval`` dict forms):

* ``Qrels = dict[qid, dict[docid, int]]``: graded gains, integers in
  :data:`credrank.documents.judgements.RELEVANCE_RANGE` (trec_eval's C ``int``: a larger value
  overflows there and silently scores 0), the range :func:`~credrank.documents.read_qrels`
  reads; a document is *relevant* when its gain is ``> 0``. A gain ``<= 0``
  is a judged non-relevant document (the TREC convention: the Web track's ``-2`` = spam), and
  the ranking measures count it as gain ``0``, as ``trec_eval`` does. The qids of the qrels
  are the evaluated topic set.
* ``Run = dict[qid, dict[docid, float]]``: higher score = better rank. Ties are ordered as
  ``trec_eval`` orders them (score descending, then docid descending); build runs from ranked
  lists with :func:`run_from_rankings`, whose rank-derived scores ``n - rank`` cannot tie.

Declared policies (seed 004 evaluation; chapter 35.1 asks for declared denominators):

* a topic missing from the run (or with an empty ranking) scores ``0.0`` on every measure;
* a topic without any relevant document is *excluded* from the ``ir_measures`` measures by
  default (``no_relevant="exclude"``: no system can score on it, so it would only add ties to
  paired tests); ``no_relevant="zero"`` keeps it with ``0.0``. harmful@k does not depend on
  relevance and is reported for every topic under both policies;
* run entries for qids outside the topic set are ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from credrank.core.candidates import Candidates
from credrank.core.errors import FileFormatError
from credrank.core.extras import missing_extra
from credrank.core.structured import read_text
from credrank.core.validation import check_choice, check_int
from credrank.documents.judgements import RELEVANCE_RANGE

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

_HARMFUL = re.compile(r"harmful@(\d+)")
NoRelevantPolicy = Literal["exclude", "zero"]


# ---------------------------------------------------------------- validation and ordering


def _check_id(kind: str, value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {kind} must be a non-empty str; got {value!r}")
    return value


def _validate_nested(data: Mapping[str, Mapping[str, object]], name: str, value_name: str,
                     check: Callable[[object, str], float | int]) -> dict[str, dict[str, Any]]:
    """The one validator behind :func:`validate_qrels` and :func:`validate_run`: a mapping
    ``qid -> {docid: value}`` with non-empty str ids, each value passed through ``check``
    (which raises naming the entry); returns a checked copy."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: expected a mapping qid -> {{docid: {value_name}}}; got "
                         f"{type(data).__name__}")
    out: dict[str, dict[str, Any]] = {}
    for qid, row in data.items():
        _check_id("qid", qid, name)
        if not isinstance(row, Mapping):
            raise ValueError(f"{name}[{qid!r}]: expected a mapping docid -> {value_name}; got "
                             f"{type(row).__name__}")
        checked: dict[str, Any] = {}
        for docid, value in row.items():
            _check_id("docid", docid, f"{name}[{qid!r}]")
            checked[docid] = check(value, f"{name}[{qid!r}][{docid!r}]")
        out[qid] = checked
    return out


def _gain(value: object, where: str) -> int:
    return check_int(f"{where}: gain", value, *RELEVANCE_RANGE)


def _score(value: object, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a finite number; got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValueError(f"{where}: expected a finite number; got {value!r}")
    return number


def validate_qrels(qrels: Mapping[str, Mapping[str, int]], name: str = "qrels") -> Qrels:
    """Check and copy qrels: str ids, int gains in
    :data:`~credrank.documents.judgements.RELEVANCE_RANGE` (bool rejected; a gain ``<= 0`` is
    non-relevant)."""
    return _validate_nested(qrels, name, "gain", _gain)


def validate_run(run: Mapping[str, Mapping[str, float]], name: str = "run") -> Run:
    """Check and copy a run: str ids, finite real scores (bool rejected)."""
    return _validate_nested(run, name, "score", _score)


def ranked_docs(scores: Mapping[str, float]) -> list[str]:
    """Docids best first: score descending, ties by docid descending (``trec_eval``'s order)."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]),
                                 reverse=True)]


def run_from_rankings(rankings: Mapping[str, Sequence[str]]) -> Run:
    """Turn ranked docid lists into a run with rank-derived scores ``score = n - rank``.

    ``rank`` is 0-based, so the top document of ``n`` gets ``n`` and the last gets ``1``;
    scores are distinct, so no tie-breaking rule can reorder the list. A docid listed twice
    for one query raises ``ValueError``.
    """
    run: Run = {}
    for qid, docs in rankings.items():
        _check_id("qid", qid, "rankings")
        docs = list(docs)
        seen: set[str] = set()
        for d in docs:
            if d in seen:
                raise ValueError(f"rankings[{qid!r}]: docid {d!r} appears twice; "
                                 "expected each document once")
            seen.add(d)
        n = len(docs)
        run[qid] = {_check_id("docid", d, f"rankings[{qid!r}]"): float(n - i)
                    for i, d in enumerate(docs)}
    return run


def ranked(batch: Candidates) -> Candidates:
    """The ranking a batch stands for: the order a selector returned (a batch with
    ``info["select"]``: MMR, coverage, exposure, FA*IR, whose lists are not sorted by score:
    the order a user is shown), else the batch after ``sorted_by_score()`` (ties keep the
    earlier row). (Every batch was sorted by score: a measure at a depth below a selector's
    ``top_k`` read another list than the one returned.)"""
    return batch if "select" in batch.info else batch.sorted_by_score()


def run_from_batches(batches: Mapping[str, Candidates]) -> Run:
    """A run from one scored :class:`~credrank.core.candidates.Candidates` batch per query:
    each one's :func:`ranked` order, converted with :func:`run_from_rankings`."""
    return run_from_rankings({qid: [str(d) for d in ranked(batch).doc_ids]
                              for qid, batch in batches.items()})


# ---------------------------------------------------------------- harmful@k


def harmful_at_k(run: Mapping[str, Mapping[str, float]], bad: Mapping[str, Iterable[str]],
                 k: int, qids: Iterable[str] | None = None) -> dict[str, float]:
    """Adversarial (harmful) hit rate at k per query (seed 004, "adversarial hit rate").

    ``harmful@k(q) = |top_k(q) ∩ bad(q)| / k``.

    The denominator is always ``k``, also when fewer than ``k`` documents were retrieved
    (declared policy: an empty slot is not harmful, so a short ranking cannot look worse
    than a full one with the same bad documents). A query missing from the run scores 0.
    ``qids`` defaults to every qid of ``run`` and ``bad``.
    """
    k = check_int("k", k, 1)
    checked = validate_run(run)
    topics = sorted(set(checked) | set(bad)) if qids is None else list(qids)
    out: dict[str, float] = {}
    for qid in topics:
        bad_q = set(bad.get(qid, ()))
        top = ranked_docs(checked.get(qid, {}))[:k]
        out[qid] = sum(1 for d in top if d in bad_q) / k
    return out


def mean(values: Mapping[str, float]) -> float:
    """Arithmetic mean over queries, ``sum(v) / n``; an empty mapping gives ``0.0`` (declared).

    The statistics in :mod:`credrank.evaluate.stats` flag ``n = 0`` as undefined instead.
    """
    if not values:
        return 0.0
    return math.fsum(values.values()) / len(values)


def aggregate(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean of every measure of :func:`evaluate`'s output (see :func:`mean`)."""
    return {measure: mean(per_query) for measure, per_query in results.items()}


# ---------------------------------------------------------------- measure registry

#: whether a larger value of a measure is better (``"higher"``) or worse (``"lower"``)
Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class MeasureSpec:
    """A family of measures and its direction; ``pattern`` matches whole measure names."""

    family: str
    pattern: re.Pattern[str]
    direction: Direction
    description: str


_REGISTRY: dict[str, MeasureSpec] = {}


def register_measure(family: str, pattern: str, direction: Direction,
                     description: str) -> MeasureSpec:
    """Record the direction of the measures whose names fully match ``pattern``.

    Every table, statistic (wins/losses), plot and JSON document reads a measure's direction
    from here (:func:`measure_direction`); nothing guesses it from the name elsewhere.
    Re-registering a family replaces it.
    """
    check_choice("direction", direction, ("higher", "lower"))
    spec = MeasureSpec(family, re.compile(pattern), direction, description)
    _REGISTRY[family] = spec
    return spec


def measure_spec(name: str) -> MeasureSpec:
    """The registered family of measure ``name`` (first match in registration order)."""
    if not isinstance(name, str):
        raise ValueError(f"measure: expected a str; got {name!r}")
    for spec in _REGISTRY.values():
        if spec.pattern.fullmatch(name):
            return spec
    raise ValueError(f"measure {name!r} has no registered direction; expected one of the "
                     f"families {', '.join(_REGISTRY)} (register others with "
                     "register_measure)")


def measure_direction(name: str) -> Direction:
    """``"higher"`` or ``"lower"``: which way measure ``name`` improves."""
    return measure_spec(name).direction


def registered_measures() -> list[MeasureSpec]:
    """Every registered family, in registration order."""
    return list(_REGISTRY.values())


for _family, _pattern, _direction, _text in (
    ("harmful@k", r"harmful@\d+", "lower",
     "share of the top k that is a labelled bad document (denominator k)"),
    ("P@k", r"P@\d+", "higher", "precision at k"),
    ("nDCG@k", r"nDCG(@\d+)?", "higher", "normalised discounted cumulative gain"),
    ("RR", r"RR", "higher", "reciprocal rank of the first relevant document (no cutoff: "
     "pytrec_eval computes RR over the whole ranking)"),
    ("AP", r"AP(@\d+)?", "higher", "average precision"),
    ("R@k", r"R@\d+", "higher", "recall at k"),
    ("coverage@k", r"coverage@\d+", "higher",
     "share of a question's gold answers supported by a correct document in the top k"),
    ("accuracy", r"accuracy", "higher", "share of correct predictions"),
    ("AUC", r"AUC", "higher", "area under the ROC curve"),
    ("log-loss", r"log-loss", "lower", "mean negative log-likelihood of the labels"),
    ("Brier", r"Brier", "lower", "mean squared error of predicted probabilities"),
    ("Pearson", r"Pearson", "higher", "Pearson correlation of an estimate with the truth"),
    ("Spearman", r"Spearman", "higher", "Spearman correlation of an estimate with the truth"),
):
    register_measure(_family, _pattern, _direction, _text)  # type: ignore[arg-type]


# ---------------------------------------------------------------- evaluate


def _ir_measures() -> Any:
    """``ir_measures``, imported here, not at import time: it (with pytrec-eval-terrier) is the
    optional ``eval`` extra, needed by the ranking measures only (harmful@k and the rest of
    this module work without it)."""
    try:
        import ir_measures
    except ImportError as exc:
        raise missing_extra("ranking measures (P@k, nDCG@k, RR)", "eval", exc) from exc
    return ir_measures


def _provider() -> Any:
    """The one ir_measures provider used: trec_eval semantics, including its tie order."""
    provider = _ir_measures().pytrec_eval
    if not provider.is_available():
        raise missing_extra("ranking measures (P@k, nDCG@k, RR)", "eval",
                            ImportError(name="pytrec_eval"))
    return provider


def _check_cutoff(text: str, cutoff: object) -> None:
    """Refuse a cutoff that is not an integer ``k >= 1`` before any evaluator sees it
    (``pytrec_eval`` aborts the whole process on ``@0``)."""
    if cutoff is None:
        return
    if isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff < 1:
        raise ValueError(f"measures: {text!r} needs an integer cutoff k >= 1 after '@'; "
                         f"got {cutoff!r}")


def _parse(measures: Sequence[str]) -> tuple[dict[str, int], dict[object, list[str]]]:
    if isinstance(measures, str) or not isinstance(measures, Sequence) or not measures:
        raise ValueError(f"measures: expected a non-empty list of measure strings; "
                         f"got {measures!r}")
    harmful: dict[str, int] = {}
    parsed: dict[object, list[str]] = {}
    provider = None
    for text in measures:
        if not isinstance(text, str):
            raise ValueError(f"measures: expected str items; got {text!r}")
        match = _HARMFUL.fullmatch(text)
        if match:
            k = int(match.group(1))
            _check_cutoff(text, k)
            harmful[text] = k
            continue
        if provider is None:
            provider = _provider()
        try:
            measure = _ir_measures().parse_measure(text)
        except Exception as exc:  # ir_measures raises NameError/ValueError/SyntaxError
            raise ValueError(
                f"measures: cannot parse {text!r} ({exc}); expected an ir_measures string "
                "such as 'P@5', 'nDCG@10', 'RR', or 'harmful@5'") from None
        _check_cutoff(text, measure.params.get("cutoff"))
        try:
            supported = provider.supports(measure)
        except Exception as exc:  # ir_measures asserts on parameters it cannot take
            raise ValueError(f"measures: {text!r} has parameters pytrec_eval cannot take "
                             f"({exc or type(exc).__name__})") from None
        if not supported:
            raise ValueError(f"measures: {text!r} is not computed by pytrec_eval (the only "
                             "provider used, so that ties are broken as trec_eval does)")
        parsed.setdefault(measure, []).append(text)
    return harmful, parsed


def evaluate(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]],
             measures: Sequence[str], *, bad: Mapping[str, Iterable[str]] | None = None,
             no_relevant: NoRelevantPolicy = "exclude") -> dict[str, dict[str, float]]:
    """Per-query values of each measure (seed 004 evaluation: P@5, NDCG@5, MRR, adversarial
    hit rate).

    ``ir_measures`` strings are computed by its ``pytrec_eval`` provider only:
    ``P@k = |rel ∩ top_k| / k``; ``nDCG@k = DCG@k / IDCG@k`` with
    ``DCG@k = Σ_{i≤k} gain_i / log2(i + 1)`` (linear gains, ideal ranking from the qrels);
    ``RR = 1 / rank of the first relevant document`` (0 if none is retrieved; the mean over
    queries is MRR). ``harmful@k`` is :func:`harmful_at_k`
    and needs ``bad``.

    Returns ``{measure string as given: {qid: value}}`` over the qids of ``qrels``, with the
    policies of the module docstring for missing queries and queries without relevant
    documents.
    """
    if no_relevant not in ("exclude", "zero"):
        raise ValueError(f"no_relevant: expected 'exclude' or 'zero'; got {no_relevant!r}")
    harmful, parsed = _parse(measures)
    checked_qrels = validate_qrels(qrels)
    checked_run = validate_run(run)
    if harmful and bad is None:
        raise ValueError(f"bad: {sorted(harmful)} need the labelled bad documents per query "
                         "(bad={qid: {docid, ...}}); got None")

    topics = list(checked_qrels)
    results: dict[str, dict[str, float]] = {text: {} for text in measures}
    for text, k in harmful.items():
        results[text] = harmful_at_k(checked_run, bad or {}, k, qids=topics)

    if parsed:
        answerable = [q for q in topics if any(g > 0 for g in checked_qrels[q].values())]
        scored = [q for q in answerable if checked_run.get(q)]
        values: dict[object, dict[str, float]] = {m: {} for m in parsed}
        if scored:
            sub_qrels = {q: {d: max(g, 0) for d, g in checked_qrels[q].items()}
                         for q in scored}  # gain <= 0: non-relevant, gain 0
            sub_run = {q: checked_run[q] for q in scored}
            for metric in _provider().iter_calc(list(parsed), sub_qrels, sub_run):
                value = float(metric.value)
                values[metric.measure][metric.query_id] = value if math.isfinite(value) else 0.0
        kept = answerable if no_relevant == "exclude" else topics
        for measure, texts in parsed.items():
            per_query = {q: values[measure].get(q, 0.0) for q in kept}
            for text in texts:
                results[text] = dict(per_query)
    return results


# ---------------------------------------------------------------- TREC files


def _check_token(kind: str, value: str, where: str) -> str:
    _check_id(kind, value, where)
    if any(ch.isspace() for ch in value):
        raise ValueError(f"{where}: {kind} {value!r} contains whitespace; TREC files "
                         "separate fields by whitespace")
    return value


def write_run(run: Mapping[str, Mapping[str, float]], path: str | Path,
              tag: str = "credrank") -> None:
    """Write a TREC run: ``qid Q0 docid rank score tag``, rank 1-based in :func:`ranked_docs`
    order, score written with ``repr`` so it reads back exactly. Queries with no documents
    have no line (TREC runs cannot hold them; :func:`evaluate` scores them 0 either way).
    """
    checked = validate_run(run)
    _check_token("tag", tag, "write_run")
    lines: list[str] = []
    for qid, scores in checked.items():
        _check_token("qid", qid, "run")
        for rank, docid in enumerate(ranked_docs(scores), start=1):
            _check_token("docid", docid, f"run[{qid!r}]")
            lines.append(f"{qid} Q0 {docid} {rank} {scores[docid]!r} {tag}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")


def _shown(text: str) -> str:
    """``repr(text)``, cut to 80 characters (a message never carries a whole binary line)."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "…"


def read_run(path: str | Path) -> Run:
    """Read a TREC run file (6 whitespace-separated fields per line; blank lines skipped; one
    run tag for the whole file).

    The file is read by :func:`credrank.core.structured.read_text` (UTF-8 with a UTF-8
    byte-order mark accepted, at most ``MAX_FILE_BYTES``, no NUL byte); a score must be a
    finite number. Errors are :class:`~credrank.core.errors.FileFormatError` (a
    ``ValueError``) naming ``file:line``."""
    run: Run = {}
    first_tag: tuple[str, int] | None = None
    text = read_text(path, what="TREC run", error=FileFormatError)
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise FileFormatError(f"{path}:{lineno}: expected 6 fields 'qid Q0 docid rank "
                                  f"score tag'; got {len(fields)}: {_shown(line)}")
        qid, _, docid, _, score_text, tag = fields
        first_tag = first_tag or (tag, lineno)
        if tag != first_tag[0]:
            raise FileFormatError(f"{path}:{lineno}: expected one run per file, the tag "
                                  f"{_shown(first_tag[0])} of line {first_tag[1]}; got the "
                                  f"tag {_shown(tag)} (two runs in one file would be scored "
                                  "as one)")
        try:
            score = float(score_text)
        except ValueError:
            raise FileFormatError(f"{path}:{lineno}: score {_shown(score_text)} is not a "
                                  "number") from None
        if not math.isfinite(score):
            raise FileFormatError(f"{path}:{lineno}: score {_shown(score_text)} is not finite")
        row = run.setdefault(qid, {})
        if docid in row:
            raise FileFormatError(f"{path}:{lineno}: docid {_shown(docid)} listed twice for "
                                  f"qid {_shown(qid)}")
        row[docid] = score
    return run


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> None:
    """Write TREC qrels: ``qid 0 docid gain``. Topics with no judged document have no line."""
    checked = validate_qrels(qrels)
    lines: list[str] = []
    for qid, judged in checked.items():
        _check_token("qid", qid, "qrels")
        for docid, gain in judged.items():
            _check_token("docid", docid, f"qrels[{qid!r}]")
            lines.append(f"{qid} 0 {docid} {gain}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")
