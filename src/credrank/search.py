"""Assemble a credibility-aware search pipeline from settings (used by the CLI and the demo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from credrank.combine import Combine
from credrank.index.edge import EdgeIndex
from credrank.index.embed import Embedder
from credrank.index.retrieve import BM25Retriever, DenseRetriever, PushdownSearch, default_fetch_k
from credrank.pipeline import Pipeline, Stage
from credrank.select.topk import TopK
from credrank.signals.prior import PriorTable, SourcePrior, load_priors


@dataclass
class SearchSettings:
    """What a search does. ``fetch_k`` defaults to ``3 × top_k`` (seed 004's expanded pool).

    ``priors=None`` gives the similarity-only baseline over the same pool. ``pushdown=None``
    (auto) scores inside the engine whenever the settings allow it (dense retrieval, type
    priors, ``multiply``, no extra signal stages); ``True`` insists, ``False`` never does.
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


def build_pipeline(index: EdgeIndex, embedder: Embedder, settings: SearchSettings) -> Pipeline:
    """``retriever >> [SourcePrior] >> extra stages >> Combine >> selector``.

    With ``pushdown`` the retrieval, prior and multiply happen inside the engine (type priors
    only; extra stages and other modes need the Python path).
    """
    fetch_k = settings.resolved_fetch_k()
    priors = settings.prior_table()
    if use_pushdown(settings):
        stages: list[Stage] = [PushdownSearch(index, embedder, priors, fetch_k, fetch_k,
                                              with_vectors=settings.with_vectors)]
    else:
        retriever: Stage = (BM25Retriever(index, fetch_k, with_vectors=settings.with_vectors)
                            if settings.lexical else
                            DenseRetriever(index, embedder, fetch_k,
                                           with_vectors=settings.with_vectors))
        stages = [retriever]
        if priors is not None:
            stages.append(SourcePrior(priors, use_domain_scores=settings.use_domain_scores))
        stages.extend(settings.extra_stages)
        stages.append(Combine(settings.mode))
    stages.append(settings.selector or TopK(settings.top_k))
    return Pipeline(stages)


def use_pushdown(settings: SearchSettings) -> bool:
    """Whether the engine scores this search (see :class:`SearchSettings`)."""
    eligible = (settings.prior_table() is not None and settings.mode == "multiply"
                and not settings.lexical and not settings.extra_stages
                and not settings.use_domain_scores)
    if settings.pushdown and not eligible:
        raise ValueError("pushdown supports dense retrieval with type priors and the "
                         "'multiply' mode only; drop --pushdown for the other options")
    return eligible if settings.pushdown is None else settings.pushdown


def describe(settings: SearchSettings) -> dict[str, Any]:
    priors = settings.prior_table()
    return {
        "top_k": settings.top_k, "fetch_k": settings.resolved_fetch_k(),
        "priors": priors.as_dict() if priors else None, "mode": settings.mode,
        "retrieval": "bm25" if settings.lexical else "dense",
        "pushdown": use_pushdown(settings),
    }
