"""Assemble a credibility-aware search pipeline from settings (used by the CLI and the demo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.consensus.stage import AnswerConsensus
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.errors import StageError
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.validation import check_bounds, check_int, check_probability
from credrank.credibility.modelfile import load_model
from credrank.credibility.stage import LearnedCredibilityPrior
from credrank.freshness.inherit import InheritedDates
from credrank.freshness.options import parse_freshness
from credrank.freshness.stage import FreshnessDecay
from credrank.index.retrieve import BM25Retriever, DenseRetriever, default_fetch_k
from credrank.index.store import (
    HIT_FIELDS,
    TEXT_FIELDS,
    FormulaScoring,
    FreshnessFormula,
    VectorStore,
    supports_formula,
)
from credrank.reliability.prior import ShrunkReliabilityPrior
from credrank.select.stages import build_selector
from credrank.select.topk import TopK
from credrank.signals.feedback import FeedbackPrior, FeedbackPriors
from credrank.signals.prior import PriorTable, SourcePrior, load_priors
from credrank.signals.stance import STAGE_SETTINGS as STANCE_SETTINGS
from credrank.signals.stance import StanceModelFile, stance_stage
from credrank.signals.stance import load_model as load_stance_model

#: the ``--consensus-param`` keys (:class:`~credrank.consensus.stage.AnswerConsensus`)
CONSENSUS_SETTINGS = ("threshold", "floor", "unanswered", "on_contested", "jaccard", "shingle")


@dataclass
class SearchSettings:
    """What a search does. ``fetch_k`` defaults to ``3 × top_k`` (seed 004's expanded pool).

    ``priors=None`` gives the similarity-only baseline over the same pool. ``pushdown=None``
    (auto) scores inside the engine whenever the settings and the store allow it (dense
    retrieval, type priors, ``multiply``, no extra signal stages, a store with the formula
    capability); ``True`` insists, ``False`` never does.

    ``with_text`` makes the retriever return each candidate's text (stages that read it, such
    as the learned credibility prior, need it; it costs payload transfer). ``credibility`` is
    the :class:`~credrank.credibility.stage.LearnedCredibilityPrior` of a model file (factor
    ``credibility``), applied after ``extra_stages``. ``stance`` (a ``credrank stance fit``
    model file, bound to the index's embedder when the pipeline is built, with
    ``stance_params``) adds the factor ``agreement`` for claim-style queries, and
    ``consensus`` (:class:`~credrank.consensus.stage.AnswerConsensus`) the factor
    ``consensus`` for question-style queries; both follow ``credibility``, whose factor they
    use as a vote weight.

    ``freshness`` (:class:`~credrank.freshness.stage.FreshnessDecay`, chapter 35.7) adds the
    factor ``freshness = 2^(−(T−t)/τ)`` after ``credibility`` (before stance and consensus, so
    an excluded undated candidate does not vote). It is pushed into the engine with the rest
    when :func:`freshness_pushdown_blocker` finds nothing against it (one half-life, a fixed
    or current ``T``, an undated policy with a stated constant); otherwise it needs the
    Python path.
    """

    top_k: int = 10
    fetch_k: int | None = None
    priors: str | PriorTable | None = "current"
    mode: str = "multiply"
    lexical: bool = False
    pushdown: bool | None = None
    use_domain_scores: bool = False
    with_vectors: bool = False
    with_text: bool = False
    credibility: LearnedCredibilityPrior | None = None
    stance: StanceModelFile | None = None
    stance_params: dict[str, Any] = field(default_factory=dict)
    consensus: AnswerConsensus | None = None
    freshness: FreshnessDecay | None = None
    extra_stages: list[Stage] = field(default_factory=list)
    selector: Stage | None = None

    def resolved_fetch_k(self) -> int:
        fetch_k = self.fetch_k if self.fetch_k is not None else default_fetch_k(self.top_k)
        if fetch_k < self.top_k:
            raise ValueError(f"fetch_k: expected an integer >= top_k ({self.top_k}), "
                             f"got {fetch_k}")
        return fetch_k

    def prior_table(self) -> PriorTable | None:
        if self.priors is None or isinstance(self.priors, PriorTable):
            return self.priors
        return load_priors(self.priors)


class PushdownSearch(Stage):
    """Retrieve, weight by the type prior (and the freshness factor) and cut to ``top_k``
    inside the engine.

    Equivalent to ``DenseRetriever >> SourcePrior >> [FreshnessDecay] >> Combine("multiply")
    >> TopK`` (tests check it, ties aware); the ``prior`` and ``freshness`` factors (and the
    freshness facts in ``info``) are re-attached in Python for the score breakdown, with the
    same ``T`` the engine used. The retrieval score is recovered as engine score / (λ · w);
    where ``λ · w`` is 0 (a prior or undated weight of 0) it is reported as 0.

    ``hit_fields_only``: the engine returns only the payload a hit needs (:data:`HIT_FIELDS`,
    + text and cites with ``with_text``) instead of every ranking field — what
    :func:`build_pipeline` asks when nothing after this stage but the top-k cut reads the
    batch (the other meta columns are then ``None``). Payload transfer and conversion cost
    about as much as the engine search itself (issue 15).
    """

    name = "pushdown"

    def __init__(self, index: FormulaScoring, embedder: Embedder, priors: PriorTable,
                 fetch_k: int = 30, top_k: int = 10, *, with_vectors: bool = False,
                 with_text: bool = False, freshness: FreshnessDecay | None = None,
                 hit_fields_only: bool = False):
        if not supports_formula(index):
            raise ValueError(f"pushdown: the {_engine(index)} store cannot score formulas in "
                             "its engine; search without --pushdown")
        if freshness is not None:
            blocker = freshness_pushdown_blocker(freshness)
            if blocker:
                raise ValueError(f"pushdown: --freshness {blocker}; drop --pushdown")
        self.index, self.embedder, self.priors = index, embedder, priors
        self.fetch_k = check_int("fetch_k", fetch_k, 1)
        self.top_k = check_int("top_k", top_k, 1)
        self.with_vectors, self.with_text = with_vectors, with_text
        self.freshness = freshness
        self.hit_fields_only = bool(hit_fields_only)
        #: the payload fields asked of the engine (``None``: the store's default)
        self.fields: tuple[str, ...] | None = (
            (*HIT_FIELDS, *(TEXT_FIELDS if with_text else ())) if self.hit_fields_only
            else None)

    def transform(self, batch: Candidates) -> Candidates:
        qv = self.embedder.embed([batch.query])[0]
        spec, fixed = None, None
        if self.freshness is not None:
            now = self.freshness.resolve_now(batch)  # read once: the engine's and ours
            value = self.freshness.undated.value
            spec = FreshnessFormula(now.isoformat(), self.freshness.half_life,
                                    float(value) if value is not None else 0.0)
            fixed = FreshnessDecay(self.freshness.half_life, now=now,
                                   undated=self.freshness.undated, name=self.freshness.name)
        out = self.index.search_formula(batch.query, qv, self.fetch_k, self.top_k,
                                        self.priors.values, with_vectors=self.with_vectors,
                                        with_text=self.with_text, freshness=spec,
                                        **({} if self.fields is None
                                           else {"fields": self.fields}))
        engine_score = out.retrieval_score
        prior = self.priors.lookup(out.column("source_type"))
        weight = prior
        if fixed is not None:
            out = fixed(out)
            weight = prior * out.factors[fixed.name]
        # retrieval score = cosine (engine score / (prior × freshness), exact where > 0)
        safe = np.where(weight > 0, weight, 1.0)
        cosine_part = np.where(weight > 0, engine_score / safe, 0.0)
        factors = {"prior": prior, **({} if fixed is None
                                      else {fixed.name: out.factors[fixed.name]})}
        for name, values in factors.items():
            check_bounds(f"factor {name!r}", np.asarray(values, dtype=np.float64), 0.0, 1.0,
                         error=StageError)
        # one batch, validated once (finite scores and factors) — not one copy per factor
        return Candidates(query=out.query, doc_ids=out.doc_ids, retrieval_score=cosine_part,
                          factors=factors, score=engine_score, meta=out.meta,
                          vectors=out.vectors, query_vector=out.query_vector, info=out.info)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k, "top_k": self.top_k, "priors": self.priors.as_dict(),
                **({} if self.fields is None else {"fields": list(self.fields)}),
                **({} if self.freshness is None
                   else {"freshness": self.freshness.describe()})}


def freshness_pushdown_blocker(stage: FreshnessDecay) -> str | None:
    """Why ``stage`` cannot be scored in the engine (``None``: it can).

    The rule: one half-life for every document (no config file: per-type/host/class τ and
    no-decay opt-outs read columns the engine formula does not), ``T`` fixed or the current
    time (a per-query function of the candidates needs them first), and an undated policy
    with a stated constant (``penalty:W`` or ``neutral:W``; ``neutral`` without a value is the
    median of the dated candidates and ``exclude`` drops rows before the cut — both depend on
    the pool, so they stay on the Python path)."""
    if not stage.single:
        return "with config=FILE (several half-lives or opt-outs) needs the Python path"
    if callable(stage.now):
        return "with a per-query evaluation time needs the Python path"
    if stage.undated.kind == "exclude":
        return "undated=exclude needs the Python path"
    if stage.undated.value is None:
        return ("undated=neutral (median of the dated candidates) needs the Python path; "
                "give neutral:W or penalty:W to score in the engine")
    if stage.lineage:
        return "lineage=cites (citation chains read from the index) needs the Python path"
    return None


def build_pipeline(index: VectorStore, embedder: Embedder, settings: SearchSettings
                   ) -> Pipeline:
    """``retriever >> [SourcePrior] >> extra stages >> Combine >> selector``.

    With ``pushdown`` the retrieval, prior and multiply happen inside the engine (type priors
    only, on a store with the formula capability; extra stages and other modes need the Python
    path). With the default top-k selection the engine also makes the cut: it scores the
    ``fetch_k`` prefetch and returns only the ``top_k`` best, with only the payload a hit needs
    (:data:`~credrank.index.store.HIT_FIELDS`); a selector (``mmr``, ``coverage``, …) chooses
    from the whole ``fetch_k`` pool with every ranking field, so it still gets them.
    """
    fetch_k = settings.resolved_fetch_k()
    priors = settings.prior_table()
    if settings.credibility is not None:
        model = settings.credibility.model
        check = getattr(model, "check_store", None)
        if callable(check):
            check(index)  # a model file fitted with another embedder is refused here
    with_text = settings.with_text or reads_text(settings)
    if use_pushdown(settings, index):
        cut = settings.selector is None  # TopK: the engine's top_k are the answer
        stages: list[Stage] = [PushdownSearch(index, embedder, priors, fetch_k,
                                              settings.top_k if cut else fetch_k,
                                              with_vectors=settings.with_vectors,
                                              with_text=with_text,
                                              freshness=settings.freshness,
                                              hit_fields_only=cut)]
        if cut:  # the engine's answer is the top_k, in rank order: nothing left to select
            return Pipeline(stages)
    else:
        retriever: Stage = (BM25Retriever(index, fetch_k, with_vectors=settings.with_vectors,
                                          with_text=with_text)
                            if settings.lexical else
                            DenseRetriever(index, embedder, fetch_k,
                                           with_vectors=settings.with_vectors,
                                           with_text=with_text))
        return Pipeline([retriever, *scoring_stages(settings, embedder, index)])
    stages.append(settings.selector or TopK(settings.top_k))
    return Pipeline(stages)


def reads_text(settings: SearchSettings) -> bool:
    """Whether a stage of ``settings`` reads the candidates' text (credibility, stance,
    consensus): the retriever must return it."""
    return (settings.credibility is not None or settings.stance is not None
            or settings.consensus is not None)


def scoring_stages(settings: SearchSettings, embedder: Embedder | None = None,
                   store: VectorStore | None = None) -> list[Stage]:
    """What follows retrieval on the Python path: ``[SourcePrior] >> extra stages >>
    [credibility] >> [lineage] >> [freshness] >> [stance agreement] >> [consensus] >> Combine
    >> selector``. ``credrank search`` and the reranker of candidates retrieved elsewhere
    (:mod:`credrank.rerank`) share it, so both rank a pool the same way. A stance model needs
    ``embedder`` (the index's); ``--freshness lineage=cites`` needs ``store`` (the index)."""
    priors = settings.prior_table()
    stages: list[Stage] = []
    if priors is not None:
        stages.append(SourcePrior(priors, use_domain_scores=settings.use_domain_scores))
    stages.extend(settings.extra_stages)
    if settings.credibility is not None:
        stages.append(settings.credibility)
    if settings.freshness is not None:
        if settings.freshness.lineage:
            if store is None:
                raise ValueError("--freshness lineage=cites: citation chains are read from an "
                                 "index; not available for candidates retrieved elsewhere")
            stages.append(InheritedDates(store))
        stages.append(settings.freshness)
    if settings.stance is not None:
        if embedder is None:
            raise ValueError("--stance-model: the stance stage needs the index's embedder")
        stages.append(stance_stage(settings.stance, embedder.name, embedder=embedder,
                                   **settings.stance_params))
    if settings.consensus is not None:
        stages.append(settings.consensus)
    stages.append(Combine(settings.mode))
    stages.append(settings.selector or TopK(settings.top_k))
    return stages


def search_document(query: str, settings: dict[str, Any], result: Candidates,
                    **extra: Any) -> dict[str, Any]:
    """The ``credrank search --json`` document (docs/json.md) for one query; ``extra`` keys
    (a batch's ``query_id``) are added at the top level."""
    return {"credrank_search": 1, **extra, "query": query, "settings": settings,
            "hits": result.hits(), "info": result.info}


def use_pushdown(settings: SearchSettings, store: object | None = None) -> bool:
    """Whether the engine scores this search (see :class:`SearchSettings`).

    With a ``store``, also whether it has the formula capability (``supports_formula``): auto
    falls back to the Python path where it has not, ``pushdown=True`` is an error there.
    """
    eligible = (settings.prior_table() is not None and settings.mode == "multiply"
                and not settings.lexical and not settings.extra_stages
                and not reads_text(settings) and not settings.use_domain_scores)
    if settings.pushdown and not eligible:
        raise ValueError("pushdown supports dense retrieval with type priors and the "
                         "'multiply' mode only; drop --pushdown for the other options")
    blocker = (freshness_pushdown_blocker(settings.freshness)
               if settings.freshness is not None else None)
    if settings.pushdown and blocker:
        raise ValueError(f"pushdown: --freshness {blocker}; drop --pushdown")
    eligible = eligible and blocker is None
    capable = store is None or supports_formula(store)
    if settings.pushdown and not capable:
        raise ValueError(f"pushdown: the {_engine(store)} store cannot score formulas in its "
                         "engine; drop --pushdown")
    return (eligible and capable) if settings.pushdown is None else settings.pushdown


def _engine(store: object) -> str:
    manifest = getattr(store, "manifest", None)
    return str(getattr(manifest, "engine", type(store).__name__))


def describe(settings: SearchSettings, store: object | None = None) -> dict[str, Any]:
    """The settings as JSON (``credrank search --json``); with ``store``, its engine too."""
    priors = settings.prior_table()
    out = {
        "top_k": settings.top_k, "fetch_k": settings.resolved_fetch_k(),
        "priors": priors.as_dict() if priors else None, "mode": settings.mode,
        "retrieval": "bm25" if settings.lexical else "dense",
        "pushdown": use_pushdown(settings, store),
    }
    if settings.credibility is not None:
        out["credibility"] = settings.credibility.config()
    if settings.stance is not None:
        out["stance"] = {"model": settings.stance.path,
                         "embedder": settings.stance.embedder_name, **settings.stance_params}
    if settings.consensus is not None:
        out["consensus"] = settings.consensus.config()
    if settings.freshness is not None:
        out["freshness"] = settings.freshness.config()
    if store is not None:
        out["engine"] = _engine(store)
    return out


def search_settings(*, top_k: int = 10, fetch_k: int | None = None, priors: str = "current",
                    mode: str = "multiply", lexical: bool = False, pushdown: bool | None = None,
                    domain_scores: bool = False, priors_store: Path | None = None,
                    source_reliability: Path | None = None, select: str | None = None,
                    select_params: dict[str, Any] | None = None,
                    credibility_model: Path | str | None = None,
                    credibility_floor: float | None = None,
                    stance_model: Path | str | None = None,
                    stance_params: dict[str, Any] | None = None, consensus: bool = False,
                    consensus_params: dict[str, Any] | None = None,
                    freshness: str | None = None) -> SearchSettings:
    """Settings from the options of ``credrank search`` (and the service), validated.

    ``priors="none"`` is the similarity-only baseline; ``priors_store`` uses the current version
    of a feedback store (``credrank priors``) and ``source_reliability`` the ``--json`` output of
    ``credrank reliability estimate`` shrunk toward the type prior — both replace the type prior
    and need the Python path; ``select`` names a selector (``mmr``, ``coverage``, ``exposure``,
    ``fair``) with its ``select_params``. ``credibility_model`` (a ``credrank credibility fit``
    model file) adds the factor ``credibility`` ``λ = floor + (1 − floor) · P(credible)``, with
    ``credibility_floor`` (default: the model file's ``floor``), on the Python path with the
    candidates' text. ``stance_model`` (a ``credrank stance fit`` model file) adds the factor
    ``agreement`` with ``stance_params`` (``floor``, ``sharpness``, ``mode``, ``exclude_self``,
    ``voters``, ``weight_factor``); ``consensus`` adds the factor ``consensus`` with
    ``consensus_params`` (``threshold``, ``floor``, ``unanswered``, ``on_contested``,
    ``jaccard``, ``shingle``). ``freshness`` (the ``--freshness`` string,
    :func:`~credrank.freshness.options.parse_freshness`) adds the factor ``freshness``
    (chapter 35.7), in the engine where :func:`freshness_pushdown_blocker` allows. Raises
    ``ValueError`` naming the conflicting options.
    """
    settings = SearchSettings(top_k=top_k, fetch_k=fetch_k,
                              priors=None if priors == "none" else priors, mode=mode,
                              lexical=lexical, pushdown=pushdown,
                              use_domain_scores=domain_scores)
    if priors_store is not None:
        if not (Path(priors_store) / "priors.json").is_file():
            raise ValueError(f"{priors_store}: no feedback store here "
                             "(create one with `credrank priors init DIR`)")
        if pushdown:
            raise ValueError("--priors-store needs the Python path; drop --pushdown")
        settings.priors, settings.pushdown = None, False
        settings.extra_stages = [FeedbackPrior(FeedbackPriors(priors_store))]
    if source_reliability is not None:
        if pushdown or priors_store is not None:
            raise ValueError("--source-reliability needs the Python path and replaces "
                             "--priors-store; drop --pushdown / --priors-store")
        table = settings.prior_table()
        settings.extra_stages = [ShrunkReliabilityPrior.from_estimate_json(
            str(source_reliability), table.values if table else {})]
        settings.priors, settings.pushdown = None, False
    if select:
        settings.selector = build_selector(select, top_k, **(select_params or {}))
        settings.with_vectors = True
    if credibility_floor is not None and credibility_model is None:
        raise ValueError("--credibility-floor: only with --credibility-model")
    if credibility_model is not None:
        if pushdown:
            raise ValueError("--credibility-model needs the Python path (it reads each "
                             "candidate's text); drop --pushdown")
        saved = load_model(credibility_model)
        floor = saved.floor if credibility_floor is None else check_probability(
            "--credibility-floor", credibility_floor)
        settings.credibility = LearnedCredibilityPrior(saved, name="credibility", floor=floor)
        settings.with_text, settings.pushdown = True, False
    if stance_params and stance_model is None:
        raise ValueError("--stance-param: only with --stance-model")
    if stance_model is not None:
        if pushdown:
            raise ValueError("--stance-model needs the Python path (it reads each candidate's "
                             "text); drop --pushdown")
        params = dict(stance_params or {})
        unknown = sorted(set(params) - set(STANCE_SETTINGS) - {"name"})
        if unknown:
            raise ValueError(f"--stance-param: unknown key(s) {', '.join(unknown)}; expected "
                             f"some of {', '.join(s for s in STANCE_SETTINGS if s != 'name')}")
        settings.stance, settings.stance_params = load_stance_model(stance_model), params
        settings.with_text, settings.pushdown = True, False
    if consensus_params and not consensus:
        raise ValueError("--consensus-param: only with --consensus")
    if consensus:
        if pushdown:
            raise ValueError("--consensus needs the Python path (it reads each candidate's "
                             "answer); drop --pushdown")
        params = dict(consensus_params or {})
        unknown = sorted(set(params) - set(CONSENSUS_SETTINGS))
        if unknown:
            raise ValueError(f"--consensus-param: unknown key(s) {', '.join(unknown)}; "
                             f"expected some of {', '.join(CONSENSUS_SETTINGS)}")
        settings.consensus = AnswerConsensus(**params)
        settings.with_text, settings.pushdown = True, False
    if freshness is not None:
        settings.freshness = parse_freshness(freshness)
        blocker = freshness_pushdown_blocker(settings.freshness)
        if blocker:
            if pushdown:
                raise ValueError(f"--freshness {blocker}; drop --pushdown")
            settings.pushdown = False if settings.pushdown is None else settings.pushdown
    settings.resolved_fetch_k()
    settings.priors = settings.prior_table()  # loaded and validated once, not per query
    return settings
