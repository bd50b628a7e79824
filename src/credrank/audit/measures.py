"""What ``credrank audit`` measures on a retrieval run: one function per trust dimension (35.1).

Every function takes the audited system's ranked results (``{query_id: Candidates}``, the
output of a credrank pipeline) and returns a :class:`Measurement`: the value, its unit and
declared scale, the judge (who or what scored it), the denominator and a 95% interval. None of
them averages incomparable things; the audit keeps the six apart and checks hard gates on the
raw values. Definitions:

* **privacy** (:func:`privacy_leaks`) — personal data exposed by retrieval: the number of
  returned hits whose title, text or URL holds a personal identifier found by
  :func:`pii_findings` (e-mail address, phone number, US social security number, payment
  card number passing the Luhn check). Judge: regular expressions (high precision, limited
  recall: names, addresses and health details are not detected — a zero is not a proof of
  absence). Phone numbers are found in two forms only: the North American (NANP) layout
  ``555-123-4567``, ``(555) 123-4567``, ``555.123.4567`` or ``555 123 4567``, optionally
  after ``+1`` or ``1-``; and the international ``+`` form (``+44 20 7946 0958``: a ``+``,
  a country code, 8 to 15 digits in all, as E.164). National layouts of other countries
  (``030 1234567``) and the ``00`` prefix (``0049 30 1234567``) are not detected; a run of
  digits laid out as a NANP number is reported even when it is not one (``331 449 2810``),
  but never a part of a longer number (``1.234.567.8901``). Unit: hits; lower is better;
  the usual gate is ``== 0``.
* **fairness** (:func:`exposure_balance`) — do source groups get exposure in proportion to
  their merit? Position exposure ``v(k) = 1 / log2(k + 1)`` (as :mod:`credrank.select.exposure`)
  summed per group over the top k of every query, divided by the group's merit (the graded
  relevance of its documents in the expanded pool, from the qrels); the value is
  ``min_g / max_g`` of exposure per merit over groups with merit > 0 (1 = exposure exactly
  proportional to merit). Exposure per merit is 35.9's utility-proportional rule
  ``E_G / ū_G`` (average per-document exposure over average utility: the ``|G|`` cancels).
  Groups are the hits' ``source_type`` (provenance; a document without one is in the group
  ``unknown``). Fewer than two groups with merit: not measured. Interval: bootstrap over
  queries. The value is 0 whenever a group with merit gets no exposure in the top k: "a hard
  ranking gives zero displayed exposure below the cutoff" (35.9), so a credibility ranking
  that demotes a group with relevant documents (blogs, AI-generated pages) scores 0 here;
  the entry's denominator names those groups (``details.zero_exposure_groups``).
* **transparency** (:func:`explanation_coverage`) — the share of hits whose explanation is
  complete and faithful: provenance present (``host`` and ``source_type``) and, for the
  ``multiply`` combination, the score breakdown reproduces the final score
  (``max(retrieval, 0) × Π factors``, relative tolerance 1e-6). Wilson interval over hits.
* **accountability** (:func:`traceability`) — the share of hits that can be traced to a source
  and routed: a URL, a source identity (the explicit ``source_id`` given at indexing, else the
  ``host`` derived from the URL) and a content hash (the indexed version) recorded at
  indexing. Wilson interval over hits.
* **factuality** (:func:`harmful_share`) — harmful@k: the share of the top k that is labelled
  harmful (adversarial / misinformation), mean over queries, bootstrap interval over queries.
  It reads evaluation labels (by definition of the measure).

Division by zero: an empty run, or no hit at all, raises :class:`AuditMeasureError` naming
what was empty; nothing returns NaN.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.evaluate.metrics import harmful_at_k, ranked, run_from_batches
from credrank.evaluate.stats import bootstrap_ci, wilson


class AuditMeasureError(ValueError):
    """A measurement that cannot be made on the given run (empty, missing labels)."""


@dataclass(frozen=True)
class Measurement:
    """One dimension's measured value with everything needed to read it."""

    dimension: str
    metric: str
    value: float
    unit: str
    scale: tuple[float, float]
    higher_is_better: bool
    judge: str
    denominator: str
    interval: tuple[float, float] | None
    stages: tuple[str, ...]
    reads_labels: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        numbers = [self.value, *self.scale, *(self.interval or ())]
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in numbers):
            raise AuditMeasureError(f"{self.dimension}: non-finite number in {numbers}")


def _require(results: Mapping[str, Candidates], what: str) -> list[dict[str, Any]]:
    if not results:
        raise AuditMeasureError(f"{what}: the run has no query")
    hits = [h for batch in results.values() for h in batch.hits()]
    if not hits:
        raise AuditMeasureError(f"{what}: the run returned no hit for any of its "
                                f"{len(results)} queries")
    return hits


def _share(successes: int, n: int) -> tuple[float, tuple[float, float]]:
    lo, hi = wilson(successes, n)
    share = successes / n
    # Wilson's closed form can miss an end point by rounding (1 − 1e-16 at share 1)
    return share, (min(float(lo), share), max(float(hi), share))


# -- privacy ---------------------------------------------------------------------------------

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
#: a NANP phone number (module doc), never inside a longer number (``1.234.567.8901``)
_PHONE = re.compile(r"(?<![\w+])(?<!\d[.,-])(?:\+1[\s.-]?|1[\s-])?(?:\(\d{3}\)\s?|\d{3}[\s.-])"
                    r"\d{3}[\s.-]\d{4}(?!\w)(?![.,-]\d)")
#: an international number in the ``+`` form (module doc; its digits counted in
#: :func:`pii_findings`)
_PHONE_INTL = re.compile(r"(?<![\w+])\+[1-9]\d{0,2}(?:[\s.-]?\(?\d{1,4}\)?){2,6}(?!\w)")
#: E.164: at most 15 digits; fewer than 8 is not a phone number
_INTL_DIGITS = (8, 15)
_SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a payment card number (digits only)."""
    if not digits.isdigit() or not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _phones(text: str) -> list[str]:
    """The phone numbers of ``text`` in its order: NANP, then the international ``+`` form
    with 8 to 15 digits where no NANP number is (module doc)."""
    nanp = list(_PHONE.finditer(text))
    intl = [m for m in _PHONE_INTL.finditer(text)
            if _INTL_DIGITS[0] <= sum(ch.isdigit() for ch in m.group()) <= _INTL_DIGITS[1]
            and not any(m.start() < p.end() and p.start() < m.end() for p in nanp)]
    return [m.group() for m in sorted(nanp + intl, key=lambda m: m.start())]


def pii_findings(text: str) -> list[tuple[str, str]]:
    """``(kind, matched text)`` for every personal identifier found: ``email``, ``phone``,
    ``ssn``, ``card`` (Luhn-valid only), in order of kind then position."""
    found: list[tuple[str, str]] = []
    found += [("email", m.group()) for m in _EMAIL.finditer(text)]
    found += [("phone", number) for number in _phones(text)]
    found += [("ssn", m.group()) for m in _SSN.finditer(text)]
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if luhn_valid(digits):
            found.append(("card", m.group().strip()))
    return found


def privacy_leaks(results: Mapping[str, Candidates], texts: Mapping[str, str]) -> Measurement:
    """Privacy (35.1, retrieval stage): returned hits holding a personal identifier (module
    doc). ``texts``: document id → what the hit returns to a reader, its title, text and URL
    (every returned id must be there)."""
    hits = _require(results, "privacy")
    leaking: list[dict[str, Any]] = []
    for qid, batch in results.items():
        for hit in batch.hits():
            if hit["doc_id"] not in texts:
                raise AuditMeasureError(f"privacy: returned document {hit['doc_id']!r} (query "
                                        f"{qid!r}) has no text to scan")
            kinds = sorted({k for k, _ in pii_findings(texts[hit["doc_id"]])})
            if kinds:
                leaking.append({"query_id": qid, "doc_id": hit["doc_id"], "kinds": kinds})
    n = len(hits)
    share, (lo, hi) = _share(len(leaking), n)
    return Measurement(
        "privacy", "returned hits holding a personal identifier (e-mail, phone, SSN, "
        "Luhn-valid card number)", float(len(leaking)), "hits", (0.0, float(n)), False,
        "regular-expression PII detector (credrank.audit.measures.pii_findings)",
        f"{n} returned hits of {len(results)} queries", (lo * n, hi * n), ("retrieval",),
        details={"leaks": leaking, "share": share})


# -- fairness --------------------------------------------------------------------------------

def _exposure_per_merit(results: Mapping[str, Candidates], pools: Mapping[str, Candidates],
                        qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str]
                        ) -> dict[str, tuple[float, float]]:
    exposure: dict[str, float] = {}
    merit: dict[str, float] = {}
    for qid in qids:
        rel = qrels.get(qid, {})
        pool = pools[qid]
        types = pool.column("source_type")
        for i, doc in enumerate(pool.doc_ids):
            g = str(types[i]) if types[i] is not None else "unknown"
            merit[g] = merit.get(g, 0.0) + max(float(rel.get(str(doc), 0)), 0.0)
            exposure.setdefault(g, 0.0)
        top = results[qid]
        top_types = top.column("source_type")
        for k in range(len(top)):
            g = str(top_types[k]) if top_types[k] is not None else "unknown"
            exposure[g] = exposure.get(g, 0.0) + 1.0 / math.log2(k + 2)
            merit.setdefault(g, 0.0)
    return {g: (exposure[g], merit[g]) for g in exposure}


def _balance(per_group: Mapping[str, tuple[float, float]]) -> float | None:
    ratios = [e / m for e, m in per_group.values() if m > 0]
    if len(ratios) < 2 or max(ratios) <= 0:
        return None
    return min(ratios) / max(ratios)


def exposure_balance(results: Mapping[str, Candidates], pools: Mapping[str, Candidates],
                     qrels: Mapping[str, Mapping[str, int]], *, n_resamples: int = 2000,
                     seed: int = 0) -> Measurement | None:
    """Fairness (35.1, retrieval stage): ``min_g / max_g`` of exposure per merit over source
    groups (module doc); ``None`` when fewer than two groups have merit (not measured).
    ``pools``: each query's expanded candidate pool (the ``fetch_k`` the system reranked)."""
    _require(results, "fairness")
    qids = [q for q in results if q in pools]
    if missing := [q for q in results if q not in pools]:
        raise AuditMeasureError(f"fairness: no candidate pool for queries {missing[:5]}")
    per_group = _exposure_per_merit(results, pools, qrels, qids)
    value = _balance(per_group)
    if value is None:
        return None
    # each query's group totals once; a resample only adds them up
    by_query = {q: _exposure_per_merit(results, pools, qrels, [q]) for q in qids}
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_resamples):
        sample = [qids[i] for i in rng.integers(0, len(qids), len(qids))]
        counts: dict[str, tuple[float, float]] = {}
        for q in sample:
            for g, (e, m) in by_query[q].items():
                e0, m0 = counts.get(g, (0.0, 0.0))
                counts[g] = (e0 + e, m0 + m)
        b = _balance(counts)
        if b is not None:
            boot.append(b)
    interval = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))) \
        if boot else None
    if interval is not None:
        interval = (min(interval[0], value), max(interval[1], value))
    starved = zero_exposure_groups(per_group)
    return Measurement(
        "fairness", "min/max over source groups of exposure (1/log2(rank+1), top k) per "
        "unit of merit (graded relevance in the expanded pool)", float(value), "ratio",
        (0.0, 1.0), True, "qrels (relevance labels) and position exposure",
        f"{len(qids)} queries, {sum(1 for _, m in per_group.values() if m > 0)} source groups "
        "with merit" + _why_zero(starved), interval, ("retrieval",), reads_labels=True,
        details={"groups": {g: {"exposure": e, "merit": m} for g, (e, m) in
                            sorted(per_group.items())},
                 "zero_exposure_groups": starved,
                 "bootstrap": {"resamples": n_resamples, "seed": seed, "kept": len(boot)}})


def zero_exposure_groups(per_group: Mapping[str, tuple[float, float]]) -> list[str]:
    """The groups with merit and no exposure in the top k (each makes the balance 0)."""
    return sorted(g for g, (e, m) in per_group.items() if m > 0 and e == 0)


def _why_zero(starved: Sequence[str]) -> str:
    if not starved:
        return ""
    return (f"; {len(starved)} of them ({', '.join(starved)}) got no exposure in any top k, "
            "so the value is 0: a hard top-k ranking gives zero displayed exposure below the "
            "cutoff (35.9)")


# -- transparency ----------------------------------------------------------------------------

def faithful_breakdown(hit: Mapping[str, Any], mode: str = "multiply",
                       rel_tol: float = 1e-6) -> bool:
    """Whether a hit's ``score_breakdown`` reproduces its final score: for ``multiply``,
    ``max(retrieval, 0) × Π factors == final``; other modes: the breakdown is present."""
    b = hit.get("score_breakdown") or {}
    if "retrieval_score" not in b or "final" not in b:
        return False
    if mode != "multiply":
        return True
    product = max(float(b["retrieval_score"]), 0.0)
    for key, value in b.items():
        if key not in ("retrieval_score", "final"):
            product *= float(value)
    return math.isclose(product, float(b["final"]), rel_tol=rel_tol, abs_tol=1e-12)


def explanation_coverage(results: Mapping[str, Candidates], mode: str = "multiply"
                         ) -> Measurement:
    """Transparency (35.1, retrieval stage): share of hits with provenance and a faithful
    score breakdown (module doc)."""
    hits = _require(results, "transparency")
    ok = [h for h in hits if h.get("host") and h.get("source_type")
          and faithful_breakdown(h, mode)]
    share, interval = _share(len(ok), len(hits))
    return Measurement(
        "transparency", "share of returned hits with provenance (host, source type) and a "
        f"score breakdown that reproduces the final score ({mode})", share, "share",
        (0.0, 1.0), True, "structural check of every hit (credrank.audit.measures)",
        f"{len(hits)} returned hits of {len(results)} queries", interval, ("retrieval",),
        details={"complete": len(ok)})


# -- accountability --------------------------------------------------------------------------

def traceability(results: Mapping[str, Candidates], hashes: Mapping[str, str]) -> Measurement:
    """Accountability (35.1, retrieval and checking stages): share of hits with a URL, a source
    identity (``source_id``, else ``host``) and a content hash recorded at indexing (module
    doc). ``hashes``: doc id →
    content hash as stored (:meth:`VectorStore.existing_hashes`)."""
    hits = _require(results, "accountability")
    ok = [h for h in hits if h.get("url") and (h.get("source_id") or h.get("host"))
          and hashes.get(h["doc_id"])]
    share, interval = _share(len(ok), len(hits))
    return Measurement(
        "accountability", "share of returned hits traceable to a source and a version (URL, "
        "source id or host, and content hash recorded at indexing)", share, "share",
        (0.0, 1.0), True,
        "structural check of every hit (credrank.audit.measures)",
        f"{len(hits)} returned hits of {len(results)} queries", interval,
        ("retrieval", "checking"), details={"traceable": len(ok)})


# -- factuality ------------------------------------------------------------------------------

def _distinct(batch: Candidates) -> bool:
    """Whether each document is one row of ``batch`` (not the passages of ``unit:
    passage``)."""
    return len(set(map(str, batch.doc_ids))) == len(batch)


def _harmful_passages(results: Mapping[str, Candidates], bad: Mapping[str, set[str]], k: int
                      ) -> dict[str, float]:
    """harmful@k over hits that are passages (``unit: passage``: a document may hold several
    of the top k): the share of the top ``k`` passages, in their ranked order
    (:func:`~credrank.evaluate.metrics.ranked`), whose document is labelled harmful; the
    denominator ``k`` as
    :func:`~credrank.evaluate.metrics.harmful_at_k` declares it. With one hit per document it
    is that function's value."""
    out = {}
    for qid, batch in results.items():
        top = [str(d) for d in ranked(batch).doc_ids[:k]]
        out[qid] = sum(1 for d in top if d in bad[qid]) / k
    return out


def harmful_share(results: Mapping[str, Candidates], bad: Mapping[str, Iterable[str]], k: int,
                  *, seed: int = 0) -> Measurement:
    """Factuality (35.1, retrieval stage): harmful@k, mean over queries (module doc).

    Labels that name none of the audited queries (an empty file, a file of another query
    set) measure nothing: :class:`AuditMeasureError` (the dimension is not measured and a
    gate on it fails), never a harmful@k of 0."""
    _require(results, "factuality")
    if not any(bad.get(q) for q in results):
        shown = ", ".join(repr(q) for q in list(bad)[:3]) + (", …" if len(bad) > 3 else "")
        raise AuditMeasureError(
            "factuality: the harm labels name none of the audited queries "
            + (f"(their query ids: {shown})" if bad else "(the file holds no label)")
            + "; harmful@k would be 0 whatever the system returns")
    labelled = {q: set(bad.get(q, ())) for q in results}
    values = harmful_at_k(run_from_batches(results), labelled, k) if all(
        _distinct(b) for b in results.values()) else _harmful_passages(results, labelled, k)
    per_query = np.array([values[q] for q in results], dtype=np.float64)
    ci = bootstrap_ci(per_query, seed=seed)
    interval = (float(ci.low), float(ci.high)) if ci.defined else None
    return Measurement(
        "factuality", f"harmful@{k}: share of the top {k} labelled harmful (adversarial or "
        "misinformation), mean over queries", float(per_query.mean()), "share", (0.0, 1.0),
        False, "harm labels of the evaluation set", f"{len(per_query)} queries",
        interval, ("retrieval",), reads_labels=True,
        details={"per_query": {q: float(values[q]) for q in results}})
