"""Assemble a credibility-aware search pipeline from settings (used by the CLI and the demo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.validation import check_int
from credrank.index.retrieve import BM25Retriever, DenseRetriever, default_fetch_k
from credrank.index.store import FormulaScoring, VectorStore, supports_formula
from credrank.reliability.prior import ShrunkReliabilityPrior
from credrank.select.stages import build_selector
from credrank.select.topk import TopK
from credrank.signals.feedback import FeedbackPrior, FeedbackPriors
from credrank.signals.prior import PriorTable, SourcePrior, load_priors


@dataclass
class SearchSettings:
    """What a search does. ``fetch_k`` defaults to ``3 × top_k`` (seed 004's expanded pool).

    ``priors=None`` gives the similarity-only baseline over the same pool. ``pushdown=None``
    (auto) scores inside the engine whenever the settings and the store allow it (dense
    retrieval, type priors, ``multiply``, no extra signal stages, a store with the formula
    capability); ``True`` insists, ``False`` never does.
    """

    top_k: int = 10
    fetch_k: int | None = None
    priors: str | PriorTable | None = "current"
    mode: str = "multiply"
    lexical: bool = False
    pushdown: bool | None = None
    use_domain_scores: bool = False
    with_vectors: bool = False
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
    """Retrieve, weight by the type prior and cut to ``top_k`` inside the engine.

    Equivalent to ``DenseRetriever >> SourcePrior >> Combine("multiply") >> TopK`` (a test
    checks it); the ``prior`` factor is re-attached in Python for the score breakdown.
    """

    name = "pushdown"

    def __init__(self, index: FormulaScoring, embedder: Embedder, priors: PriorTable,
                 fetch_k: int = 30, top_k: int = 10, *, with_vectors: bool = False,
                 with_text: bool = False):
        if not supports_formula(index):
            raise ValueError(f"pushdown: the {_engine(index)} store cannot score formulas in "
                             "its engine; search without --pushdown")
        self.index, self.embedder, self.priors = index, embedder, priors
        self.fetch_k = check_int("fetch_k", fetch_k, 1)
        self.top_k = check_int("top_k", top_k, 1)
        self.with_vectors, self.with_text = with_vectors, with_text

    def transform(self, batch: Candidates) -> Candidates:
        qv = self.embedder.embed([batch.query])[0]
        out = self.index.search_formula(batch.query, qv, self.fetch_k, self.top_k,
                                        self.priors.values, with_vectors=self.with_vectors,
                                        with_text=self.with_text)
        engine_score = out.retrieval_score
        prior = self.priors.lookup(out.column("source_type"))
        # retrieval score = cosine (engine score / prior, exact where prior > 0 — priors are)
        cosine_part = engine_score / prior
        out = type(out)(query=out.query, doc_ids=out.doc_ids, retrieval_score=cosine_part,
                        meta=out.meta, vectors=out.vectors, query_vector=out.query_vector)
        return out.with_factor("prior", prior, 0.0, 1.0).with_score(engine_score)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k, "top_k": self.top_k, "priors": self.priors.as_dict()}


def build_pipeline(index: VectorStore, embedder: Embedder, settings: SearchSettings
                   ) -> Pipeline:
    """``retriever >> [SourcePrior] >> extra stages >> Combine >> selector``.

    With ``pushdown`` the retrieval, prior and multiply happen inside the engine (type priors
    only, on a store with the formula capability; extra stages and other modes need the Python
    path).
    """
    fetch_k = settings.resolved_fetch_k()
    priors = settings.prior_table()
    if use_pushdown(settings, index):
        stages: list[Stage] = [PushdownSearch(index, embedder, priors, fetch_k, fetch_k,
                                              with_vectors=settings.with_vectors)]
    else:
        retriever: Stage = (BM25Retriever(index, fetch_k, with_vectors=settings.with_vectors)
                            if settings.lexical else
                            DenseRetriever(index, embedder, fetch_k,
                                           with_vectors=settings.with_vectors))
        return Pipeline([retriever, *scoring_stages(settings)])
    stages.append(settings.selector or TopK(settings.top_k))
    return Pipeline(stages)


def scoring_stages(settings: SearchSettings) -> list[Stage]:
    """What follows retrieval on the Python path: ``[SourcePrior] >> extra stages >> Combine
    >> selector``. ``credrank search`` and the reranker of candidates retrieved elsewhere
    (:mod:`credrank.rerank`) share it, so both rank a pool the same way."""
    priors = settings.prior_table()
    stages: list[Stage] = []
    if priors is not None:
        stages.append(SourcePrior(priors, use_domain_scores=settings.use_domain_scores))
    stages.extend(settings.extra_stages)
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
                and not settings.use_domain_scores)
    if settings.pushdown and not eligible:
        raise ValueError("pushdown supports dense retrieval with type priors and the "
                         "'multiply' mode only; drop --pushdown for the other options")
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
    if store is not None:
        out["engine"] = _engine(store)
    return out


def search_settings(*, top_k: int = 10, fetch_k: int | None = None, priors: str = "current",
                    mode: str = "multiply", lexical: bool = False, pushdown: bool | None = None,
                    domain_scores: bool = False, priors_store: Path | None = None,
                    source_reliability: Path | None = None, select: str | None = None,
                    select_params: dict[str, Any] | None = None) -> SearchSettings:
    """Settings from the options of ``credrank search`` (and the service), validated.

    ``priors="none"`` is the similarity-only baseline; ``priors_store`` uses the current version
    of a feedback store (``credrank priors``) and ``source_reliability`` the ``--json`` output of
    ``credrank reliability estimate`` shrunk toward the type prior — both replace the type prior
    and need the Python path; ``select`` names a selector (``mmr``, ``coverage``, ``exposure``,
    ``fair``) with its ``select_params``. Raises ``ValueError`` naming the conflicting options.
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
    settings.resolved_fetch_k()
    settings.priors = settings.prior_table()  # loaded and validated once, not per query
    return settings
