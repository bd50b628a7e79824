"""Framework-neutral glue of the adapters: one configuration, one call into :func:`rerank`.

Every adapter (Haystack, LlamaIndex, LangChain) turns its framework's documents into
:class:`Passage` objects, hands them to :meth:`CredrankScorer.rank` and builds new framework
documents from the :class:`Ranked` answers. ``rank`` runs :func:`credrank.rerank.rerank`:
``GivenCandidates(pool) >> scoring stages``, the stages ``credrank search`` runs after its
retrieval, with settings built by :func:`credrank.search.search_settings` (the validation of
the CLI's options, so a bad ``priors`` or ``select`` fails here with the CLI's message).

Provenance. The source type comes from the passage's URL only (the metadata key ``url_key``,
by default the first of ``url``, ``source``, ``link`` holding a string), typed by the same
:class:`~credrank.provenance.SourceTyper` indexing uses, over the domain ``tables``. A passage
without a URL (or whose ``source`` is a file path) is typed ``unknown`` and gets the
``unknown`` prior — demoted, not dropped. A ``source_type`` in the metadata is a claim and is
never read.

Embeddings. The retrieval score is the cosine of the query and the passage embedded by
credrank's own ``embedder`` (``title\\ntext``, as indexing embeds). A framework's stored
embedding is used instead only with ``use_given_embeddings=True`` *and* when its dimension is
the embedder's: the query is always embedded by credrank's model, and a cosine between vectors
of two different models is meaningless (the dimension check catches a different size, not a
different model of the same size — set the flag only when the documents were embedded by the
same model). A vector of another dimension is ignored (with a warning) and the text embedded.

Ids. Passages are reranked under their positions (``"0"``, ``"1"``, …), so framework ids
need not be unique (two retrievers may return the same document); an error names
``candidates[i]``, ``i`` being the position in the input list.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.validation import check_bool, check_choice, check_int
from credrank.index.embed import EMBEDDERS, get_embedder
from credrank.provenance import SourceTyper
from credrank.rerank import RETRIEVAL_SOURCES, rerank
from credrank.search import SearchSettings, scoring_stages, search_settings

#: metadata keys tried, in order, for a passage's URL when ``url_key`` is not given
DEFAULT_URL_KEYS = ("url", "source", "link")
#: the metadata key every adapter writes the breakdown under
BREAKDOWN_KEY = "credrank"


@dataclass(frozen=True)
class Passage:
    """One framework document as credrank sees it: its text, metadata (read for the URL and
    title only), the framework's retrieval ``score`` and stored ``embedding`` (either may be
    ``None``)."""

    text: str | None
    metadata: Mapping[str, Any]
    score: float | None = None
    embedding: Sequence[float] | None = None


@dataclass(frozen=True)
class Ranked:
    """One kept passage: its ``index`` in the input, the final ``score`` and the
    ``breakdown`` the adapters store under ``credrank`` in the document's metadata."""

    index: int
    score: float
    breakdown: dict[str, Any]


@dataclass
class CredrankScorer:
    """What an adapter does, configured once (settings validated at construction).

    ``embedder``: ``"minilm"`` (the model ``credrank index`` uses by default) or
    ``"hashing"`` (no model; tests). ``priors``: a preset name, a prior file, or ``None`` /
    ``"none"`` for the similarity-only baseline. ``mode``, ``top_k``, ``select``,
    ``select_params``, ``domain_scores``, ``priors_store``, ``source_reliability``: as the
    options of ``credrank search``. ``tables``: domain-table CSV paths for the source typer.
    ``url_key``: the metadata key holding the URL (``None``: the first of ``url``, ``source``,
    ``link``); ``title_key``: the one holding the title (embedded as ``title\\ntext``; ``None``:
    no title). ``retrieval``: ``"cosine"`` (the embedding cosine, as ``credrank search``) or
    ``"given"`` (the framework's own score, required on every document).
    ``use_given_embeddings``: see the module docstring.
    """

    embedder: str = "minilm"
    priors: str | None = "current"
    mode: str = "multiply"
    top_k: int = 10
    select: str | None = None
    select_params: Mapping[str, Any] | None = None
    tables: Sequence[str | Path] = ()
    url_key: str | None = None
    title_key: str | None = "title"
    retrieval: str = "cosine"
    use_given_embeddings: bool = False
    domain_scores: bool = False
    priors_store: str | Path | None = None
    source_reliability: str | Path | None = None
    _settings: dict[int, SearchSettings] = field(default_factory=dict, init=False, repr=False,
                                                 compare=False)
    _embedder: Embedder | None = field(default=None, init=False, repr=False, compare=False)
    typer: SourceTyper = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice("embedder", self.embedder, EMBEDDERS)
        check_choice("retrieval", self.retrieval, RETRIEVAL_SOURCES)
        check_bool("use_given_embeddings", self.use_given_embeddings)
        for name in ("url_key", "title_key"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name}: expected a non-empty string or None, got {value!r}")
        if isinstance(self.tables, (str, Path)):
            raise TypeError("tables: expected a list of paths, got a single path; wrap it in "
                            "a list")
        self.typer = SourceTyper(list(self.tables))
        self.settings()  # validate now: a bad priors/mode/select fails at construction

    # -- settings and model -------------------------------------------------------------------
    def settings(self, top_k: int | None = None) -> SearchSettings:
        """Validated settings for ``top_k`` (default: the configured one), built once each."""
        k = self.top_k if top_k is None else check_int("top_k", top_k, 1)
        if k not in self._settings:
            settings = search_settings(
                top_k=k, priors="none" if self.priors is None else self.priors,
                mode=self.mode, domain_scores=self.domain_scores,
                priors_store=None if self.priors_store is None else Path(self.priors_store),
                source_reliability=(None if self.source_reliability is None
                                    else Path(self.source_reliability)),
                select=self.select, select_params=dict(self.select_params or {}))
            scoring_stages(settings)  # the combine mode is checked when its stage is built
            self._settings[k] = settings
        return self._settings[k]

    def warm_up(self) -> Embedder:
        """Load the embedder (cached per process); called by the first :meth:`rank` if not
        before."""
        if self._embedder is None:
            self._embedder = get_embedder(self.embedder)
        return self._embedder

    # -- ranking ------------------------------------------------------------------------------
    def url_of(self, metadata: Mapping[str, Any]) -> str | None:
        """The passage's URL: ``metadata[url_key]``, else the first string among
        :data:`DEFAULT_URL_KEYS`; ``None`` (typed ``unknown``) when there is none."""
        keys = (self.url_key,) if self.url_key else DEFAULT_URL_KEYS
        for key in keys:
            value = metadata.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return None

    def records(self, passages: Sequence[Passage]) -> list[dict[str, Any]]:
        """The candidate records of :mod:`credrank.rerank` for ``passages`` (ids = positions)."""
        dim = self.warm_up().dim
        records: list[dict[str, Any]] = []
        mismatched: list[int] = []
        for i, p in enumerate(passages):
            title = p.metadata.get(self.title_key) if self.title_key else None
            record: dict[str, Any] = {
                "id": str(i), "text": p.text, "url": self.url_of(p.metadata),
                "title": title if isinstance(title, str) and title else None,
            }
            if self.retrieval == "given" and p.score is not None:
                score = p.score
                is_real = isinstance(score, numbers.Real) and not isinstance(score, bool)
                record["score"] = float(score) if is_real else score  # numpy floats too
            if self.use_given_embeddings and p.embedding is not None:
                if len(p.embedding) == dim:
                    record["vector"] = list(p.embedding)
                else:
                    mismatched.append(i)
            records.append(record)
        if mismatched:
            warnings.warn(
                f"use_given_embeddings: {len(mismatched)} document(s) carry embeddings of "
                f"another dimension than the {self.embedder!r} embedder's ({dim}), e.g. "
                f"documents[{mismatched[0]}]; their text is embedded instead",
                UserWarning, stacklevel=3)
        return records

    def rank(self, query: str, passages: Sequence[Passage], top_k: int | None = None
             ) -> list[Ranked]:
        """Rerank ``passages`` for ``query``; the kept ones, best first. Raises ``ValueError``
        (:class:`credrank.rerank.CandidateError`) naming ``candidates[i]`` for a bad passage."""
        if not isinstance(query, str):
            raise TypeError(f"query: expected a string, got {type(query).__name__}")
        settings = self.settings(top_k)
        if not passages:
            return []
        result = rerank(query, self.records(passages), self.warm_up(), settings, self.typer,
                        retrieval=self.retrieval)
        return self.ranked(result)

    def ranked(self, result: Candidates) -> list[Ranked]:
        """:class:`Ranked` rows of a rerank result (breakdown as the ``credrank search
        --json`` hits: ``score_breakdown`` with the retrieval score, each factor, final)."""
        out = []
        rules = result.column("provenance_rule")
        for i, hit in enumerate(result.hits()):
            breakdown = {
                "rank": hit["rank"], "score": hit["score"],
                "source_type": hit["source_type"], "host": hit["host"],
                "rule": _plain(rules[i]), "url": hit["url"],
                "retrieval": self.retrieval, "embedder": self.embedder,
                "score_breakdown": hit["score_breakdown"],
            }
            out.append(Ranked(index=int(hit["doc_id"]), score=hit["score"],
                              breakdown=breakdown))
        return out

    def init_parameters(self) -> dict[str, Any]:
        """The configuration as plain JSON/YAML values (for the frameworks' serialisers)."""
        return {
            "embedder": self.embedder, "priors": self.priors, "mode": self.mode,
            "top_k": self.top_k, "select": self.select,
            "select_params": dict(self.select_params) if self.select_params else None,
            "tables": [str(t) for t in self.tables], "url_key": self.url_key,
            "title_key": self.title_key, "retrieval": self.retrieval,
            "use_given_embeddings": self.use_given_embeddings,
            "domain_scores": self.domain_scores,
            "priors_store": None if self.priors_store is None else str(self.priors_store),
            "source_reliability": (None if self.source_reliability is None
                                   else str(self.source_reliability)),
        }


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
