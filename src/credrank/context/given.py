"""Credibility-annotated context (chapter 35.4) over candidates retrieved elsewhere.

:func:`~credrank.context.build.search_context` tiers what a ranking over an index returned;
:class:`GivenRanking` is the ranking it needs over one pool the caller already has (``POST
/rerank/context``, :meth:`credrank.searcher.Searcher.rerank_context`,
:func:`credrank.searcher.rerank_context` and the adapters' ``context``): the stage that turns the
candidates into the scored pool (:class:`credrank.rerank.GivenCandidates`, which embeds what it
must) runs **once** per query, and each ranking the context asks for — the spec's, a longer one
that refills the passages ``undated exclude`` left out, the whole pool's for the ``neutral``
median — reruns only the spec's stages over it. Nothing is embedded twice.

Relevance tiers bin cosine similarities (chapter 35.4; the cut points
:data:`~credrank.context.tiers.RELEVANCE_CUTS`, stated for cosines). A
retriever's own scores (``retrieval="given"``: BM25, a store's distance, a cross-encoder's
logit) have no stated cut points, so a context over candidates takes its retrieval score from
vectors: ``auto`` uses the candidates' vectors when they are of the embedder's model, else
embeds the passages (their scores are not read: ``GivenCandidates(read_scores=False)``;
``info.retrieval.scores_unread`` counts the candidates that came with one), ``cosine`` as
:mod:`credrank.rerank` says, and ``given`` is refused (:func:`check_context_retrieval`), as a
context over a lexical ranking is (:func:`~credrank.context.build.check_context_spec`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.pipeline import Stage
from credrank.pipeline.spec import PipelineSpec

#: the ``retrieval`` values a context over candidates takes (``given`` has no tiers' cut points)
CONTEXT_RETRIEVAL = ("auto", "cosine")


def check_context_retrieval(retrieval: Any, words: Callable[[str], str] = str) -> str:
    """``retrieval`` if a context can tier its scores (:data:`CONTEXT_RETRIEVAL`), else a
    ``ValueError`` whose head is the option's word (``words``: the door's name of it); for
    ``given`` (an option of a rerank) it says why a context cannot take it. The one check of
    the option at a context's doors (a rerank's, :func:`credrank.rerank.check_retrieval`,
    would offer ``given``)."""
    if retrieval in CONTEXT_RETRIEVAL:
        return str(retrieval)
    head = f"{words('retrieval')}: expected auto or cosine for a context, got {retrieval!r}"
    if retrieval == "given":
        head += (": relevance tiers bin cosine similarities, and a retriever's own scores have "
                 "no stated cut points; use auto (the candidates' vectors if of the embedder's "
                 "model, else their passages embedded) or cosine")
    raise ValueError(head)


class _Settings:
    """What :func:`~credrank.context.build.search_context` reads of a compiled pipeline."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings


class _Once(Stage):
    """``stage`` run once per query; later calls return the same batch (a batch is not changed
    by the stages after it: each returns a new one)."""

    def __init__(self, stage: Stage) -> None:
        self.stage, self.name, self.reads = stage, stage.name, stage.reads
        self._query: str | None = None
        self._batch: Candidates | None = None

    def transform(self, batch: Candidates) -> Candidates:
        if self._batch is None or self._query != batch.query:
            self._batch, self._query = self.stage(batch), batch.query
        return self._batch


class GivenRanking:
    """The ranking :func:`~credrank.context.build.search_context` needs, over one pool of
    candidates retrieved elsewhere (module docstring).

    ``given``: the stage that makes the scored pool (a :class:`credrank.rerank.GivenCandidates`
    over the candidates), run once per query. ``stages_of``: the built stages of a spec (the
    caller compiles each spec once). ``settings_of``: the settings document of a spec and the
    ranked pool (what ``/rerank`` records: its ``retrieval``, ``fetch_k`` = the candidates,
    ``query_vector`` given or embedded). ``run``: the run loop of the caller's door
    (:meth:`credrank.searcher.Searcher.run` without the store), called with the stages, the
    query and the checkpoint callable. ``pool``: the number of candidates, the pool a context's
    longer rankings reach (:func:`~credrank.context.build.search_context`'s ``pool``)."""

    def __init__(self, given: Stage, embedder: Embedder,
                 stages_of: Callable[[PipelineSpec], Sequence[Stage]],
                 settings_of: Callable[[PipelineSpec, Candidates], dict[str, Any]],
                 run: Callable[[Sequence[Stage], str, Callable[[str], None] | None],
                               Candidates],
                 pool: int) -> None:
        self._given, self._embedder = _Once(given), embedder
        self._stages_of, self._settings_of, self._run = stages_of, settings_of, run
        self.pool = pool
        self._last: Candidates | None = None

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def compile(self, spec: PipelineSpec) -> _Settings:
        """The settings of ``spec`` over the last ranking (:meth:`search` first)."""
        if self._last is None:
            raise RuntimeError("GivenRanking.compile: the settings follow a search")
        return _Settings(self._settings_of(spec, self._last))

    def search(self, query: str, spec: PipelineSpec, *, text: str = "full",
               check: Callable[[str], None] | None = None) -> Candidates:
        """``spec``'s stages over the pool (the candidates' own text: ``text`` is the
        context's to apply)."""
        del text  # the candidates hold their text; the context renders it as asked
        self._last = self._run([self._given, *self._stages_of(spec)], query, check)
        return self._last


__all__ = ["CONTEXT_RETRIEVAL", "GivenRanking", "check_context_retrieval"]
