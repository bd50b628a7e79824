"""Credibility-annotated context (chapter 35.4): rank, then tier what the ranking returned.

:func:`search_context` is the one path of ``credrank context`` and ``POST /context``: it
ranks the query by the **same** pipeline as ``credrank search`` (a
:class:`~credrank.pipeline.spec.PipelineSpec` run by :meth:`credrank.searcher.Searcher.search`;
:func:`check_context_spec` first) and tiers what came back with :func:`build_context`
(:func:`annotate` for a batch ranked elsewhere, a bench's), so the credibility inputs shown
are exactly the ones the ranking used:

* similarity — the batch's ``retrieval_score`` (the cosine of dense retrieval; lexical BM25
  scores have no stated cut points and are refused unless ``similarity=`` is given);
* source — the batch's ``source_type`` / ``host`` / ``url`` metadata and its factors
  (``prior``, ``credibility``, ``freshness``, …, copied as they are);
* date — the batch's evidence date as the ranking's freshness stage reads it
  (:func:`credrank.stages.freshness.row_dates`: observed → verified → published, never
  modified / retrieved; a wrapper's origin's date where the ranking resolved citation chains,
  ``lineage=cites``, the citation then giving the document's own date). A date after ``T`` is
  no usable age: the tiers treat it as unknown (the undated policy), as the ranking's
  freshness stage scores it, and the citation flags it ``after T``.

Tiers follow :mod:`credrank.context.tiers`: ``tier = min(S_tier, max(1, R − ⌊(T−t)/τ⌋))``.
``source_tier="auto"`` (declared): ``S_tier`` from the factor ``credibility`` (the learned
credibility, binned with :data:`~credrank.context.tiers.SOURCE_SCORE_CUTS`) when the batch has
it; else from the factor ``prior`` the ranking applied (binned the same way) whenever it is
not the plain ``current`` type preset — domain scores, a priors store, a learned reliability,
another preset or a prior file; else from the source type
(:data:`~credrank.context.tiers.SOURCE_TYPE_TIERS`, which is the ``current`` preset binned, so
the two agree there). ``source_tier="type"`` always uses the type; any other value names a factor
in ``[0, 1]`` to bin. The document's ``policy`` says what was used (``source_used``,
``undated_weight``).

``T`` (``now``): as given, else the evaluation time the ranking's freshness stage used (its
spec's ``now``, or the clock it read), else the current time — one clock for the ranking and
the tiers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from credrank.context.render import (
    FORMATS,
    GRANULARITIES,
    AnnotatedPassage,
    SentenceTier,
    count_labels,
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
    undated_weight,
)
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import check_text, hit_text
from credrank.core.validation import check_int
from credrank.freshness.config import parse_duration
from credrank.freshness.dates import SECONDS_PER_DAY, FreshnessDate, parse_instant
from credrank.freshness.decay import check_half_life
from credrank.freshness.policy import UnknownAge, parse_undated
from credrank.index.store import MAX_K
from credrank.pipeline.document import answered
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.signals.prior import CURRENT
from credrank.stages.freshness import row_dates


class _Compiled(Protocol):
    @property
    def settings(self) -> dict[str, Any]: ...


class RankingIndex(Protocol):
    """What :func:`search_context` needs of an index (a
    :class:`credrank.searcher.Searcher`, which sits above this layer): its embedder, its
    compiled settings per spec, and a search."""

    @property
    def embedder(self) -> Embedder: ...

    def compile(self, spec: PipelineSpec) -> _Compiled: ...

    def search(self, query: str, spec: PipelineSpec, *, text: str = ...,
               check: Callable[[str], None] | None = None) -> Candidates: ...

#: the passages in a context when neither a ``top_k`` nor a ``pipeline`` spec says (the
#: default of ``credrank context`` and ``POST /context``)
TOP_K = 5
#: the range of the values each kind of cut point bins: cosines, and scores in [0, 1]
RELEVANCE_RANGE, SOURCE_RANGE = (-1.0, 1.0), (0.0, 1.0)
#: the reason an excluded passage is given, by why its age is unknown
_UNDATED_REASON = ("unknown age (no observed_at, verified_at or published_at) under the "
                   "undated policy exclude")
_FUTURE_REASON = ("dated after the evaluation time T (no usable age: unknown) under the "
                  "undated policy exclude")


@dataclass(frozen=True)
class Excluded:
    """A ranked passage left out of the context, and why."""

    rank: int
    doc_id: str
    reason: str


@dataclass(frozen=True)
class TierPolicy:
    """The declared tier policy (:mod:`credrank.context.tiers`); ``interval_days=None``: no
    time downgrade (and then only the default ``undated`` policy: any other would be accepted
    and do nothing). Cut points lie in the range they bin: relevance in ``[-1, 1]``, source in
    ``[0, 1]``."""

    relevance_cuts: Cuts = field(default_factory=lambda: Cuts(*RELEVANCE_CUTS,
                                                                name="relevance_cuts"))
    source_cuts: Cuts = field(default_factory=lambda: Cuts(*SOURCE_SCORE_CUTS,
                                                             name="source_cuts"))
    source_tier: str = "auto"
    interval_days: float | None = None
    undated: UnknownAge = field(default_factory=UnknownAge)

    def __post_init__(self) -> None:
        object.__setattr__(self, "relevance_cuts", Cuts.of(self.relevance_cuts,
                                                           "relevance_cuts").within(
                                                               *RELEVANCE_RANGE))
        object.__setattr__(self, "source_cuts",
                           Cuts.of(self.source_cuts, "source_cuts").within(*SOURCE_RANGE))
        if self.interval_days is not None:
            object.__setattr__(self, "interval_days",
                               check_half_life(self.interval_days, "half_life",
                                               off="omit half_life for no time downgrade"))
        if not isinstance(self.source_tier, str) or not self.source_tier.strip():
            raise ValueError(f"source_tier: expected auto, type or a factor name, got "
                             f"{self.source_tier!r}")
        if not isinstance(self.undated, UnknownAge):
            object.__setattr__(self, "undated", parse_undated(str(self.undated)))
        if self.interval_days is None and self.undated != UnknownAge():
            # the words of check_context_options, the doors' check of the same rule
            raise ValueError(f"undated {self.undated.describe()}: only with half_life (the "
                             "unknown-age policy of the time downgrade, which is off without "
                             "it)")

    def describe(self) -> dict[str, Any]:
        return {
            "formula": "tier = min(S_tier, max(1, R - floor((T - t) / tau)))",
            "relevance_cuts": {"mid": self.relevance_cuts.mid, "high": self.relevance_cuts.high},
            "source": self.source_tier,
            "source_cuts": {"mid": self.source_cuts.mid, "high": self.source_cuts.high},
            "source_type_tiers": dict(SOURCE_TYPE_TIERS),
            "interval_days": self.interval_days,
            "undated": self.undated.describe(),
            "undated_mapping": "downgrade = floor(-log2 w_u), w_u the policy's weight (neutral: "
                               "the median weight of the dated candidates of the ranking's "
                               "pool, the w_u of its freshness stage when that ran with the "
                               "same half-life; see undated_weight); a date after T counts "
                               "as unknown; exclude: left out and reported; no interval: no "
                               "downgrade",
        }


#: the format version of the ``credrank context --json`` document (docs/json.md): 3 since a
#: passage's ``clamped`` became ``after_now`` (a date after the evaluation time is an unknown
#: age)
CONTEXT_FORMAT = 3


@dataclass(frozen=True)
class ContextDocument:
    """What :func:`build_context` / :func:`annotate` produce: the annotated passages in rank
    order, those left out, the policy and the evaluation time; ``used``: what the policy
    resolved to for this ranking (``source_used``: the basis of the source tiers;
    ``undated_weight``: ``w_u`` and where it came from), reported under ``policy``;
    ``info``: what the ranking's stages reported (the batch's ``info``, as ``credrank search
    --json`` has it: a consensus verdict, the documents freshness excluded, …) and, under
    ``context`` when there is any, what the context itself flags (labels the passages' text
    writes itself, dates after ``T``); ``settings`` and ``pipeline``: what it ran with and
    the spec it ran (as ``credrank search --json``'s; ``pipeline`` ``None`` when not
    known)."""

    query: str
    passages: list[AnnotatedPassage]
    excluded: list[Excluded]
    policy: TierPolicy
    granularity: str
    now: datetime
    settings: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    pipeline: dict[str, Any] | None = None
    used: dict[str, Any] = field(default_factory=dict)

    def render(self, fmt: str = "cag", cite: bool = True) -> str:
        """The ``cag`` / ``plain`` prompt or the ``json`` list (:mod:`credrank.context.render`);
        ``cite`` (default, as every door): each passage of a prompt with its source, URL and
        date."""
        return render(self.query, self.passages, fmt, cite)

    def to_json(self, fmt: str | None = None, cite: bool = True) -> dict[str, Any]:
        """The ``credrank context --json`` document (docs/json.md); with ``fmt``, the
        ``format``, ``cite`` and the rendered ``prompt`` (``cite``: as :meth:`render`); the
        spec under the top-level ``pipeline`` (as ``credrank search --json``: feeding it, or
        the whole document, back with ``--pipeline`` reproduces the ranking)."""
        out: dict[str, Any] = {
            "credrank_context": CONTEXT_FORMAT, "query": self.query,
            "granularity": self.granularity,
            "now": self.now.isoformat(), "policy": {**self.policy.describe(), **self.used},
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

    def notes(self) -> list[str]:
        """One line each for what a reader of the prompt alone would not see: the passages
        left out, an empty context, labels neutralised, dates after ``T`` (what ``credrank
        context`` says on stderr)."""
        lines = [f"excluded: #{e.rank} {e.doc_id}: {e.reason}" for e in self.excluded]
        flagged = self.info.get("context", {})
        if flagged.get("labels_neutralised"):
            lines.append(f"note: {flagged['labels_neutralised']} label(s) written inside the "
                         f"text of {', '.join(flagged['labels_in'])} neutralised in the prompt "
                         "(they are the document's words, not credrank's labels)")
        if flagged.get("dated_after_now"):
            lines.append(f"note: {', '.join(flagged['dated_after_now'])}: dated after T "
                         f"({self.now.isoformat()}); age counted as unknown (undated policy)")
        if not self.passages:
            lines.append(f"note: the context is empty: 0 passages ({len(self.excluded)} "
                         "excluded)")
        return lines


def parse_now(value: datetime | str | None, name: str = "now") -> datetime:
    """The evaluation time ``T`` (aware UTC); ``None`` → the current time. ``name``: the
    caller's word for it in an error."""
    if value is None:
        return datetime.now(UTC)
    parsed = parse_instant(value, name)
    if parsed is None:
        raise ValueError(f"{name}: expected an ISO 8601 date such as 2024-05-01 or "
                         f"2024-05-01T12:00:00Z, got {value!r}")
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError(f"{name}: expected a time that stays within years 1–9999 in UTC, got "
                         f"{value!r}") from None


def ranking_now(info: Mapping[str, Any]) -> datetime | None:
    """The evaluation time the ranking's freshness stage used (``info["freshness"]["now"]``:
    its spec's ``now`` or the clock it read), ``None`` when it did not run."""
    fresh = info.get("freshness")
    now = fresh.get("now") if isinstance(fresh, Mapping) else None
    return parse_now(now) if isinstance(now, str) else None


def annotate(batch: Candidates, *, now: datetime | str | None = None,
             half_life: float | str | None = None, undated: UnknownAge | str = "neutral",
             granularity: str = "document", embedder: Embedder | None = None,
             query_vector: np.ndarray | None = None,
             similarity: Sequence[float] | np.ndarray | None = None,
             similarity_source: str = "retrieval_score (cosine)", source_tier: str = "auto",
             relevance_cuts: Cuts | Sequence[float] = RELEVANCE_CUTS,
             source_cuts: Cuts | Sequence[float] = SOURCE_SCORE_CUTS,
             top_k: int | None = None, text: str = "full",
             pool: Candidates | None = None) -> ContextDocument:
    """Tier the rows of an already-ranked ``batch`` (in its order; the first ``top_k`` kept
    passages when given: an integer ``>= 1``).

    ``half_life`` is the interval ``τ``: days, or a duration as every door writes it (``365d``,
    ``52w``, ``1y``, ``12h``; ``None``: no time downgrade, and ``undated``
    must stay the default); ``now`` the evaluation time ``T`` (default: the ranking's, module
    docstring); ``undated`` the unknown-age policy (``neutral``, ``penalty:0.5``, ``exclude``,
    …). ``neutral``'s median is over the ranking's candidate pool: the weight the ranking's
    freshness stage gave the undated when it ran with the same ``τ``, else the dated
    candidates of ``pool`` (the same spec ranked with ``top_k = fetch_k``), else those of
    ``batch`` itself, all of it before the ``top_k`` cut (pass the whole pool with
    ``top_k``, or ``pool``); ``policy.undated_weight`` says which. ``similarity`` overrides
    the batch's ``retrieval_score`` (a bench with its own cosines; name it with
    ``similarity_source``). Sentence granularity needs the ``embedder`` (the index's) and
    embeds the query with it unless ``query_vector`` is given. ``text`` is what each passage
    carries (the one option of every hit, :mod:`credrank.core.hittext`): ``full`` (as
    indexed), ``snippet`` (its snippet around the query words; sentence granularity tiers the
    snippet's sentences) or ``none`` (no text: only the JSON form renders it; not at sentence
    granularity).
    """
    text = check_text(text)
    if top_k is not None:
        top_k = check_int("top_k", top_k, 1, MAX_K)
    check_sentence_text(text, check_granularity(granularity))
    policy = TierPolicy(Cuts.of(relevance_cuts, "relevance_cuts"),
                        Cuts.of(source_cuts, "source_cuts"), source_tier, _days(half_life),
                        undated if isinstance(undated, UnknownAge) else parse_undated(undated))
    found = ranking_now(batch.info) if now is None else None
    t_now = found if found is not None else parse_now(now)
    n = len(batch)
    sims = (batch.retrieval_score if similarity is None
            else np.asarray(similarity, dtype=np.float64).reshape(-1))
    if len(sims) != n:
        raise ValueError(f"similarity: expected {n} values (one per candidate), got {len(sims)}")
    if not np.all(np.isfinite(sims)):
        raise ValueError("similarity: expected finite values")
    r = relevance_tier(sims, policy.relevance_cuts)
    s, basis, source_used = _source_tiers(batch, policy)
    fresh = _dates(batch, t_now)
    elapsed = _elapsed(fresh, t_now)
    # a claim the ranking's freshness config opts out of decay (no_decay: a time-persistent
    # claim, 35.7) loses no tier to age either, dated or not (its elapsed days still shown)
    aged = np.where(_no_decay(batch), 0.0, elapsed)
    unknown = np.isnan(aged)
    limit = n if top_k is None else top_k
    w_u: float | None = None
    weight_said: dict[str, Any] = {"from": None,
                                   "basis": "not used: no time downgrade (no half_life)"}
    if policy.interval_days is not None:
        if policy.undated.kind == "exclude":
            weight_said["basis"] = "not used: exclude leaves the passages of unknown age out"
        elif not unknown[:limit].any():
            weight_said["basis"] = "not used: no passage of unknown age in the context"
        else:
            w_u, weight_said = _undated_weight(batch, fresh, pool, policy.undated,
                                               policy.interval_days, t_now)
    k, out = downgrades(aged, policy.interval_days, policy.undated, w_u)
    tiers = combine_tiers(r, s, k)

    keep = [i for i in range(n) if not out[i]]
    last = n  # the excluded that rank above the last kept passage (all, if none is cut)
    if top_k is not None and len(keep) >= top_k:
        keep = keep[:top_k]
        last = keep[-1]
    excluded = [Excluded(i + 1, str(batch.doc_ids[i]),
                         _FUTURE_REASON if fresh[i].after_now else _UNDATED_REASON)
                for i in range(n) if out[i] and i < last]
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
            freshness_basis=fresh[i].basis, after_now=fresh[i].after_now,
            document_date=_iso(fresh[i].written if fresh[i].after_now
                               or fresh[i].basis.startswith("inherited:") else fresh[i].date),
            elapsed_days=None if math.isnan(elapsed[i]) else float(elapsed[i]),
            retrieval_score=float(batch.retrieval_score[i]), score=float(batch.score[i]),
            factors={name: float(v[i]) for name, v in batch.factors.items()},
            sentences=sentences.get(i), passage=parts[i]))
    used = {"source_used": source_used, "undated_weight": {"value": w_u, **weight_said}}
    return ContextDocument(batch.query, passages, excluded, policy, granularity, t_now,
                           info=_flagged(dict(batch.info), passages), used=used)


def check_context_spec(spec: PipelineSpec) -> PipelineSpec:
    """``spec`` if its ranking can be tiered: lexical retrieval is refused (relevance tiers
    bin cosine similarities; BM25 scores have no stated cut points)."""
    if spec.retrieval != "dense":
        raise ValueError(f"retrieval: expected dense (relevance tiers bin cosine similarities; "
                         f"lexical BM25 scores have no stated cut points), got "
                         f"{spec.retrieval!r}")
    return spec


def build_context(ranked: Candidates, *, embedder: Embedder | None = None,
                  now: datetime | str | None = None, half_life: float | str | None = None,
                  undated: UnknownAge | str = "neutral", granularity: str = "document",
                  source_tier: str = "auto",
                  relevance_cuts: Cuts | Sequence[float] = RELEVANCE_CUTS,
                  source_cuts: Cuts | Sequence[float] = SOURCE_SCORE_CUTS,
                  describe: dict[str, Any] | None = None,
                  text: str = "full", top_k: int | None = None,
                  pool: Candidates | None = None) -> ContextDocument:
    """:func:`annotate` the top-k a ranking returned (``ranked``: the result of
    :meth:`credrank.searcher.Searcher.search` under a spec :func:`check_context_spec`
    accepts, with the hits' text unless ``text`` is ``none``; ``text``: ``full`` |
    ``snippet`` | ``none``, as there). ``embedder``: the index's, for sentence tiers.
    ``pool``: the ranking's whole candidate pool, for the ``neutral`` median (as
    :func:`annotate`; :func:`search_context` passes it). ``describe``: the settings as JSON
    (:attr:`credrank.pipeline.compile.Compiled.settings`, with the spec under ``pipeline``),
    recorded as ``credrank search --json`` records them
    (:func:`credrank.pipeline.document.answered`): ``settings`` with the hits'
    ``text``, the spec as the document's ``pipeline`` (with the evaluation time the freshness
    stage read, so that replaying it ranks the same). ``top_k``: keep at most this many
    passages (an integer ``>= 1``: the first that the undated policy does not exclude)."""
    if not isinstance(ranked.query, str) or not ranked.query.strip():
        raise ValueError("query: expected non-empty text")
    doc = annotate(ranked, now=now, half_life=half_life, undated=undated,
                   granularity=granularity, embedder=embedder, source_tier=source_tier,
                   query_vector=ranked.query_vector,  # the ranking's: sentences tiered by it
                   relevance_cuts=relevance_cuts, source_cuts=source_cuts, text=text,
                   top_k=top_k, pool=pool)
    settings: dict[str, Any] = {}
    pipeline: dict[str, Any] | None = None
    if describe is not None:
        settings, pipeline = answered(describe, ranked.info, text)
    return ContextDocument(doc.query, doc.passages, doc.excluded, doc.policy, doc.granularity,
                           doc.now, settings, doc.info, pipeline, doc.used)


def _days(half_life: float | str | None) -> float | None:
    """``half_life`` in days: a number as it is, a duration (``365d``, ``52w``, ``1y``,
    ``12h``) as every door reads it (:func:`~credrank.freshness.config.parse_duration`)."""
    return parse_duration(half_life, "half_life") if isinstance(half_life, str) else half_life


def check_context_options(fmt: str, text: str, granularity: str, half_life: float | None,
                          undated: str, words: Callable[[str], str] = str) -> None:
    """The checks between a context's options, the same at every door (``words``: the door's
    name of an option, ``half_life`` → ``--half-life`` for the CLI; the field's own name for
    HTTP): an ``undated`` policy other than ``neutral`` needs ``half_life`` (it was accepted
    and did nothing), and ``text none`` leaves nothing to print in the ``cag`` and ``plain``
    prompts or to split into sentences. A ``ValueError`` whose head is the option's word."""
    w = words
    if half_life is None and undated != "neutral":
        raise ValueError(f"{w('undated')} {undated}: only with {w('half_life')} (the unknown-age "
                         "policy of the time downgrade, which is off without it)")
    if text == "none" and fmt != "json":
        raise ValueError(f"{w('text')} none: {w('format')} {fmt} prints the passages' text; use "
                         f"{w('format')} json (the passages' tiers and inputs without their "
                         f"text) or {w('text')} full|snippet")
    check_sentence_text(text, granularity, w)


def check_granularity(granularity: str) -> str:
    """``granularity`` if it is one of :data:`~credrank.context.render.GRANULARITIES` (the
    one check of every door), else a ``ValueError`` headed ``granularity``."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, got "
                         f"{granularity!r}")
    return granularity


def check_sentence_text(text: str, granularity: str, words: Callable[[str], str] = str) -> None:
    """``text none`` with sentence granularity is a ``ValueError``: nothing to split into
    sentences (``words``: as :func:`check_context_options`)."""
    if text == "none" and granularity == "sentence":
        raise ValueError(f"{words('text')} none: {words('granularity')} sentence tiers the "
                         f"sentences of the text; use {words('text')} full|snippet")


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of :data:`~credrank.context.render.FORMATS`."""
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def one_clock(spec: PipelineSpec, now: str | None) -> PipelineSpec:
    """``spec`` with ``now`` (as given) as the ``now`` of each freshness stage that would read
    the clock: one evaluation time ``T`` for the ranking and the tiers. A stage whose own
    ``now`` is another time is a :class:`~credrank.pipeline.spec.SpecError` at its ``now``
    (each door says it where its caller wrote it); ``now=None``: ``spec`` as it is (the
    tiers then take the stage's ``T``, :func:`ranking_now`)."""
    if now is None:
        return spec
    t_now = parse_now(now)
    data = spec.to_dict()
    stages = data.get("stages", [])
    for i, stage in enumerate(stages):
        if not (isinstance(stage, dict) and stage.get("stage") == "freshness"):
            continue
        own = stage.get("now")
        if own is None:
            stages[i] = {**stage, "now": now}
        elif parse_now(own) != t_now:  # said where the caller wrote that now
            path = f"{spec.written(i)}.now"
            detail = (f"expected no now of its own or the context's now {now}, got {own!r}; "
                      "give one evaluation time (drop one)")
            raise SpecError(f"{path}: {detail}", path, detail)
    return PipelineSpec.from_dict(data)


def search_context(searcher: RankingIndex, query: str, spec: PipelineSpec, *,
                   now: str | None = None, half_life: float | str | None = None,
                   undated: UnknownAge | str = "neutral", granularity: str = "document",
                   source_tier: str = "auto", text: str = "full",
                   check: Callable[[str], None] | None = None,
                   pool: int | None = None) -> ContextDocument:
    """The context of ``query``: ranked by ``spec`` over ``searcher``'s index, then
    :func:`build_context` (the one path of ``credrank context``, ``POST /context`` and, over
    a :class:`~credrank.context.given.GivenRanking`, of a context over candidates retrieved
    elsewhere; ``check``: the searcher's checkpoint callable, as :meth:`Searcher.search`;
    ``pool``: the size of the pool the longer rankings below reach, default the spec's
    ``fetch_k``, the candidates' number over given candidates).

    ``now`` becomes the freshness stage's ``T`` too (:func:`one_clock`). With ``undated
    exclude``, the passages left out are replaced by the next dated hits of the same pool
    (the default selector, whose longer ranking starts with the shorter one; after another
    selector the context holds fewer). With ``neutral``, its median is over the pool: the
    freshness stage's weight when it ran with the same ``τ``, else the same spec ranked with
    ``top_k = fetch_k`` (one more search, only when a passage of unknown age is shown)."""
    check_sentence_text(check_text(text), check_granularity(granularity))  # before any ranking
    spec = check_context_spec(one_clock(spec, now))
    policy = TierPolicy(source_tier=source_tier, interval_days=_days(half_life),
                        undated=undated if isinstance(undated, UnknownAge)
                        else parse_undated(undated))
    whole = spec.resolved_fetch_k if pool is None else pool
    describe: dict[str, Any] | None = None
    shown = spec
    while True:
        ranked = searcher.search(query, shown, text=text, check=check)
        if describe is None:  # after the first ranking (a given pool's settings say what
            describe = searcher.compile(spec).settings  # its retrieval resolved to)
        options: dict[str, Any] = dict(
            embedder=searcher.embedder, now=now, half_life=policy.interval_days,
            undated=policy.undated, granularity=granularity, source_tier=source_tier, text=text,
            describe=describe, top_k=spec.top_k)
        doc = build_context(ranked, pool=ranked if shown.top_k >= whole else None, **options)
        if (doc.used.get("undated_weight") or {}).get("from") == "ranked":
            ranked_pool = searcher.search(query, spec.replace_top(top_k=whole, fetch_k=whole),
                                          text="none", check=check)
            doc = build_context(ranked, pool=ranked_pool, **options)
        wider = _refill(spec, shown, len(doc.passages), len(doc.excluded), whole)
        if wider is None:
            return doc
        shown = wider


def _refill(spec: PipelineSpec, shown: PipelineSpec, kept: int, excluded: int, pool: int
            ) -> PipelineSpec | None:
    """The spec of the next search when ``undated exclude`` left fewer than ``top_k``
    passages (``kept``; ``excluded`` left out of ``shown``'s ranking): the same pool
    (``fetch_k``), ``excluded`` more hits, so that the next dated ones fill the context as a
    longer ranking continues this one; ``None`` when it is full or the pool is spent. Only
    for the default selector (``topk``), whose longer ranking starts with the shorter one; a
    selection (``mmr``, ``exposure`` …) of more hits is another selection, and its context
    stays shorter. ``pool``: the size of the pool (:func:`search_context`)."""
    if (kept >= spec.top_k or not excluded or shown.top_k >= pool
            or spec.stages[-1].name != "topk"):
        return None
    return shown.replace_top(top_k=min(pool, shown.top_k + excluded), fetch_k=pool)


# -- helpers ------------------------------------------------------------------------------------

def _source_tiers(batch: Candidates, policy: TierPolicy
                  ) -> tuple[np.ndarray, list[str], dict[str, str]]:
    """``S_tier`` per row, its basis (``source_type:blog`` or ``factor:credibility=0.73``) and
    what the policy used (``{"basis": "factor:prior", "why": …}``, module docstring)."""
    name, why = policy.source_tier, "as asked"
    if name == "auto":
        if "credibility" in batch.factors:
            name, why = "credibility", "auto: the learned credibility the ranking applied"
        elif "prior" in batch.factors and not _current_type_prior(batch):
            name, why = "prior", ("auto: the prior the ranking applied, which is not the "
                                  "current type preset (domain scores, a priors store, a "
                                  "reliability, another preset or a prior file)")
        else:
            name, why = "type", ("auto: the source type table (the current preset binned"
                                 + (", which is the prior the ranking applied)"
                                    if "prior" in batch.factors else
                                    "; the ranking applied no prior)"))
    if name == "type":
        types = batch.column("source_type")
        tiers = source_tier_from_type(types)
        return (tiers, [f"source_type:{t if isinstance(t, str) else 'unknown'}" for t in types],
                {"basis": "source_type", "why": why})
    if name not in batch.factors:
        raise ValueError(f"source_tier: the ranked batch has no factor {name!r} (factors: "
                         f"{', '.join(batch.factors) or 'none'}); use auto or type")
    values = batch.factors[name]
    return (source_tier_from_score(values, policy.source_cuts),
            [f"factor:{name}={float(v):.6g}" for v in values],
            {"basis": f"factor:{name}", "why": why})


def _current_type_prior(batch: Candidates) -> bool:
    """Whether every row's ``prior`` factor is the ``current`` preset's value for its source
    type (:data:`credrank.signals.prior.CURRENT`): the prior the type table bins."""
    default = CURRENT["unknown"]
    expected = np.array([CURRENT.get(t, default) if isinstance(t, str) else default
                         for t in batch.column("source_type")], dtype=np.float64)
    return bool(np.allclose(np.asarray(batch.factors["prior"], dtype=np.float64), expected,
                            rtol=0.0, atol=1e-6))


def _dates(batch: Candidates, t_now: datetime) -> list[FreshnessDate]:
    """Each row's evidence date at ``t_now`` as the ranking's freshness stage reads it
    (:func:`~credrank.stages.freshness.row_dates`: a wrapper's origin's date when the ranking
    resolved citation chains, ``lineage=cites``; a date after ``t_now`` an unknown age)."""
    return row_dates(batch, t_now)


def _no_decay(batch: Candidates) -> np.ndarray:
    """The rows the ranking's freshness stage did not decay (its ``freshness_half_life``
    column ``None``: a config's no-decay opt-out); none when that stage did not run."""
    if "freshness_half_life" not in batch.meta:
        return np.zeros(len(batch), dtype=bool)
    return np.array([t is None for t in batch.column("freshness_half_life")], dtype=bool)


def _elapsed(fresh: Sequence[FreshnessDate], t_now: datetime) -> np.ndarray:
    """Days from each date to ``t_now``; ``NaN`` without a date and for a date after
    ``t_now`` (no usable age, never the best one: as the ranking's freshness stage counts it,
    so the ``neutral`` median is the same whether the stage ran or not)."""
    return np.array([np.nan if f.date is None else
                     (t_now - f.date).total_seconds() / SECONDS_PER_DAY for f in fresh],
                    dtype=np.float64)


def _undated_weight(batch: Candidates, fresh: Sequence[FreshnessDate], pool: Candidates | None,
                    undated: UnknownAge, tau: float, t_now: datetime
                    ) -> tuple[float | None, dict[str, Any]]:
    """``w_u`` of the passages of unknown age under ``undated`` (not ``exclude``) at the
    interval ``tau`` and where it came from (:func:`annotate`; ``fresh``: the freshness dates
    of ``batch``'s rows, read once there)."""
    if undated.value is not None:
        return undated.value, {"from": "policy", "basis": f"stated: {undated.describe()}"}
    stage = batch.info.get("freshness")
    if isinstance(stage, Mapping) and "freshness" in batch.factors:
        said = stage.get("undated") or {}
        weight = said.get("weight") if isinstance(said, Mapping) else None
        same = (isinstance(stage.get("half_life"), int | float) and "half_lives" not in stage
                and math.isclose(float(stage["half_life"]), tau, rel_tol=1e-9))
        if (same and isinstance(weight, int | float) and math.isfinite(weight)
                and said.get("policy") == UnknownAge().describe()):
            dated = (stage.get("counts") or {}).get("dated")
            return float(weight), {"from": "freshness stage", "basis": (
                f"the ranking's freshness stage: the median weight of the {dated} dated "
                f"candidates of its pool at the same half-life ({tau:g} days)")}
    if pool is not None:
        e = _elapsed(_dates(pool, t_now), t_now)
        dated_e = e[~np.isnan(e)]
        return undated_weight(undated, dated_e, tau), {"from": "pool", "basis": (
            f"the median weight of the {dated_e.size} dated of the ranking's pool of "
            f"{len(pool)} candidates (a date after T of unknown age, as the freshness "
            "stage counts it)")}
    e = _elapsed(fresh, t_now)
    dated_e = e[~np.isnan(e)]
    return undated_weight(undated, dated_e, tau), {"from": "ranked", "basis": (
        f"the median weight of the {dated_e.size} dated of the {len(batch)} ranked passages "
        "given (not the whole pool: pass pool=, or the pool ranked with top_k)")}


def _flagged(info: dict[str, Any], passages: Sequence[AnnotatedPassage]) -> dict[str, Any]:
    """``info`` with, under ``context``, what the context flags: labels written inside the
    passages' text (neutralised in the prompts) and dates after ``T``; unchanged when
    there are none."""
    labels = {p.doc_id: count_labels(p) for p in passages}
    labels = {d: c for d, c in labels.items() if c}
    late = [p.doc_id for p in passages if p.after_now]
    if not labels and not late:
        return info
    return {**info, "context": {"labels_neutralised": sum(labels.values()),
                                "labels_in": list(labels), "dated_after_now": late}}


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
    """``value`` in UTC, ISO 8601 (a library caller's ``+02:00`` date is cited in UTC, as the
    index stores every date)."""
    return None if value is None else value.astimezone(UTC).isoformat()


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
