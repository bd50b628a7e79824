"""The engine's formula search as a stage: retrieval, prior, freshness, the learned credibility
stored at index time and the top-k cut in one query (the fusion
:func:`credrank.pipeline.compile.decide_pushdown` decides)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.errors import StageError
from credrank.core.pipeline import FormulaTerm, Stage
from credrank.core.validation import check_bounds, check_int
from credrank.index.store import (
    HIT_FIELDS,
    TEXT_FIELDS,
    FormulaScoring,
    FreshnessFormula,
    formula_unavailable,
)

if TYPE_CHECKING:  # a search without freshness does not import the freshness stage
    from credrank.signals.prior import PriorTable
    from credrank.stages.credibility import LearnedCredibilityPrior
    from credrank.stages.freshness import FreshnessDecay


class PushdownSearch(Stage):
    """Retrieve, weight by the type prior (and the freshness factor, and the learned
    credibility stored at index time) and cut to ``top_k`` inside the engine.

    Equivalent to ``DenseRetriever >> SourcePrior >> [LearnedCredibilityPrior] >>
    [FreshnessDecay] >> Combine("multiply") >> TopK`` (tests check it, ties aware); the
    ``prior``, ``credibility`` and ``freshness`` factors (and their facts in ``info``) are
    re-attached in Python for the score breakdown — the credibility from the same stored
    payload the engine read, the freshness with the same ``T`` the engine used. The retrieval
    score is recovered as engine score / (λ · c · w); where that product is 0 (a prior or
    undated weight of 0) it is reported as 0.

    ``hit_fields_only``: the engine returns only the payload a hit needs (:data:`HIT_FIELDS`,
    + text and cites with ``with_text``) instead of every ranking field — what
    :func:`~credrank.pipeline.compile.compile_search` asks when nothing after this stage but
    the top-k cut reads the batch (the other meta columns are then ``None``). Payload
    transfer and conversion cost about as much as the engine search itself (issue 15).

    Equal scores are ordered by document id, so that a search answers the same hits every
    time (the engine returns equal formula scores in no fixed order). The engine is asked for
    ``top_k + 1`` hits; only when the last one kept and the first one cut have the same score
    is it asked again for the whole pool (``fetch_k``), so that the cut falls by id too
    (:func:`_tie_ordered`).
    """

    name = "pushdown"
    combines = True

    def __init__(self, index: FormulaScoring, embedder: Embedder, priors: PriorTable,
                 fetch_k: int = 30, top_k: int = 10, *, with_vectors: bool = False,
                 with_text: bool = False, freshness: FreshnessDecay | None = None,
                 hit_fields_only: bool = False,
                 credibility: LearnedCredibilityPrior | None = None):
        why = formula_unavailable(index)
        if why is not None:
            raise ValueError(f"pushdown: the {_engine(index)} store {why}; search without "
                             "--pushdown")
        if freshness is not None:
            term = freshness.formula_term()
            if not isinstance(term, FormulaTerm):
                raise ValueError(f"pushdown: {term}; drop pushdown")
        if credibility is not None:
            term = credibility.formula_term()
            if not isinstance(term, FormulaTerm) or term.kind != "credibility":
                raise ValueError(f"pushdown: {term}; drop pushdown")
        self.index, self.embedder, self.priors = index, embedder, priors
        self.credibility: Any = credibility
        #: the credibility term (the model's key and floor), built once
        self.credibility_formula = None if credibility is None else credibility.formula
        self.fetch_k = check_int("fetch_k", fetch_k, 1)
        self.top_k = check_int("top_k", top_k, 1)
        self.with_vectors, self.with_text = with_vectors, with_text
        self.freshness = freshness
        #: the freshness term, built (τ and the undated weight checked) once here; each
        #: query only sets its ``T`` (:meth:`FreshnessFormula.at`)
        self.freshness_formula: FreshnessFormula | None = None
        if freshness is not None:
            fixed = freshness.now if isinstance(freshness.now, datetime) else None
            value = freshness.undated.value
            self.freshness_formula = FreshnessFormula(
                (fixed or datetime.now(UTC)).isoformat(), freshness.half_life,
                float(value) if value is not None else 0.0)
        self.hit_fields_only = bool(hit_fields_only)
        #: the payload fields asked of the engine (``None``: the store's default)
        self.fields: tuple[str, ...] | None = (
            (*HIT_FIELDS, *(TEXT_FIELDS if with_text else ()),
             *(() if self.credibility_formula is None else self.credibility_formula.fields))
            if self.hit_fields_only else None)

    def transform(self, batch: Candidates) -> Candidates:
        qv = (batch.query_vector if batch.query_vector is not None
              else self.embedder.embed([batch.query])[0])
        spec, now = None, None
        if self.freshness is not None and self.freshness_formula is not None:
            now = self.freshness.resolve_now(batch)  # read once: the engine's and ours
            spec = self.freshness_formula.at(now.isoformat())
        extra: dict[str, Any] = {} if self.fields is None else {"fields": self.fields}
        if self.credibility is not None:
            extra["credibility"] = self.credibility_formula
        def search(limit: int) -> Candidates:
            return _tie_ordered(self.index.search_formula(
                batch.query, qv, self.fetch_k, limit, self.priors.values,
                with_vectors=self.with_vectors, with_text=self.with_text, freshness=spec,
                **extra))

        k = self.top_k
        out = search(min(k + 1, self.fetch_k))
        if len(out) > k:
            if out.score[k - 1] == out.score[k]:  # a tie across the cut: rank the whole pool
                out = search(self.fetch_k)
            out = out.take(range(k))
        engine_score = out.retrieval_score
        prior = self.priors.lookup(out.column("source_type"))
        weight = prior
        factors = {"prior": prior}
        meta, info = out.meta, out.info
        if self.credibility is not None:  # the stored p the engine read, re-attached
            lam, p_credible, cred_info = self.credibility.pushed(out)
            factors[self.credibility.name] = lam
            weight = weight * lam
            meta = {**meta, "p_credible": np.asarray(list(p_credible), dtype=object)}
            info = {**info, "credibility_prior": cred_info}
        if self.freshness is not None and now is not None:
            out = self.freshness.apply(out, now)  # its counts: of the hits, not the pool
            out = out.with_info(**{self.freshness.name: {
                **out.info[self.freshness.name], "counted_over": "hits"}})
            name = self.freshness.name
            factors[name] = out.factors[name]
            weight = weight * factors[name]
            meta, info = {**out.meta, **meta}, {**out.info, **info}
        # retrieval score = cosine (engine score / (prior × credibility × freshness), exact
        # where > 0)
        safe = np.where(weight > 0, weight, 1.0)
        cosine_part = np.where(weight > 0, engine_score / safe, 0.0)
        for name, values in factors.items():
            check_bounds(f"factor {name!r}", np.asarray(values, dtype=np.float64), 0.0, 1.0,
                         error=StageError)
        # one batch, validated once (finite scores and factors) — not one copy per factor
        return Candidates(query=out.query, doc_ids=out.doc_ids, retrieval_score=cosine_part,
                          factors=factors, score=engine_score, meta=meta,
                          vectors=out.vectors, query_vector=out.query_vector, info=info)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k, "top_k": self.top_k, "priors": self.priors.as_dict(),
                **({} if self.fields is None else {"fields": list(self.fields)}),
                **({} if self.freshness is None
                   else {"freshness": self.freshness.describe()}),
                **({} if self.credibility is None
                   else {"credibility": self.credibility.describe()})}


def _engine(store: object) -> str:
    manifest = getattr(store, "manifest", None)
    return str(getattr(manifest, "engine", type(store).__name__))


def _tie_ordered(out: Candidates) -> Candidates:
    """``out`` by descending score, equal scores by document id (a fixed order: the engine's
    is none)."""
    order = sorted(range(len(out)), key=lambda i: (-float(out.score[i]), str(out.doc_ids[i])))
    return out if order == list(range(len(out))) else out.take(order)


__all__ = ["PushdownSearch"]
