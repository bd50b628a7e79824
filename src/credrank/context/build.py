"""Credibility-annotated context (chapter 35.4): rank, then tier what the ranking returned.

:func:`build_context` annotates what the **same** pipeline as ``credrank search`` returned (a
:class:`~credrank.pipeline.spec.PipelineSpec` run by :meth:`credrank.searcher.Searcher.search`;
:func:`check_context_spec` first), so the credibility inputs shown are exactly the ones the
ranking used:

* similarity — the batch's ``retrieval_score`` (the cosine of dense retrieval; lexical BM25
  scores have no stated cut points and are refused unless ``similarity=`` is given);
* source — the batch's ``source_type`` / ``host`` / ``url`` metadata and its factors
  (``prior``, ``credibility``, ``freshness``, …, copied as they are);
* date — the batch's five date columns through
  :func:`credrank.freshness.dates.freshness_date` (observed → verified → published, never
  modified / retrieved; a date after ``T`` is clamped and flagged).

Tiers follow :mod:`credrank.context.tiers`: ``tier = min(S_tier, max(1, R − ⌊(T−t)/τ⌋))``.
``source="auto"`` (declared): ``S_tier`` from the factor ``credibility`` (the learned
credibility, binned with :data:`~credrank.context.tiers.SOURCE_SCORE_CUTS`) when the batch has
it, else from the source type (:data:`~credrank.context.tiers.SOURCE_TYPE_TIERS`);
``source="type"`` always uses the type; any other value names a factor in ``[0, 1]`` to bin
(e.g. ``prior`` when it holds a learned reliability).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from credrank.context.render import (
    FORMATS,
    GRANULARITIES,
    AnnotatedPassage,
    SentenceTier,
    render,
    render_json,
)
from credrank.context.tiers import (
    RELEVANCE_CUTS,
    SOURCE_SCORE_CUTS,
    SOURCE_TYPE_TIERS,
    Cuts,
    combine_tiers,
    downgrades,
    relevance_tier,
    sentence_similarities,
    source_tier_from_score,
    source_tier_from_type,
    split_sentences,
)
from credrank.core.candidates import DATE_COLUMNS, Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import check_text, hit_text
from credrank.freshness.dates import SECONDS_PER_DAY, freshness_date, parse_instant
from credrank.freshness.decay import check_half_life
from credrank.freshness.policy import UnknownAge, parse_undated
from credrank.pipeline.document import answered
from credrank.pipeline.spec import PipelineSpec


@dataclass(frozen=True)
class Excluded:
    """A ranked passage left out of the context, and why."""

    rank: int
    doc_id: str
    reason: str


@dataclass(frozen=True)
class TierPolicy:
    """The declared tier policy (:mod:`credrank.context.tiers`); ``interval_days=None``: no
    time downgrade."""

    relevance_cuts: Cuts = field(default_factory=lambda: Cuts(*RELEVANCE_CUTS,
                                                                name="relevance cuts"))
    source_cuts: Cuts = field(default_factory=lambda: Cuts(*SOURCE_SCORE_CUTS,
                                                             name="source cuts"))
    source: str = "auto"
    interval_days: float | None = None
    undated: UnknownAge = field(default_factory=UnknownAge)

    def __post_init__(self) -> None:
        object.__setattr__(self, "relevance_cuts", Cuts.of(self.relevance_cuts,
                                                           "relevance cuts"))
        object.__setattr__(self, "source_cuts", Cuts.of(self.source_cuts, "source cuts"))
        if self.interval_days is not None:
            object.__setattr__(self, "interval_days",
                               check_half_life(self.interval_days, "half_life"))
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"source: expected auto, type or a factor name, got "
                             f"{self.source!r}")
        if not isinstance(self.undated, UnknownAge):
            object.__setattr__(self, "undated", parse_undated(str(self.undated)))

    def describe(self) -> dict[str, Any]:
        return {
            "formula": "tier = min(S_tier, max(1, R - floor((T - t) / tau)))",
            "relevance_cuts": {"mid": self.relevance_cuts.mid, "high": self.relevance_cuts.high},
            "source": self.source,
            "source_cuts": {"mid": self.source_cuts.mid, "high": self.source_cuts.high},
            "source_type_tiers": dict(SOURCE_TYPE_TIERS),
            "interval_days": self.interval_days,
            "undated": self.undated.describe(),
            "undated_mapping": "downgrade = floor(-log2 w_u), w_u the policy's weight; "
                               "exclude: left out and reported; no interval: no downgrade",
        }


@dataclass(frozen=True)
class ContextDocument:
    """What :func:`build_context` / :func:`annotate` produce: the annotated passages in rank
    order, those left out, the policy and the evaluation time; ``info``: what the ranking's
    stages reported (the batch's ``info``, as ``credrank search --json`` has it: a consensus
    verdict, the documents freshness excluded, …); ``settings`` and ``pipeline``: what it ran
    with and the spec it ran (as ``credrank search --json``'s; ``pipeline`` ``None`` when
    not known)."""

    query: str
    passages: list[AnnotatedPassage]
    excluded: list[Excluded]
    policy: TierPolicy
    granularity: str
    now: datetime
    settings: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    pipeline: dict[str, Any] | None = None

    def render(self, fmt: str = "cag", cite: bool = False) -> str:
        """The ``cag`` / ``plain`` prompt or the ``json`` list (:mod:`credrank.context.render`);
        ``cite``: each passage of a prompt with its source, URL and date."""
        return render(self.query, self.passages, fmt, cite)

    def to_json(self, fmt: str | None = None, cite: bool = False) -> dict[str, Any]:
        """The ``credrank context --json`` document (docs/json.md); with ``fmt``, the
        ``format``, ``cite`` and the rendered ``prompt`` (``cite``: as :meth:`render`); the
        spec under the top-level ``pipeline`` (as ``credrank search --json``: feeding it, or
        the whole document, back with ``--pipeline`` reproduces the ranking)."""
        out: dict[str, Any] = {
            "credrank_context": 2, "query": self.query, "granularity": self.granularity,
            "now": self.now.isoformat(), "policy": self.policy.describe(),
            "settings": self.settings, "passages": render_json(self.passages),
            "excluded": [{"rank": e.rank, "doc_id": e.doc_id, "reason": e.reason}
                         for e in self.excluded],
            "info": self.info,
        }
        if fmt is not None:
            out["format"] = fmt
            out["cite"] = cite
            out["prompt"] = (render_json(self.passages) if fmt == "json"
                             else self.render(fmt, cite))
        if self.pipeline is not None:
            out["pipeline"] = self.pipeline
        return out


def parse_now(value: datetime | str | None) -> datetime:
    """The evaluation time ``T`` (aware UTC); ``None`` → the current time."""
    if value is None:
        return datetime.now(UTC)
    parsed = parse_instant(value, "now")
    if parsed is None:
        raise ValueError(f"now: expected an ISO 8601 date such as 2024-05-01, got {value!r}")
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError(f"now: expected a time that stays within years 1–9999 in UTC, got "
                         f"{value!r}") from None


def annotate(batch: Candidates, *, now: datetime | str | None = None,
             half_life: float | None = None, undated: UnknownAge | str = "neutral",
             granularity: str = "document", embedder: Embedder | None = None,
             query_vector: np.ndarray | None = None,
             similarity: Sequence[float] | np.ndarray | None = None,
             similarity_source: str = "retrieval_score (cosine)", source: str = "auto",
             relevance_cuts: Cuts | Sequence[float] = RELEVANCE_CUTS,
             source_cuts: Cuts | Sequence[float] = SOURCE_SCORE_CUTS,
             top_k: int | None = None, text: str = "full") -> ContextDocument:
    """Tier the rows of an already-ranked ``batch`` (in its order; the first ``top_k`` kept
    passages when given).

    ``half_life`` is the interval ``τ`` in days (``None``: no time downgrade); ``now`` the
    evaluation time ``T``; ``undated`` the unknown-age policy (``neutral``, ``penalty:0.5``,
    ``exclude``, …). ``similarity`` overrides the batch's ``retrieval_score`` (a bench with
    its own cosines; name it with ``similarity_source``). Sentence granularity needs the
    ``embedder`` (the index's) and embeds the query with it unless ``query_vector`` is given.
    ``text`` is what each passage carries (the one option of every hit,
    :mod:`credrank.core.hittext`): ``full`` (as indexed), ``snippet`` (its snippet around the
    query words; sentence granularity tiers the snippet's sentences) or ``none`` (no text:
    only the JSON form renders it; not at sentence granularity).
    """
    text = check_text(text)
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, got "
                         f"{granularity!r}")
    policy = TierPolicy(Cuts.of(relevance_cuts, "relevance cuts"),
                        Cuts.of(source_cuts, "source cuts"), source, half_life,
                        undated if isinstance(undated, UnknownAge) else parse_undated(undated))
    t_now = parse_now(now)
    n = len(batch)
    sims = (batch.retrieval_score if similarity is None
            else np.asarray(similarity, dtype=np.float64).reshape(-1))
    if len(sims) != n:
        raise ValueError(f"similarity: expected {n} values (one per candidate), got {len(sims)}")
    if not np.all(np.isfinite(sims)):
        raise ValueError("similarity: expected finite values")
    r = relevance_tier(sims, policy.relevance_cuts)
    s, basis = _source_tiers(batch, policy)
    fresh = [freshness_date({c: batch.column(c)[i] for c in DATE_COLUMNS}, t_now,
                            where=f"document {batch.doc_ids[i]!r}") for i in range(n)]
    elapsed = np.array([np.nan if f.date is None else
                        max((t_now - f.date).total_seconds() / SECONDS_PER_DAY, 0.0)
                        for f in fresh], dtype=np.float64)
    k, out = downgrades(elapsed, policy.interval_days, policy.undated)
    tiers = combine_tiers(r, s, k)

    keep = [i for i in range(n) if not out[i]]
    last = n  # the excluded that rank above the last kept passage (all, if none is cut)
    if top_k is not None and len(keep) >= int(top_k):
        keep = keep[:int(top_k)]
        last = keep[-1] if keep else n
    excluded = [Excluded(i + 1, str(batch.doc_ids[i]),
                         "unknown age (no observed_at, verified_at or published_at) under "
                         "the undated policy exclude") for i in range(n) if out[i] and i < last]
    if text == "none" and granularity == "sentence":
        raise ValueError("text none: sentence granularity tiers the sentences of the text; "
                         "use text full or snippet")
    texts = batch.column("text")
    parts = [h["passage"] for h in batch.hits("none")]  # which passage each row is
    if text == "snippet":
        texts = np.array([hit_text(t, batch.query, text) for t in texts], dtype=object)
    sentences: dict[int, tuple[SentenceTier, ...]] = {}
    if granularity == "sentence" and keep:
        sentences = _sentence_tiers(batch, keep, texts, s, k, policy, embedder, query_vector)
    passages = []
    for rank, i in enumerate(keep, start=1):
        shown = texts[i] if text != "none" else None
        if text != "none" and not isinstance(shown, str):
            raise ValueError(f"document {batch.doc_ids[i]!r}: no text to show the generator "
                             "(search with with_text=True)")
        passages.append(AnnotatedPassage(
            rank=rank, doc_id=str(batch.doc_ids[i]), text=shown, tier=int(tiers[i]),
            relevance_tier=int(r[i]), source_tier=int(s[i]), source_basis=basis[i],
            downgrade=int(k[i]), similarity=float(sims[i]), similarity_source=similarity_source,
            source_type=_str(batch.column("source_type")[i]), host=_str(batch.column("host")[i]),
            url=_str(batch.column("url")[i]), title=_str(batch.column("title")[i]),
            freshness_date=_iso(fresh[i].date),
            freshness_basis=fresh[i].basis, freshness_clamped=fresh[i].clamped,
            document_date=_iso(fresh[i].written or fresh[i].date),
            elapsed_days=None if math.isnan(elapsed[i]) else float(elapsed[i]),
            retrieval_score=float(batch.retrieval_score[i]), score=float(batch.score[i]),
            factors={name: float(v[i]) for name, v in batch.factors.items()},
            sentences=sentences.get(i), passage=parts[i]))
    return ContextDocument(batch.query, passages, excluded, policy, granularity, t_now,
                           info=dict(batch.info))


def check_context_spec(spec: PipelineSpec) -> PipelineSpec:
    """``spec`` if its ranking can be tiered: lexical retrieval is refused (relevance tiers
    bin cosine similarities; BM25 scores have no stated cut points)."""
    if spec.retrieval != "dense":
        raise ValueError("context: relevance tiers bin cosine similarities; lexical (BM25) "
                         "retrieval has no stated cut points — use dense retrieval")
    return spec


def build_context(ranked: Candidates, *, embedder: Embedder | None = None,
                  now: datetime | str | None = None, half_life: float | None = None,
                  undated: UnknownAge | str = "neutral", granularity: str = "document",
                  source: str = "auto",
                  relevance_cuts: Cuts | Sequence[float] = RELEVANCE_CUTS,
                  source_cuts: Cuts | Sequence[float] = SOURCE_SCORE_CUTS,
                  describe: dict[str, Any] | None = None,
                  text: str = "full", top_k: int | None = None) -> ContextDocument:
    """:func:`annotate` the top-k a ranking returned (``ranked``: the result of
    :meth:`credrank.searcher.Searcher.search` under a spec :func:`check_context_spec`
    accepts, with the hits' text unless ``text`` is ``none``; ``text``: ``full`` |
    ``snippet`` | ``none``, as there). ``embedder``: the index's, for sentence tiers.
    ``describe``: the settings as JSON (:attr:`credrank.pipeline.compile.Compiled.settings`,
    with the spec under ``pipeline``), recorded as ``credrank search --json`` records them
    (:func:`credrank.pipeline.document.answered`): ``settings`` with the hits'
    ``text``, the spec as the document's ``pipeline`` (with the evaluation time the freshness
    stage read, so that replaying it ranks the same). ``top_k``: keep at most this many
    passages (the first that the undated policy does not exclude)."""
    if not isinstance(ranked.query, str) or not ranked.query.strip():
        raise ValueError("query: expected non-empty text")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, got "
                         f"{granularity!r}")
    text = check_text(text)
    doc = annotate(ranked, now=now, half_life=half_life, undated=undated,
                   granularity=granularity, embedder=embedder, source=source,
                   relevance_cuts=relevance_cuts, source_cuts=source_cuts, text=text,
                   top_k=top_k)
    settings: dict[str, Any] = {}
    pipeline: dict[str, Any] | None = None
    if describe is not None:
        settings, pipeline = answered(describe, ranked.info, text)
    return ContextDocument(doc.query, doc.passages, doc.excluded, doc.policy, doc.granularity,
                           doc.now, settings, doc.info, pipeline)


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of :data:`~credrank.context.render.FORMATS`."""
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


# -- helpers ------------------------------------------------------------------------------------

def _source_tiers(batch: Candidates, policy: TierPolicy) -> tuple[np.ndarray, list[str]]:
    """``S_tier`` per row and its basis (``source_type:blog`` or ``factor:credibility=0.73``)."""
    name = policy.source
    if name == "auto":
        name = "credibility" if "credibility" in batch.factors else "type"
    if name == "type":
        types = batch.column("source_type")
        tiers = source_tier_from_type(types)
        return tiers, [f"source_type:{t if isinstance(t, str) else 'unknown'}" for t in types]
    if name not in batch.factors:
        raise ValueError(f"source: the ranked batch has no factor {name!r} (factors: "
                         f"{', '.join(batch.factors) or 'none'}); use auto or type")
    values = batch.factors[name]
    return (source_tier_from_score(values, policy.source_cuts),
            [f"factor:{name}={float(v):.6g}" for v in values])


def _sentence_tiers(batch: Candidates, keep: list[int], texts: np.ndarray, s: np.ndarray,
                    k: np.ndarray, policy: TierPolicy, embedder: Embedder | None,
                    query_vector: np.ndarray | None) -> dict[int, tuple[SentenceTier, ...]]:
    """Each kept passage's sentences with their own ``R`` (one ``embed`` call for all), the
    document's downgrade and source tier as the cap."""
    if embedder is None:
        raise ValueError("granularity sentence: needs the index's embedder for the sentence "
                         "similarities")
    qv = (np.asarray(embedder.embed([batch.query])[0]) if query_vector is None
          else np.asarray(query_vector))
    split = {i: split_sentences(texts[i] if isinstance(texts[i], str) else "") for i in keep}
    flat = [sent for i in keep for sent in split[i]]
    sims = sentence_similarities(flat, qv, embedder)
    r = relevance_tier(sims, policy.relevance_cuts)
    owners = np.array([i for i in keep for _ in split[i]], dtype=np.int64)
    tiers = combine_tiers(r, s[owners], k[owners]) if len(flat) else np.zeros(0, np.int64)
    out: dict[int, tuple[SentenceTier, ...]] = {}
    pos = 0
    for i in keep:
        m = len(split[i])
        out[i] = tuple(SentenceTier(flat[pos + j], float(sims[pos + j]), int(r[pos + j]),
                                    int(tiers[pos + j])) for j in range(m))
        pos += m
    return out


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
