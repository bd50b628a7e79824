"""Assemble a credibility-aware search pipeline from settings (used by the CLI and the demo)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import DEFAULT_TEXT, SNIPPET_CHARS, check_text
from credrank.core.pipeline import BuildContext, FormulaTerm, Pipeline, Stage
from credrank.index.retrieve import default_fetch_k
from credrank.index.store import VectorStore
from credrank.pipeline.catalog import entry
from credrank.pipeline.compile import (
    Compiled,
    PushdownError,
    build_error,
    compile_search,
    compile_spec,
    context,
    decide_pushdown,
)
from credrank.pipeline.options import OPTION_OF, in_words, spec_from_options
from credrank.pipeline.pushdown import PushdownSearch as PushdownSearch  # re-exported
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.signals.prior import PriorTable, SourcePrior, load_priors

if TYPE_CHECKING:  # the signal stages are imported where a search uses them (a plain search
    # pays for neither consensus, credibility, freshness, stance nor the selectors)
    from credrank.consensus.stage import AnswerConsensus
    from credrank.credibility.stage import LearnedCredibilityPrior
    from credrank.freshness.stage import FreshnessDecay
    from credrank.signals.stance import StanceModelFile


def _is(stage: object, target: str) -> bool:
    """``isinstance(stage, cls)`` for ``target = "module:Class"`` without importing the
    module: an instance of a class whose module was never imported cannot exist."""
    module, name = target.split(":")
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(stage, getattr(loaded, name))


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
    #: the spec these settings were made from (:func:`settings_from_spec`), echoed by
    #: :func:`describe` under ``pipeline``; ``None`` for settings built in code
    spec: PipelineSpec | None = None

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


def freshness_pushdown_blocker(stage: FreshnessDecay) -> str | None:
    """Why ``stage`` cannot be scored in the engine (``None``: it can) — its own answer,
    :meth:`~credrank.freshness.stage.FreshnessDecay.formula_term`: one half-life for every
    document, ``T`` fixed or the current time, an undated policy with a stated constant, no
    citation chains."""
    term = stage.formula_term()
    return None if isinstance(term, FormulaTerm) else term


def build_pipeline(index: VectorStore, embedder: Embedder,
                   settings: SearchSettings | PipelineSpec) -> Pipeline:
    """``retriever >> [SourcePrior] >> extra stages >> Combine >> selector`` — or the engine's
    formula search where :func:`credrank.pipeline.compile.decide_pushdown` (the one place
    that decides it) fuses them: type priors, a one-half-life freshness factor, ``multiply``,
    and with the default top-k the cut itself, with only the payload a hit needs; a selector
    (``mmr``, ``coverage``, …) chooses from the whole ``fetch_k`` pool after it.

    ``settings`` is a :class:`SearchSettings` (the options of ``credrank search``) or a
    :class:`~credrank.pipeline.spec.PipelineSpec`.
    """
    if isinstance(settings, PipelineSpec):
        return compile_spec(settings, index, embedder).pipeline
    fetch_k = settings.resolved_fetch_k()
    if settings.credibility is not None:
        model = settings.credibility.model
        check = getattr(model, "check_store", None)
        if callable(check):
            check(index)  # a model file fitted with another embedder is refused here
    stages = scoring_stages(settings, embedder, index)
    try:
        return compile_search(stages, index, embedder, fetch_k=fetch_k, top_k=settings.top_k,
                              retrieval="bm25" if settings.lexical else "dense",
                              pushdown=settings.pushdown, where=_flags(settings),
                              with_vectors=settings.with_vectors, with_text=settings.with_text)
    except PushdownError as exc:
        raise ValueError(_pushdown_message(exc)) from None


def _flags(settings: SearchSettings) -> list[str]:
    """The option behind each stage of :func:`scoring_stages` (errors speak the CLI's words)."""
    out = ["--priors"] if settings.priors is not None else []
    out += ["--priors-store/--source-reliability"] * len(settings.extra_stages)
    out += ["--credibility-model"] if settings.credibility is not None else []
    if settings.freshness is not None:
        out += ["--freshness"] * (2 if settings.freshness.lineage else 1)
    out += ["--stance-model"] if settings.stance is not None else []
    out += ["--consensus"] if settings.consensus is not None else []
    return [*out, "--mode", "--select"]


def _pushdown_message(exc: PushdownError) -> str:
    return (f"pushdown supports dense retrieval with type priors, a one-half-life freshness "
            f"and the 'multiply' mode only: {exc.where} {exc.reason}; drop --pushdown")


def reads_text(settings: SearchSettings) -> bool:
    """Whether a stage of ``settings`` reads the candidates' text (credibility, stance,
    consensus): the retriever must return it."""
    return (settings.credibility is not None or settings.stance is not None
            or settings.consensus is not None)


class _Unbuilt(Stage):
    """A stage that is not built (it needs the index's embedder or store): enough to decide
    pushdown and what to retrieve, never run."""

    def __init__(self, name: str, reads: frozenset[str]) -> None:
        self.name, self._reads = name, reads

    @property
    def reads(self) -> frozenset[str]:  # type: ignore[override]
        return self._reads

    def transform(self, batch: Candidates) -> Candidates:  # pragma: no cover - never run
        raise RuntimeError(f"the {self.name!r} stage was not built")


def scoring_stages(settings: SearchSettings, embedder: Embedder | None = None,
                   store: VectorStore | None = None, *, deciding: bool = False
                   ) -> list[Stage]:
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
            if store is None and not deciding:
                raise ValueError("--freshness lineage=cites: citation chains are read from an "
                                 "index; not available for candidates retrieved elsewhere")
            if store is None:
                stages.append(_Unbuilt("lineage", frozenset()))
            else:
                from credrank.freshness.inherit import InheritedDates  # lineage=cites only

                stages.append(InheritedDates(store))
        stages.append(settings.freshness)
    if settings.stance is not None:
        if embedder is None and not deciding:
            raise ValueError("--stance-model: the stance stage needs the index's embedder")
        if embedder is None:
            stages.append(_Unbuilt("agreement", frozenset({"text"})))
        else:
            from credrank.signals.stance import stance_stage  # with a stance model only

            stages.append(stance_stage(settings.stance, embedder.name, embedder=embedder,
                                       **settings.stance_params))
    if settings.consensus is not None:
        consensus = settings.consensus
        if consensus.text_store is None and callable(getattr(store, "read_payloads", None)):
            import copy  # the caller's stage stays as it is

            consensus = copy.copy(consensus)
            consensus.text_store = store  # the text of the candidates it reads, from the index
        stages.append(consensus)
    from credrank.combine import Combine
    from credrank.select.topk import TopK

    stages.append(Combine(settings.mode))
    stages.append(settings.selector or TopK(settings.top_k))
    return stages


def text_settings(text: str) -> dict[str, Any]:
    """What a document's ``settings`` say of the hits' text: ``text`` (``full``,
    ``snippet`` or ``none``) and, for snippets, ``snippet_chars``."""
    text = check_text(text)
    return {"text": text, **({"snippet_chars": SNIPPET_CHARS} if text == "snippet" else {})}


def search_document(query: str, settings: dict[str, Any], result: Candidates, *,
                    text: str = DEFAULT_TEXT, **extra: Any) -> dict[str, Any]:
    """The ``credrank search --json`` document (docs/json.md) for one query; ``extra`` keys
    (a batch's ``query_id``) are added at the top level. Each hit carries ``text`` as
    ``text`` says (:meth:`Candidates.hits`; ``settings.text`` records it)."""
    settings = {**settings, **text_settings(text)}
    pipeline = settings.pop("pipeline", None)
    doc = {"credrank_search": 1, **extra, "query": query, "settings": settings,
           "hits": result.hits(text), "info": result.info}
    if pipeline is not None:  # the spec it ran: feeding it back reproduces the run
        doc["pipeline"] = pipeline
    return doc


def use_pushdown(settings: SearchSettings, store: object | None = None) -> bool:
    """Whether the engine scores this search (:func:`credrank.pipeline.compile.decide_pushdown`
    over the stages of ``settings``; with a ``store``, also whether it has the formula
    capability). ``pushdown=True`` where it cannot is a ``ValueError`` naming the option."""
    try:
        return decide_pushdown(scoring_stages(settings, deciding=True),
                               retrieval="bm25" if settings.lexical else "dense",
                               store=store, requested=settings.pushdown,
                               where=_flags(settings)).fused
    except PushdownError as exc:
        raise ValueError(_pushdown_message(exc)) from None


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
    if settings.spec is not None:
        out["pipeline"] = settings.spec.to_dict()
    return out


def describe_compiled(compiled: Compiled, store: object | None = None) -> dict[str, Any]:
    """:func:`describe` for a compiled spec: the same keys, from the built stages, and the
    spec itself under ``pipeline`` (feeding it back reproduces the run)."""
    spec = compiled.spec
    out: dict[str, Any] = {"top_k": spec.top_k, "fetch_k": spec.resolved_fetch_k,
                           "priors": None, "mode": "multiply", "retrieval": spec.retrieval,
                           "pushdown": compiled.pushdown.fused}
    for stage in _flat(compiled.stages):
        if isinstance(stage, SourcePrior):
            out["priors"] = stage.priors.as_dict()
        elif _is(stage, "credrank.signals.feedback:FeedbackPrior"):
            out["priors"] = _feedback_priors(stage)
        elif _is(stage, "credrank.combine:Combine"):
            out["mode"] = stage.mode  # type: ignore[attr-defined]
        elif _is(stage, "credrank.credibility.stage:LearnedCredibilityPrior"):
            out["credibility"] = stage.config()  # type: ignore[attr-defined]
        elif _is(stage, "credrank.signals.stance:StanceAgreement"):
            params = dict(spec.stage("stance").params)  # type: ignore[union-attr]
            out["stance"] = {"model": stage.source.get("path"),
                             "embedder": stage.source.get("embedder"),
                             **{k: v for k, v in params.items() if k != "model"}}
        elif _is(stage, "credrank.consensus.stage:AnswerConsensus"):
            out["consensus"] = stage.config()  # type: ignore[attr-defined]
        elif _is(stage, "credrank.freshness.stage:FreshnessDecay"):
            out["freshness"] = stage.config()  # type: ignore[attr-defined]
    if store is not None:
        out["engine"] = _engine(store)
    out["pipeline"] = spec.to_dict()
    return out


def _feedback_priors(stage: Any) -> dict[str, Any]:
    """What a feedback prior stage ranks with: the store's version (the pinned one, else the
    latest at the time of the call) and its type priors (``priors: "feedback"``)."""
    record = stage.store.record(stage.version)
    return {"name": "feedback", "store": str(stage.store.directory),
            "version": int(record["version"]), "values": dict(record["types"])}


def _flat(stages: Sequence[Stage]) -> list[Stage]:
    out: list[Stage] = []
    for s in stages:
        out.extend(_flat(s.stages) if isinstance(s, Pipeline) else [s])
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
                    freshness: str | None = None, planted: bool = False,
                    names: Mapping[tuple[str, str | None], str] | None = None
                    ) -> SearchSettings:
    """Settings from the options of ``credrank search``: their spec
    (:func:`credrank.pipeline.options.spec_from_options`, the one validator, errors in the
    options' words) made into :class:`SearchSettings` (:func:`settings_from_spec`).

    ``priors="none"`` is the similarity-only baseline; ``priors_store`` uses the current version
    of a feedback store (``credrank priors``) and ``source_reliability`` the ``--json`` output of
    ``credrank reliability estimate`` shrunk toward the type prior; ``select`` names a selector
    (``mmr``, ``coverage``, ``exposure``, ``fair``) with its ``select_params``;
    ``credibility_model`` adds the factor ``credibility`` ``λ = floor + (1 − floor) ·
    P(credible)``; ``stance_model`` the factor ``agreement`` with ``stance_params``;
    ``consensus`` the factor ``consensus`` with ``consensus_params``; ``freshness`` (the
    ``--freshness`` string) the factor ``freshness`` (chapter 35.7); ``planted`` the factor
    ``planted`` (:class:`~credrank.defences.planted.PlantedEvidence`). ``names``: the words of
    another front door for errors (:data:`~credrank.pipeline.options.OPTION_OF`).
    """
    spec = spec_from_options(
        top_k=top_k, fetch_k=fetch_k, priors=priors, mode=mode, lexical=lexical,
        pushdown=pushdown, domain_scores=domain_scores, priors_store=priors_store,
        source_reliability=source_reliability, select=select, select_params=select_params,
        credibility_model=credibility_model, credibility_floor=credibility_floor,
        stance_model=stance_model, stance_params=stance_params, consensus=consensus,
        consensus_params=consensus_params, freshness=freshness, planted=planted, names=names)
    try:
        return settings_from_spec(spec)
    except SpecError as exc:
        raise ValueError(in_words(exc, spec.to_dict(), {**OPTION_OF, **(names or {})})
                         ) from None


def settings_from_spec(spec: PipelineSpec, ctx: BuildContext | None = None) -> SearchSettings:
    """:class:`SearchSettings` holding the stages of ``spec`` (built by their ``from_spec``;
    the stance model is loaded and bound to the index's embedder when the pipeline is
    built). Stages that need the Python path set ``pushdown=False`` unless the spec insists."""
    ctx = ctx or context()
    ctx.prior_loader, ctx.top_k = load_priors, spec.top_k
    settings = SearchSettings(top_k=spec.top_k, fetch_k=spec.fetch_k, priors=None,
                              lexical=spec.retrieval == "bm25", pushdown=spec.pushdown,
                              spec=spec)
    python_only = False
    for i, item in enumerate(spec.stages):
        name, params, at = item.name, dict(item.params), f"stages[{i}]"
        try:
            if name == "prior":
                prior = SourcePrior.from_spec(params, ctx)
                settings.priors, settings.use_domain_scores = prior.priors, prior.use_domain_scores
            elif name == "stance":
                from credrank.signals.stance import load_model as load_stance_model

                settings.stance = load_stance_model(ctx.path(params.pop("model"), "model",
                                                             "stance model"))
                settings.stance_params = params
                settings.with_text, python_only = True, True
            elif name == "combine":
                settings.mode = params["mode"]
            elif name == "freshness":  # lineage stays a flag: scoring_stages adds the chains
                from credrank.freshness.stage import FreshnessDecay

                settings.freshness = FreshnessDecay.from_params(
                    params, lambda v: ctx.path(v, "config", "freshness config"))
                python_only = python_only or freshness_pushdown_blocker(
                    settings.freshness) is not None
            else:
                stage = entry(name).cls.from_spec(params, ctx)
                if name == "credibility":
                    settings.credibility, settings.with_text = stage, True
                elif name == "consensus":
                    settings.consensus = stage  # its text: what the stage reads says
                elif entry(name).kind == "select":
                    if name != "topk":
                        settings.selector, settings.with_vectors = stage, True
                else:
                    settings.extra_stages.append(stage)
                python_only = python_only or name in ("feedback_prior", "reliability_prior",
                                                      "credibility", "consensus")
        except (ValueError, OSError) as exc:
            raise build_error(at, item.params, exc) from None
    if python_only and settings.pushdown is None:
        settings.pushdown = False
    settings.resolved_fetch_k()
    return settings
