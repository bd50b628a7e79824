"""The declared prerequisite table and the feasibility check of ``credrank advise`` (35.6).

Chapter 35.6 ("Choosing among the three"): *use resource checks to form a feasible candidate
set* — source identities and calibration coverage for RA-RAG; credible annotations, training
and credibility-annotated inference inputs for CAG; a document scorer, labelled misinformation
calibration (with a separate validation set) and attention access for CrAM. Missing inputs
cannot be repaired by choosing a method's largest headline number, so the advice is never a
ranking: feasible methods are listed in :data:`METHODS`' fixed order, each with what to
validate and its cost arithmetic, and a held-out, matched evaluation chooses among them
(Figure 35.6). When no credibility method is feasible for a pool, the advice is the branch
:data:`DEFER` — "prerequisites missing: obtain evidence, restrict scope or defer" — never CrAM
as an unconditional residual leaf.

Declared policies:

* Every method's prerequisites are checked independently (a candidate *set*, 35.6), not
  short-circuited down Figure 35.6's yes/no chain: the methods may compose, and a feasible
  RA-RAG does not remove CAG or CrAM from the set.
* A prerequisite is a profile flag that must be true or a count with a stated minimum. The
  profile's numbers only feed the cost arithmetic otherwise.
* Freshness (35.7) is a *separate requirement* ("evaluate freshness, intent coverage and
  exposure as separate requirements", 35.6 interview trap 5): it is reported per pool, but a
  feasible freshness decay does not keep a pool out of the :data:`DEFER` branch.
* Composition is not free calibration (35.6): RA-RAG's agreement rates are not a CrAM document
  scorer, so ``document_scorer`` is its own prerequisite, never implied by another method.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Literal

from credrank.advise.arithmetic import (
    cram_calibration_passes,
    cram_calibration_seconds,
    head_fraction,
    ra_rag_calibration_answers,
    unselected_head_fraction,
)
from credrank.advise.pools import COUNT_KEYS, FLAG_KEYS, Pool, Profile
from credrank.core.schema import INT_LIMIT

__all__ = [
    "DEFER",
    "METHODS",
    "NOT_A_RANKING",
    "Cost",
    "Method",
    "MethodAdvice",
    "Missing",
    "PoolAdvice",
    "Prerequisite",
    "advice_document",
    "advise_pool",
    "advise_profile",
    "decimal_text",
]

#: the branch when no credibility method is feasible for a pool (35.6)
DEFER = "prerequisites missing: obtain evidence, restrict scope or defer"

#: printed with every candidate set (Figure 35.6)
NOT_A_RANKING = ("feasibility is not a ranking: the candidates are listed in a fixed order, and "
                 "a held-out, matched evaluation chooses among them")


@dataclass(frozen=True)
class Prerequisite:
    """A profile key a method needs: a flag that must be true (``minimum is None``) or a count
    that must be at least ``minimum``."""

    key: str
    minimum: int | None = None

    @property
    def what(self) -> str:
        return FLAG_KEYS.get(self.key) or COUNT_KEYS[self.key]

    @property
    def needs(self) -> str:
        return "true" if self.minimum is None else f"≥ {self.minimum:,}"

    def met(self, pool: Pool) -> bool:
        value = getattr(pool, self.key)
        return bool(value) if self.minimum is None else value >= self.minimum


@dataclass(frozen=True)
class Method:
    """One row of the declared table: a chapter-35 method credrank knows, its section, its
    prerequisites, where credrank implements it, and what to validate once it is feasible."""

    id: str
    name: str
    section: str
    kind: Literal["credibility", "separate"]
    prerequisites: tuple[Prerequisite, ...]
    credrank: str
    validate: str


P = Prerequisite

#: The declared prerequisite table, in its fixed output order (chapter section order).
METHODS: tuple[Method, ...] = (
    Method("source_type_priors", "source-type priors", "seed 004; 35.2 operating rules",
           "credibility", (P("provenance"),),
           "credrank search --priors (credrank.signals.prior)",
           "the prior values are domain assumptions (the packaged ones are for health): validate "
           "them on this pool's domain"),
    Method("learned_page_credibility", "learned page credibility", "35.2 operating rules",
           "credibility", (P("labelled_pages", 1),),
           "credrank credibility fit / search --credibility-model (credrank.credibility)",
           "labels say what the labeller calls credible, not whether claims are true; the "
           "grouped cross-validation needs at least 3 topic/host groups and both classes"),
    Method("ra_rag", "RA-RAG source reliability (cross-source agreement)", "35.3, 35.6",
           "credibility",
           (P("stable_source_ids"), P("sources", 2), P("calibration_questions", 1)),
           "credrank reliability estimate / search --source-reliability (credrank.reliability)",
           "validate dependence and costs: identity quality, copying and source dependence; "
           "agreement on covered questions is not independently verified reliability"),
    Method("cag", "CAG credibility-annotated generation", "35.4, 35.6", "credibility",
           (P("credible_annotations"), P("inference_annotations"), P("training_resources")),
           "credrank context --format cag gives the annotated inference input; the fine-tuning "
           "is outside credrank",
           "validate labels and generalization: map the annotations to the actual credibility "
           "task, including the inference inputs; prompting with labels only is the matched "
           "control, not CAG"),
    Method("cram", "CrAM attention reweighting", "35.5, 35.6", "credibility",
           (P("document_scorer"), P("misinformation_examples", 1), P("validation_examples", 1),
            P("attention_access")),
           "credrank cram calibrate (head selection on calibration examples) and credrank "
           "cram answer (credrank.cram: reweighted attention inside a white-box transformers "
           "generator)",
           "validate intervention and regressions: clean quality, shifted attacks and latency; "
           "a scorer's correctness is not established by a deadline"),
    Method("freshness", "freshness decay", "35.7", "separate", (P("dates"),),
           "credrank search --freshness (credrank.freshness)",
           "date the evidence, not the wrapper: follow citation chains (credrank provenance "
           "audit)"),
)
del P


@dataclass(frozen=True)
class Missing:
    """A prerequisite a pool lacks: what it needs, what the profile has, whether it was stated
    (unstated keys default to absent)."""

    key: str
    what: str
    needs: str
    has: Any
    stated: bool


def decimal_text(value: float, places: int = 6, trim: bool = False) -> str:
    """``value`` with ``places`` decimals and thousands separators (``trim``: without trailing
    zeros), or in 6 significant digits where it is not 0 and below 0.001 (``2.1e-08``: a
    positive cost never prints as ``0``) or 1e15 and more (``8.50706e+28``: no decimals a
    float does not hold)."""
    if value != 0 and not 1e-3 <= abs(value) < 1e15:
        return f"{value:.6g}"
    text = f"{value:,.{places}f}"
    return text.rstrip("0").rstrip(".") if trim and "." in text else text


def _count(name: str, formula: str, value: int, unit: str, note: str) -> Cost:
    """A cost that is a count: its ``value``, or ``None`` where it is 2**63 or more (the
    overflow policy: a count beyond a 64-bit integer is a number JSON readers do not keep
    exactly, so the exact value is written in the ``note`` instead)."""
    if value < INT_LIMIT:
        return Cost(name, formula, value, unit, note)
    exact = (f"{value:,} {unit}: 2**63 or more, beyond a 64-bit integer, so the value is null "
             "(JSON readers would not keep it exactly) and the exact number is written here")
    return Cost(name, formula, None, unit, f"{exact}; {note}" if note else exact)


@dataclass(frozen=True)
class Cost:
    """One line of cost arithmetic from the profile's numbers. ``value`` is ``None`` when a
    number it needs is not stated, when a float exceeds the largest 64-bit float, or when a
    count reaches 2**63 (``note`` says which, with the exact count)."""

    name: str
    formula: str
    value: int | float | None
    unit: str
    note: str = ""


@dataclass(frozen=True)
class MethodAdvice:
    method: Method
    feasible: bool
    missing: tuple[Missing, ...]
    costs: tuple[Cost, ...]


@dataclass(frozen=True)
class PoolAdvice:
    """One pool's advice: every method of :data:`METHODS` in its order, and the branch
    (``"candidates"`` or :data:`DEFER`)."""

    pool: Pool
    methods: tuple[MethodAdvice, ...]

    @property
    def feasible(self) -> tuple[str, ...]:
        """Feasible credibility methods' ids, in table order."""
        return tuple(m.method.id for m in self.methods
                     if m.feasible and m.method.kind == "credibility")

    @property
    def branch(self) -> str:
        return "candidates" if self.feasible else DEFER


def _ra_rag_costs(pool: Pool) -> tuple[Cost, ...]:
    s, q = pool.sources, pool.calibration_questions
    return (_count("calibration answers", f"sources × questions = {s:,} × {q:,}",
                   ra_rag_calibration_answers(s, q), "source-query answers",
                   "up to; before scoring and vote-weight iteration"),)


def _cram_costs(pool: Pool) -> tuple[Cost, ...]:
    n, heads, spp = pool.misinformation_examples, pool.heads, pool.seconds_per_pass
    omitted = ("validation, head-count search, scoring, setup and integration are not "
               "counted")
    if heads is None:
        return (Cost("head-modified passes", "examples × heads", None, "passes",
                     "state 'heads' in the profile to compute"),)
    costs = []
    for baselines in (False, True):
        passes = cram_calibration_passes(n, heads, baselines)
        label = "passes with baselines" if baselines else "head-modified passes"
        formula = (f"examples × heads + examples = {n:,} × {heads:,} + {n:,}" if baselines
                   else f"examples × heads = {n:,} × {heads:,}")
        costs.append(_count(label, formula, passes, "passes",
                            "one reused unmodified pass per example" if baselines else omitted))
        if spp is None:
            costs.append(Cost(f"serial time ({label})", "passes × seconds_per_pass", None, "s",
                              "state 'seconds_per_pass' in the profile to compute"))
        else:
            seconds = cram_calibration_seconds(passes, spp)
            if not math.isfinite(seconds):  # a stated 1e308 s a pass: no number to give
                costs.append(Cost(
                    f"serial time ({label})", f"{passes:,} × {spp:g} s", None, "s",
                    f"more than {sys.float_info.max:.4g} s: the product exceeds the largest "
                    "64-bit float, so it is not computed; state smaller numbers in the profile"))
                continue
            costs.append(Cost(f"serial time ({label})", f"{passes:,} × {spp:g} s", seconds, "s",
                              f"{decimal_text(seconds / 60)} min of serial single-example "
                              "service time; not a hardware benchmark"))
    if pool.selected_heads is not None:
        for sel in sorted(set(pool.selected_heads)):
            frac = head_fraction(sel, heads)
            costs.append(Cost(f"heads changed ({sel:,} selected)", f"{sel:,} / {heads:,}", frac,
                              "fraction of heads",
                              f"{decimal_text(100 * frac)}% changed, "
                              f"{decimal_text(100 * unselected_head_fraction(sel, heads))}% "
                              "unselected; "
                              "heads, not FLOPs or behaviour"))
    return tuple(costs)


def _costs(method: Method, pool: Pool) -> tuple[Cost, ...]:
    if method.id == "ra_rag":
        return _ra_rag_costs(pool)
    if method.id == "cram":
        return _cram_costs(pool)
    if method.id == "cag":
        return (Cost("annotation and training", "no count in the chapter", None, "",
                     "annotation, teacher generation, fine-tuning, validation and inference "
                     "inputs"),)
    return ()


def advise_pool(pool: Pool) -> PoolAdvice:
    """Check every method of :data:`METHODS` against one pool (35.6): feasible methods get
    their cost arithmetic, infeasible ones the prerequisites they miss."""
    out = []
    for method in METHODS:
        missing = tuple(
            Missing(p.key, p.what, p.needs, getattr(pool, p.key), p.key in pool.stated)
            for p in method.prerequisites if not p.met(pool))
        feasible = not missing
        out.append(MethodAdvice(method, feasible, missing,
                                _costs(method, pool) if feasible else ()))
    return PoolAdvice(pool, tuple(out))


def advise_profile(profile: Profile) -> tuple[PoolAdvice, ...]:
    """:func:`advise_pool` for each pool, in the profile's order."""
    return tuple(advise_pool(pool) for pool in profile.pools)


def _method_json(advice: MethodAdvice) -> dict[str, Any]:
    m = advice.method
    return {
        "id": m.id, "name": m.name, "section": m.section, "kind": m.kind,
        "feasible": advice.feasible,
        "prerequisites": [{"key": p.key, "needs": p.needs, "what": p.what}
                          for p in m.prerequisites],
        "missing": [{"key": x.key, "what": x.what, "needs": x.needs, "has": x.has,
                     "stated": x.stated} for x in advice.missing],
        "costs": [{"name": c.name, "formula": c.formula, "value": c.value, "unit": c.unit,
                   "note": c.note} for c in advice.costs],
        "credrank": m.credrank,
        "validate": m.validate,
    }


def advice_document(profile: Profile, advice: tuple[PoolAdvice, ...]) -> dict[str, Any]:
    """The ``--json`` document: plain data, marker ``"credrank_advise": 1``."""
    return {
        "credrank_advise": 1,
        "profile": {"source": profile.source, "name": profile.name,
                    "description": profile.description},
        "note": NOT_A_RANKING,
        "pools": [{
            "name": a.pool.name,
            "description": a.pool.description,
            "branch": a.branch,
            "feasible": list(a.feasible),
            "methods": [_method_json(m) for m in a.methods],
        } for a in advice],
    }
